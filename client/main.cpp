// fanout: the client CLI. main() dispatches to one subcommand; each subcommand has a function
// that declares its options (CLI11) and returns what runs it, which calls into client_core.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "client/commands/adhoc.hpp"
#include "client/commands/adhoc_argv.hpp"
#include "client/commands/client.hpp"
#include "client/commands/dashboard.hpp"
#include "client/commands/executor_serve.hpp"
#include "client/commands/explore.hpp"
#include "client/commands/follow.hpp"
#include "client/commands/keygen.hpp"
#include "client/commands/perf.hpp"
#include "client/commands/pipeline.hpp"
#include "client/commands/python_cmd.hpp"
#include "client/commands/report_cmds.hpp"
#include "client/commands/status.hpp"
#include "fanout/config/batch_deployment.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/config/parallel_run_config.hpp"
#include "fanout/config/pipeline.hpp"
#include "fanout/net/security.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/store/file_trust.hpp"
#include "fanout/util/cli_help.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/log.hpp"
#include "fanout/util/memory.hpp"
#include "fanout/util/spelling.hpp"

namespace {

namespace client = fanout::client;
using fanout::Logger;
using fanout::proto::kExitInfra;
using fanout::proto::kExitUsage;

// A declared subcommand: its CLI11 node, and what runs it once the command line is parsed.
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int(const Logger&)> run{};
};

// Allowed values, shared by the options that take them.
CLI::IsMember log_levels() {
  return CLI::IsMember({"trace", "debug", "info", "warn", "warning", "error", "critical", "off"},
                       CLI::ignore_case);
}
CLI::Range job_ids() {
  return CLI::Range(std::uint64_t{1}, std::numeric_limits<std::uint64_t>::max());
}
CLI::Range counts() { return CLI::Range(1u, 1000000u); }  // workers, pools

// GNU parallel's -j forms, as worker counts: 0 (as many as sensible: 8 per core), N% of the
// cores, +N and -N cores; a plain number is left as it is.
CLI::Validator gnu_jobs() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (v.empty()) return {};
        const long cores = std::max(1L, static_cast<long>(std::thread::hardware_concurrency()));
        const std::string digits = v.substr(v.front() == '+' || v.front() == '-' ? 1 : 0,
                                            v.back() == '%' ? v.size() - 1 : std::string::npos);
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos ||
            digits.size() > 6) {
          return {};  // the count check says what is wrong
        }
        const long n = std::stol(digits);
        long workers = n;
        if (v.back() == '%') {
          workers = cores * n / 100;
        } else if (v.front() == '+') {
          workers = cores + n;
        } else if (v.front() == '-') {
          workers = cores - n;
        } else if (n == 0) {
          workers = 8 * cores;
        }
        v = std::to_string(std::max(1L, workers));
        return {};
      },
      "N|0|N%|+N|-N");
}

// ---- help layout and "did you mean" ----

// Lists each option of `cmd` under a help group, with the value name help shows for it (nullptr:
// the formatter's own). Every name must be declared: a renamed option fails here, not silently.
struct HelpPlace {
  const char* option;
  const char* group;
  const char* value = nullptr;
};
void place_in_help(CLI::App* cmd, std::initializer_list<HelpPlace> places) {
  for (const HelpPlace& p : places) {
    CLI::Option* o = cmd->get_option_no_throw(p.option);
    FANOUT_ASSERT(o != nullptr);
    o->group(p.group);
    if (p.value != nullptr) o->type_name(p.value);
  }
}

// A mistyped subcommand, before CLI11 parses (it would only say that a subcommand is required):
// prints the error, with the nearest subcommand when one is near, and returns true.
bool unknown_subcommand(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return false;
  const std::string word = argv[1];
  std::vector<std::string_view> names;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == word) return false;
    names.push_back(sub->get_name());
  }
  const std::string_view best = fanout::nearest_word(word, names);
  if (best.empty()) {
    std::fprintf(stderr, "error: unknown command '%s' (fanout --help lists them)\n", word.c_str());
  } else {
    std::fprintf(stderr, "error: unknown command '%s'; did you mean '%.*s'?\n", word.c_str(),
                 static_cast<int>(best.size()), best.data());
  }
  return true;
}

// After CLI11 refused the command line: the first --option the subcommand does not have, with
// the nearest one it has. Prints the error and returns true, or returns false (nothing of the
// kind) to leave the error to CLI11.
bool unknown_option(const CLI::App& app, int argc, char** argv) {
  const CLI::App* cmd = &app;
  std::string where = "fanout";
  int first = 1;
  if (argc > 1 && argv[1][0] != '-') {
    cmd = app.get_subcommand(argv[1]);  // unknown_subcommand() has checked the name
    where += std::string(" ") + argv[1];
    first = 2;
  }
  std::vector<std::string> longs;
  for (const CLI::Option* o : cmd->get_options()) {
    for (const std::string& n : o->get_lnames()) longs.push_back("--" + n);
  }
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;  // the rest are values
    if (arg.rfind("--", 0) != 0) continue;
    const std::string name = arg.substr(0, arg.find('='));
    if (std::find(longs.begin(), longs.end(), name) != longs.end()) continue;
    const std::string_view best =
        fanout::nearest_word(name, std::vector<std::string_view>(longs.begin(), longs.end()));
    if (best.empty()) {
      std::fprintf(stderr, "error: %s: unknown option '%s' (%s --help lists them)\n", where.c_str(),
                   name.c_str(), where.c_str());
    } else {
      std::fprintf(stderr, "error: %s: unknown option '%s'; did you mean '%.*s'?\n", where.c_str(),
                   name.c_str(), static_cast<int>(best.size()), best.data());
    }
    return true;
  }
  return false;
}

// Curve keys for a tcp:// --interchange (docs/security.md).
void add_key_options(CLI::App* cmd, fanout::net::Security& sec) {
  cmd->add_option("--keys", sec.keys_dir,
                  "key folder for a tcp:// interchange (default: $FANOUT_KEYS, else "
                  "~/.config/fanout/keys)");
  cmd->add_option("--key", sec.key_name, "this client's key pair in it (default: client)");
  cmd->add_flag("--insecure", sec.insecure,
                "plaintext, unauthenticated tcp:// (loopback addresses only)");
  place_in_help(
      cmd, {{"--keys", "Cluster", "DIR"}, {"--key", "Cluster", "NAME"}, {"--insecure", "Cluster"}});
}

// ---- run ----

// GNU parallel's input sources and options of an ad-hoc run, taken off the command line by
// split_adhoc_argv before CLI11 reads the rest (it would take their values for positional
// arguments).
client::AdhocArgv g_gnu;

struct RunArgs {
  client::RunOverrides ov;
  client::AdhocOptions ao;  // -c CMD --input ...: an ad-hoc run without a job file
  bool bar = false;         // --bar: show the progress of an ad-hoc run (quiet by default)
  std::string job_file, input, output;
  fanout::config::DeploymentRun deployment;
  CLI::App* cmd = nullptr;
};

// GNU parallel's options of an ad-hoc run (docs/adhoc.md). `-q` is --quote with -c or ::: (the
// argv pre-pass, split_adhoc_argv, turns it into --quote there), else --quiet.
void add_gnu_parallel_options(CLI::App* run, RunArgs& a) {
  const std::string group = "Ad-hoc (-c)";
  run->add_flag("--quote", a.ao.quote_all,
                "with -c (-q): quote every value put into the command (default: only where the "
                "shell needs it)")
      ->group(group);
  run->add_flag("-k,--keep-order", a.ao.keep_order,
                "with -c: print the rows in input order (each as soon as those before it are out)")
      ->group(group);
  run->add_option("--joblog", a.ao.joblog,
                  "with -c: write GNU parallel's job log (Seq Host Starttime ...) to FILE")
      ->group(group);
  run->add_flag("--bar", a.bar, "with -c: show the progress (an ad-hoc run is quiet otherwise)")
      ->group(group);
  run->add_flag("--dry-run", a.ao.dry_run, "with -c: print the commands, run nothing")
      ->group(group);
  run->add_option("--halt", a.ao.halt,
                  "with -c: stop early: soon|now,fail|success|done=N|P% (GNU parallel's)")
      ->group(group);
  run->add_flag("--tag", a.ao.tag, "with -c: start each output line with its item and a TAB")
      ->group(group);
  run->add_option("--results", a.ao.results,
                  "with -c: save each item's stdout, stderr and seq under DIR/1/VALUE/ (not "
                  "printed)")
      ->group(group);
  place_in_help(run, {{"--joblog", group.c_str(), "FILE"},
                      {"--halt", group.c_str(), "WHEN"},
                      {"--results", group.c_str(), "DIR"}});
}

// The options of an ad-hoc run without a job file, as with GNU parallel
// (client/commands/adhoc.hpp).
constexpr std::array<const char*, 14> kAdhocOnly = {
    "--name",  "--mini-batch-size", "--retries", "--timeout", "--error-threshold", "--env",
    "--quote", "--keep-order",      "--joblog",  "--bar",     "--dry-run",         "--halt",
    "--tag",   "--results"};
void add_adhoc_options(CLI::App* run, RunArgs& a) {
  run->add_option("job", a.job_file, "the job file (or -c CMD --input ... without one)");
  run->add_option("-c,--command", a.ao.command,
                  "run CMD once per item of --input instead of a job file; "
                  "{} {.} {/} {//} {/.} {#} {%} {n} as in GNU parallel");
  // --input/--output: what an ad-hoc run, a batch deployment or a ParallelRunConfig file reads
  // and writes.
  run->add_option(
      "--input", a.input,
      "with -c: a folder (its files are the items), a list file (its lines), or - "
      "(lines on stdin); with a batch deployment or ParallelRunConfig file: the folder or "
      "file to score");
  run->add_option("--output", a.output,
                  "with -c: the file the rows (the command's stdout lines) go to (default: "
                  "printed to stdout when the job ends); with a batch deployment or "
                  "ParallelRunConfig file: the output folder (default: beside the file)");
  run->add_option("--name", a.ao.name, "with -c: the job's name (default: adhoc-PROGRAM)");
  run->add_option("--mini-batch-size", a.ao.mini_batch_size, "with -c: items per mini-batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_option("--retries", a.ao.max_retries, "with -c: tries after the first for a mini-batch")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  run->add_option("--timeout", a.ao.timeout_s,
                  "with -c: seconds a mini-batch may run (default 0: none)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--error-threshold", a.ao.error_threshold,
                  "with -c: failed items allowed before the job fails (-1: run everything)")
      ->check(CLI::Range(std::int64_t{-1}, std::numeric_limits<std::int64_t>::max()))
      ->capture_default_str();
  run->add_option("--env", a.ao.env, "with -c: NAME=VALUE for the command (repeatable)");
  add_gnu_parallel_options(run, a);
}

// A long list of independent option declarations; splitting it would only scatter them.
// The batch-scheduler flags of `fanout run` (docs/cluster.md): each replaces its fanout: key.
void add_batch_scheduler_options(CLI::App* run, client::RunOverrides& ov) {
  run->add_option("--queue", ov.queue, "pbs, lsf: the queue (fanout.queue; #PBS -q, #BSUB -q)");
  run->add_option("--nodes-per-block", ov.nodes_per_block,
                  "slurm, pbs, lsf, condor: nodes in one pool job, one pool on each "
                  "(fanout.nodes_per_block; default 1)")
      ->check(CLI::Range(1u, 100000u));
  run->add_option("--worker-init", ov.worker_init,
                  "shell lines run on each node before the pool starts (fanout.worker_init)");
  run->add_option("--scheduler-options", ov.scheduler_options,
                  "directive lines passed through verbatim: #SBATCH, #PBS, #BSUB or condor "
                  "`key = value` (fanout.scheduler_options)");
}

// The ssh launcher's flags of `fanout run` (docs/cluster.md): each replaces its fanout: key.
void add_ssh_options(CLI::App* run, client::RunOverrides& ov) {
  run->add_option("--hosts", ov.hosts,
                  "ssh: the hosts, comma-separated, one pool each (fanout.hosts)")
      ->group("Cluster")
      ->type_name("H1,H2");
  run->add_option("--ssh-option", ov.ssh_options,
                  "ssh: options for every ssh command, e.g. \"-p 2222\" or \"-i KEY\" "
                  "(repeatable; fanout.ssh_options)")
      ->group("Cluster")
      ->type_name("OPTS");
  run->add_option("--pool-command", ov.pool_command,
                  "ssh: fanout-pool's path on the hosts (fanout.pool_command; default: this "
                  "client's)")
      ->group("Cluster")
      ->type_name("PATH");
}

// The elastic pool-job flags of `fanout run` (docs/cluster.md, section 6): each replaces its
// fanout: key; any of them turns scaling on.
void add_elastic_options(CLI::App* run, client::RunOverrides& ov) {
  run->add_option("--init-nodes", ov.init_nodes,
                  "batch launchers: pool jobs at the start, then scaled between --min-nodes and "
                  "--max-nodes (fanout.init_nodes; Parsl's init_blocks)")
      ->check(CLI::Range(1u, 100000u));
  run->add_option("--parallelism", ov.parallelism,
                  "batch launchers: slots wanted per outstanding mini-batch, 0 to 1; turns "
                  "scaling on (fanout.parallelism; default 1)")
      ->check(CLI::Range(0.0, 1.0));
  run->add_option("--max-idletime", ov.max_idletime_s,
                  "batch launchers: seconds a pool may idle while nothing waits before its job is "
                  "released; turns scaling on (fanout.max_idletime; default 120)")
      ->check(CLI::Range(0.0, 1e9));
}

void add_run_options(CLI::App* run, client::RunOverrides& ov) {
  run->add_option("--interchange", ov.interchange,
                  "client endpoint of a running interchange (default: start a private one)");
  run->add_option("--db", ov.db,
                  "SQLite store (default: $FANOUT_DB or "
                  "~/.local/share/fanout/fanout.db)");
  run->add_option("--python", ov.python, "Python interpreter for the workers");
  run->add_option("--run-dir", ov.run_dir, "folder for the job's logs (default: beside the db)");
  run->add_option("--prefetch", ov.prefetch, "mini-batches each pool holds beyond free workers")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1000000}));
  run->add_option("--poll-ms", ov.poll_ms, "poll period of the pools")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{60000}));
  run->add_option("--workers,-j", ov.workers,
                  "worker processes per pool (also GNU's 0, N%, +N, -N)")
      ->transform(gnu_jobs())
      ->check(counts());
  run->add_option("--pools", ov.pools, "local pools (overrides resources.instance_count)")
      ->check(counts());
  run->add_option("--priority", ov.priority,
                  "the job's weight in the interchange's fair share between running jobs "
                  "(fanout.priority; default 1)")
      ->check(CLI::Range(1u, 1000000u));
  run->add_option("--launcher", ov.launcher,
                  "where the pools run: local (default), slurm, sge, pbs, lsf, condor or ssh "
                  "(docs/cluster.md)")
      ->check(CLI::IsMember({"local", "slurm", "sge", "pbs", "lsf", "condor", "ssh"}));
  run->add_option("--nodes", ov.nodes,
                  "slurm: pool jobs (one node each) at the start (default: instance_count)")
      ->check(CLI::Range(1u, 100000u));
  run->add_option("--min-nodes", ov.min_nodes,
                  "slurm: pool jobs kept pending or running; ended ones are replaced (default: "
                  "--nodes)");
  run->add_option("--max-nodes", ov.max_nodes,
                  "slurm: pool jobs submitted in all, replacements included (default: --nodes)");
  run->add_option("--interchange-address", ov.interchange_address,
                  "slurm: the address the nodes reach this host at (default: the first "
                  "non-loopback interface)");
  add_batch_scheduler_options(run, ov);
  add_ssh_options(run, ov);
  add_elastic_options(run, ov);
  run->add_flag("--exit-with-client", ov.exit_with_client,
                "if this client dies, release the pools (scancel) and stop the interchange");
  run->add_option("--window", ov.window,
                  "mini-batches the private interchange lets this client submit ahead of those "
                  "finished (default: its own, 20000)")
      ->check(CLI::Range(1u, 100000000u));
  run->add_flag("--quiet,-q", ov.quiet, "no progress output and no note: lines");
  run->add_flag("--allow-partial", ov.allow_partial,
                "exit 0 when some mini-batches failed within the thresholds (job state partial; "
                "also fanout.allow_partial)");
  run->add_flag("--json", ov.json, "progress as JSON events on stdout, one object per line");
}

// The store an ad-hoc run's job goes to (its job file is written beside it).
std::string adhoc_store(const RunArgs& a) {
  return a.ov.db.empty() ? client::default_db_path() : a.ov.db;
}

// The job file a run runs: the one given, or for -c CMD the ad-hoc job written for it (`adhoc`;
// its job_file is empty when nothing is to run: --dry-run, an empty input). Returns kExitOk, else
// the exit code after printing why.
int resolve_job_file(RunArgs& a, std::optional<client::AdhocJob>& adhoc) {
  a.ao.sources = g_gnu.sources;
  if (!a.ao.command.empty()) {
    a.ao.max_args = g_gnu.gnu.max_args;
    a.ao.multi = g_gnu.gnu.multi;
    a.ao.colsep = g_gnu.gnu.colsep;
    a.ao.pipe = g_gnu.gnu.pipe;
    a.ao.block = g_gnu.gnu.block;
    a.ao.jobs = a.ov.workers != 0 ? a.ov.workers : std::thread::hardware_concurrency();
    a.ao.input = a.input;
    a.ao.output = a.output;
    a.ao.overwrite = a.ov.overwrite;
    if (!a.job_file.empty()) {
      std::fprintf(stderr, "error: run: give a job file or -c CMD, not both\n");
      return kExitUsage;
    }
    // GNU parallel says nothing but the commands' output unless asked (--bar).
    if (!a.bar && !a.ov.json) {
      a.ov.quiet = true;
      a.ov.silent_success = true;
    }
    auto job = client::write_adhoc_job(
        a.ao, (std::filesystem::absolute(adhoc_store(a)).parent_path() / "adhoc").string());
    if (!job) {
      std::fprintf(stderr, "error: %s\n", job.error().message.c_str());
      return kExitUsage;
    }
    a.job_file = job->job_file;
    adhoc = std::move(*job);
    if (a.job_file.empty()) return fanout::proto::kExitOk;
  } else {
    a.deployment.input = a.input;
    a.deployment.output = a.output;
    if (!a.ao.sources.empty()) {
      std::fprintf(stderr, "error: run: ::: and -a give the items of an ad-hoc run; add -c CMD\n");
      return kExitUsage;
    }
    for (const char* o : kAdhocOnly) {
      if (a.cmd->count(o) > 0) {
        std::fprintf(stderr, "error: run: %s needs -c CMD (an ad-hoc run)\n", o);
        return kExitUsage;
      }
    }
  }
  if (a.job_file.empty()) {
    std::fprintf(stderr, "error: run: expected a job file, or -c CMD --input DIR|FILE|-\n");
    return kExitUsage;
  }
  return fanout::proto::kExitOk;
}

// An ad-hoc run with nothing to run: --dry-run prints the commands; an empty input (GNU: no
// jobs) writes an empty --joblog and exits 0.
int finish_idle_adhoc(const RunArgs& a, const client::AdhocJob& job) {
  for (const auto& line : job.dry_run) std::printf("%s\n", line.c_str());
  if (!a.ao.dry_run && !a.ao.joblog.empty()) {
    if (auto r = client::write_joblog(adhoc_store(a), job, a.ao); !r) {
      std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
      return kExitInfra;
    }
  }
  return fanout::proto::kExitOk;
}

// Runs an ad-hoc job, its output streamed as it comes; then its --joblog.
int run_adhoc(const fanout::config::JobConfig& cfg, RunArgs& a, const client::AdhocJob& job,
              const Logger& log) {
  std::optional<client::AdhocStream> stream;
  stream.emplace(job, adhoc_store(a), a.ao.keep_order);
  // The last rows and stderr lines come before the summary, which names them.
  a.ov.before_summary = [&stream] { stream->stop(); };
  a.ov.halt = [&stream] { return stream->halt_reason(); };
  int rc = client::run_job(cfg, a.ov, log);
  a.ov.before_summary = {};
  a.ov.halt = {};
  stream->stop();
  // GNU's --halt success=N|done=N ends the run well once it is met.
  if (stream->halted_on_success()) rc = fanout::proto::kExitOk;
  if (!a.ao.joblog.empty()) {
    if (auto r = client::write_joblog(adhoc_store(a), job, a.ao); !r) {
      std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
      if (rc == fanout::proto::kExitOk) rc = kExitInfra;
    }
  }
  return rc;
}

int run_command(RunArgs& a, const Logger& log) {
  fanout::net::warn_if_insecure(a.ov.security, log);
  std::optional<client::AdhocJob> adhoc;  // an ad-hoc run's job: its rows are streamed
  if (int rc = resolve_job_file(a, adhoc); rc != fanout::proto::kExitOk) return rc;
  if (adhoc && adhoc->job_file.empty()) return finish_idle_adhoc(a, *adhoc);
  // Errors about the generated job file name the user's own options instead.
  auto say = [&](const std::string& message) {
    const std::string m = adhoc ? client::adhoc_error(message, a.job_file) : message;
    std::fprintf(stderr, "error: %s\n", m.c_str());
  };
  // A pipeline file runs its jobs in order; anything else is a parallel job.
  if (auto type = fanout::config::job_file_type(a.job_file); type && *type == "pipeline") {
    try {
      return client::run_pipeline(a.job_file, a.ov, log);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return kExitInfra;
    }
  }
  // An Azure ML batch deployment, or a v1 ParallelRunConfig file, runs as a parallel job over
  // --input.
  const bool is_deployment = fanout::config::is_batch_deployment(a.job_file);
  const bool is_v1_config = !is_deployment && fanout::config::is_parallel_run_config(a.job_file);
  if (!is_deployment && !is_v1_config &&
      (!a.deployment.input.empty() || !a.deployment.output.empty())) {
    std::fprintf(stderr,
                 "error: --input and --output are for batch deployment and ParallelRunConfig "
                 "files; %s is a job file (its inputs and outputs say what it reads and writes)\n",
                 a.job_file.c_str());
    return kExitUsage;
  }
  auto cfg = is_deployment  ? fanout::config::load_batch_deployment(a.job_file, a.deployment)
             : is_v1_config ? fanout::config::load_parallel_run_config(a.job_file, a.deployment)
                            : fanout::config::load_job(a.job_file);
  if (!cfg) {
    say(cfg.error().message);
    return kExitUsage;
  }
  // The entry-script check runs on while the run's interchange starts (run_job awaits it).
  auto pending = client::prepare_started(*cfg, a.ov);
  if (!pending) {
    say(pending.error().message);
    return kExitUsage;
  }
  try {
    if (adhoc) {
      if (auto r = pending->finish(); !r) {
        say(r.error().message);
        return kExitUsage;
      }
      return run_adhoc(*cfg, a, *adhoc, log);
    }
    return client::run_job(*cfg, a.ov, log, std::move(*pending));
  } catch (const std::exception& e) {
    say(e.what());
    return kExitInfra;
  }
}

// The embedded interchange's Prometheus endpoint (docs/observability.md).
void add_metrics_option(CLI::App* run, client::RunOverrides& ov) {
  run->add_option("--metrics-listen", ov.metrics_listen,
                  "the private interchange serves Prometheus metrics on HOST:PORT at /metrics "
                  "(fanout.metrics_listen)");
}

Subcommand add_run(CLI::App& app, std::string& log_level) {
  auto a = std::make_shared<RunArgs>();
  a->cmd = app.add_subcommand("run", "run a job file (Azure ML parallel-job YAML)");
  add_adhoc_options(a->cmd, *a);
  add_run_options(a->cmd, a->ov);
  a->cmd->add_option("--log-level", log_level, "the client's own log level")
      ->check(log_levels())
      ->capture_default_str();
  add_key_options(a->cmd, a->ov.security);
  add_metrics_option(a->cmd, a->ov);
  a->cmd->add_flag("--overwrite", a->ov.overwrite,
                   "replace the append_row file an earlier job wrote (default: refuse)");
  a->cmd->add_flag("--share-with-group", a->ov.share_with_group,
                   "create the store and the run folder readable by the group too (default: the "
                   "owner only; the output file keeps your umask)");
  place_in_help(a->cmd, {{"--db", "Output", "PATH"},
                         {"--run-dir", "Output", "DIR"},
                         {"--overwrite", "Output"},
                         {"--share-with-group", "Output"},
                         {"--quiet", "Output"},
                         {"--json", "Output"},
                         {"--log-level", "Output", "LEVEL"},
                         {"--workers", "Workers", "N"},
                         {"--pools", "Workers", "N"},
                         {"--python", "Workers", "PATH"},
                         {"--priority", "Workers", "N"},
                         {"--allow-partial", "Failures"},
                         {"--interchange", "Cluster", "ENDPOINT"},
                         {"--launcher", "Cluster", "KIND"},
                         {"--nodes", "Cluster", "N"},
                         {"--min-nodes", "Cluster", "N"},
                         {"--max-nodes", "Cluster", "N"},
                         {"--init-nodes", "Cluster", "N"},
                         {"--parallelism", "Cluster", "X"},
                         {"--max-idletime", "Cluster", "S"},
                         {"--interchange-address", "Cluster", "ADDR"},
                         {"--exit-with-client", "Cluster"},
                         {"--prefetch", "Advanced", "N"},
                         {"--poll-ms", "Advanced", "MS"},
                         {"--window", "Advanced", "N"}});
  return {a->cmd, [a](const Logger& log) { return run_command(*a, log); }};
}

// ---- keygen, history ----

Subcommand add_keygen(CLI::App& app) {
  auto ko = std::make_shared<client::KeygenOptions>();
  auto* cmd = app.add_subcommand(
      "keygen", "make the key folder of CurveZMQ keys for tcp:// endpoints (docs/security.md)");
  cmd->add_option("--dir", ko->dir,
                  "the key folder (default: $FANOUT_KEYS, else ~/.config/fanout/keys)");
  cmd->add_option("--add-client", ko->add_client,
                  "add and authorise a client key NAME (repeatable)");
  cmd->add_option("--add-pool", ko->add_pool, "add and authorise a pool key NAME (repeatable)");
  place_in_help(cmd, {{"--dir", "Options", "DIR"},
                      {"--add-client", "Options", "NAME"},
                      {"--add-pool", "Options", "NAME"}});
  return {cmd, [ko](const Logger&) { return client::keygen(*ko); }};
}

// The store a read-only command reads: --db, else the default.
std::string store_or_default(const std::string& db) {
  return db.empty() ? client::default_db_path() : db;
}

Subcommand add_history(CLI::App& app) {
  struct Args {
    std::string db, state;
    std::size_t limit = 20;
    bool json = false;
    std::string experiment{};
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("history", "recent jobs in the store");
  cmd->add_option("--db", a->db, "SQLite store");
  cmd->add_option("--limit,-n", a->limit, "jobs to show (0: all)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1000000000}))
      ->capture_default_str();
  cmd->add_option("--state", a->state, "only jobs in this state")
      ->check(CLI::IsMember({"running", "succeeded", "partial", "failed", "cancelled"}));
  cmd->add_flag("--json", a->json, "machine-readable output");
  cmd->add_option("--experiment", a->experiment,
                  "the runs of one fanout explore experiment (else each is one row)");
  place_in_help(
      cmd,
      {{"--db", "Options", "PATH"}, {"--limit", "Options", "N"}, {"--state", "Options", "STATE"}});
  return {cmd, [a](const Logger&) {
            return client::print_history(store_or_default(a->db), a->limit, a->state, a->json,
                                         a->experiment);
          }};
}

// ---- wait, cancel, resume: following a job by id ----

Subcommand add_follow(CLI::App& app, bool cancel) {
  struct Args {
    std::uint64_t job_id = 0;
    client::FollowOptions fo;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = cancel ? app.add_subcommand("cancel", "stop a running job")
                     : app.add_subcommand("wait", "follow a running job to its end (reattach)");
  cmd->add_option("job", a->job_id, "the job id")->required()->check(job_ids());
  cmd->add_option("--db", a->fo.db, "SQLite store (default: as for run)");
  cmd->add_option("--interchange", a->fo.interchange,
                  "client endpoint (default: from the job's run folder)");
  cmd->add_flag("--quiet,-q", a->fo.quiet, "no progress output");
  if (!cancel) {
    cmd->add_flag("--allow-partial", a->fo.allow_partial, "exit 0 when the job ends partial");
  } else {
    cmd->add_option("--reason", a->fo.reason,
                    "why, as the store records it (default: cancelled by fanout cancel)");
  }
  add_key_options(cmd, a->fo.security);
  place_in_help(cmd, {{"--db", "Options", "PATH"}, {"--interchange", "Cluster", "ENDPOINT"}});
  return {cmd, [a, cancel](const Logger& log) {
            fanout::net::warn_if_insecure(a->fo.security, log);
            a->fo.db = store_or_default(a->fo.db);
            a->fo.cancel = cancel;
            return client::follow_job(a->job_id, a->fo, log);
          }};
}

Subcommand add_resume(CLI::App& app) {
  struct Args {
    std::uint64_t job_id = 0;
    client::ResumeOptions ro;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "resume",
      "finish an unfinished job on a private interchange (after a crash); --failed: re-run "
      "what failed");
  cmd->add_option("job", a->job_id, "the job id")->required()->check(job_ids());
  cmd->add_option("--db", a->ro.db, "SQLite store (default: as for run)");
  cmd->add_option("--python", a->ro.python, "Python interpreter for the workers");
  cmd->add_option("--workers", a->ro.workers, "worker processes per pool (default: the job's)")
      ->check(counts());
  cmd->add_option("--pools", a->ro.pools, "local pools (default: the job's instance_count)")
      ->check(counts());
  cmd->add_flag("--quiet,-q", a->ro.quiet, "no progress output");
  cmd->add_flag("--allow-partial", a->ro.allow_partial, "exit 0 when the job ends partial");
  cmd->add_flag("--failed", a->ro.failed,
                "also re-run the mini-batches that failed, of an ended job too (failed, "
                "cancelled, partial); the output gets only their rows");
  cmd->add_flag("--accept-changed-input", a->ro.accept_changed_input,
                "resume even when the job's input no longer lists as it was submitted (files "
                "added or removed, a table changed); recorded in the store");
  place_in_help(cmd, {{"--db", "Output", "PATH"},
                      {"--quiet", "Output"},
                      {"--python", "Workers", "PATH"},
                      {"--workers", "Workers", "N"},
                      {"--pools", "Workers", "N"},
                      {"--allow-partial", "Failures"},
                      {"--failed", "Failures"},
                      {"--accept-changed-input", "Input"}});
  return {cmd, [a](const Logger& log) {
            a->ro.db = store_or_default(a->ro.db);
            // An ad-hoc job's remaining rows go where the first run sent them: stdout.
            auto stream = client::adhoc_resume_stream(a->ro.db, a->job_id);
            const int rc = client::resume_job(a->job_id, a->ro, log);
            if (stream) stream->stop();
            return rc;
          }};
}

// ---- status, report, compare, tune: reading the store ----

Subcommand add_status(CLI::App& app) {
  struct Args {
    std::uint64_t job_id = 0;
    std::string db;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("status", "a job's counts, rate, pools and last errors");
  cmd->add_option("job", a->job_id, "the job id")->required()->check(job_ids());
  cmd->add_option("--db", a->db, "SQLite store");
  cmd->add_flag("--json", a->json, "machine-readable output");
  place_in_help(cmd, {{"--db", "Options", "PATH"}});
  return {cmd, [a](const Logger&) {
            return client::print_status(store_or_default(a->db), a->job_id, a->json);
          }};
}

Subcommand add_report(CLI::App& app) {
  struct Args {
    std::uint64_t job_id = 0;
    std::string db, out;
    bool html = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("report", "regenerate a job's logs folder from the store");
  cmd->add_option("job", a->job_id, "the job id")->required()->check(job_ids());
  cmd->add_option("--out", a->out, "folder to write to (default: the job's logs folder)");
  cmd->add_option("--db", a->db, "SQLite store");
  cmd->add_flag("--html", a->html, "write report.html (--out: the file) instead");
  place_in_help(cmd, {{"--out", "Options", "PATH"}, {"--db", "Options", "PATH"}});
  return {cmd, [a](const Logger&) {
            const std::string db = store_or_default(a->db);
            return a->html ? client::write_html_report(db, a->job_id, a->out)
                           : client::write_report(db, a->job_id, a->out);
          }};
}

Subcommand add_compare(CLI::App& app) {
  struct Args {
    std::vector<std::uint64_t> ids;
    std::string db, html;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("compare", "compare runs: settings that differ, effect");
  cmd->add_option("jobs", a->ids, "job ids")->required()->check(job_ids());
  cmd->add_option("--html", a->html, "also write the comparison page to this file");
  cmd->add_option("--db", a->db, "SQLite store");
  place_in_help(cmd, {{"--html", "Options", "FILE"}, {"--db", "Options", "PATH"}});
  return {cmd, [a](const Logger&) {
            return client::compare_jobs(store_or_default(a->db), a->ids, a->html);
          }};
}

Subcommand add_tune(CLI::App& app) {
  struct Args {
    std::uint64_t job_id = 0;
    std::string db, write;
    fanout::report::TuneOptions to;
  };
  auto a = std::make_shared<Args>();
  auto* cmd =
      app.add_subcommand("tune", "what to change in a job's settings, from what it measured");
  cmd->add_option("job", a->job_id, "the job id")->required()->check(job_ids());
  cmd->add_option("--target-duration", a->to.target_duration_s, "desired duration (s): node count")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--cores", a->to.cores,
                  "cores per node (default: this machine's, if it ran here)")
      ->check(counts());
  cmd->add_option("--write", a->write, "write the suggested settings (YAML) to this file");
  cmd->add_option("--db", a->db, "SQLite store");
  place_in_help(cmd, {{"--target-duration", "Options", "SECONDS"},
                      {"--cores", "Options", "N"},
                      {"--write", "Options", "FILE"},
                      {"--db", "Options", "PATH"}});
  return {cmd, [a](const Logger&) {
            return client::tune_job(store_or_default(a->db), a->job_id, a->to, a->write);
          }};
}

// ---- explore: experiments over a job's settings (docs/explore.md) ----

// A budget in seconds: "600", "90s", "10m", "1h"; nullopt when it is none of these.
std::optional<double> parse_budget(const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    const std::string unit = text.substr(used);
    const double scale = unit.empty() || unit == "s" ? 1
                         : unit == "m"               ? 60
                         : unit == "h"               ? 3600
                                                     : 0;
    if (scale == 0 || v <= 0) return std::nullopt;
    return v * scale;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Subcommand add_explore(CLI::App& app) {
  struct Args {
    client::ExploreOptions eo;
    client::RunOverrides ov;
    std::string budget = "10m";
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "explore", "find the best settings for a job by experiment on a sample of its input");
  cmd->add_option("job", a->eo.job_file, "the job file (not with --resume)");
  cmd->add_option("--budget", a->budget, "wall-clock budget: 600, 90s, 10m, 1h (default 10m)");
  cmd->add_option("--sample", a->eo.sample, "input files or rows to use: N or P% (default 10%)");
  cmd->add_option("--factors", a->eo.factors,
                  "factors to vary, comma-separated (default: mini_batch_size, workers, "
                  "prefetch, poll_ms)");
  cmd->add_option("--factor", a->eo.factor_levels,
                  "NAME=L1,L2,...: a factor's levels (repeatable)");
  cmd->add_option("--repeats", a->eo.repeats,
                  "runs of each level, each beside a base run, before a verdict (default 3)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{20}));
  cmd->add_option("--seed", a->eo.seed, "the rounds' shuffle (default: from the experiment id)");
  cmd->add_option("--write", a->eo.write, "write the best configuration's settings (YAML)");
  cmd->add_option("--resume", a->eo.resume, "continue experiment EXP from the store");
  cmd->add_flag("--verbose", a->eo.verbose,
                "print each run's own progress and summary (default: one line per run)");
  add_run_options(cmd, a->ov);
  add_key_options(cmd, a->ov.security);
  return {cmd, [a](const Logger& log) {
            auto budget = parse_budget(a->budget);
            if (!budget) {
              std::fprintf(stderr, "error: explore: --budget %s: expected seconds or Ns, Nm, Nh\n",
                           a->budget.c_str());
              return kExitUsage;
            }
            a->eo.budget_s = *budget;
            if (a->eo.job_file.empty() == a->eo.resume.empty()) {
              std::fprintf(stderr,
                           "error: explore: give a job file or --resume EXP (one of them)\n");
              return kExitUsage;
            }
            return client::run_explore(a->eo, a->ov, log);
          }};
}

// ---- dashboard ----

Subcommand add_dashboard(CLI::App& app) {
  auto a = std::make_shared<client::DashboardOptions>();
  auto* cmd = app.add_subcommand(
      "dashboard", "a read-only web app over the store: jobs, live job pages, compare, tune");
  cmd->add_option("--db", a->db, "SQLite store");
  cmd->add_option("--listen", a->listen,
                  "HOST:PORT to serve on; an address other than loopback needs a token")
      ->capture_default_str();
  cmd->add_option("--token-file", a->token_file,
                  "every request must carry the token this file holds (?token=T, a cookie, or "
                  "Authorization: Bearer T); the file must be yours, mode 0600; or set " +
                      std::string(client::kTokenEnv));
  // Refused with the reason: `ps` shows a command line to every user.
  cmd->add_option_function<std::string>(
         "--token", [a](const std::string&) { a->token_on_command_line = true; },
         "refused: use --token-file")
      ->group("");
  cmd->add_flag("--generate-token", a->generate_token,
                "make a random token and print it once, with the URL");
  cmd->add_option("--ready-file", a->ready_file, "write url=... here once listening");
  return {cmd, [a](const Logger& log) {
            a->db = store_or_default(a->db);
            return client::run_dashboard(*a, log);
          }};
}

// ---- perf ----

// A long list of independent option declarations; splitting it would only scatter them.
Subcommand add_perf(CLI::App& app) {
  struct Args {
    client::PerfOptions po;
    bool no_ceiling = false, no_baseline = false;
  };
  auto a = std::make_shared<Args>();
  client::PerfOptions& po = a->po;
  auto* perf = app.add_subcommand(
      "perf", "benchmark: push no-op mini-batches through the real path and report the rates");
  perf->add_option("--tasks,-n", po.tasks, "mini-batches")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1000000000000}))
      ->capture_default_str();
  perf->add_option("--time", po.seconds, "submit for this many seconds instead of --tasks")
      ->check(CLI::PositiveNumber);
  perf->add_option("--runtime", po.runtime, "noop (native builtin:noop) or python (empty run())")
      ->check(CLI::IsMember({"noop", "python"}))
      ->capture_default_str();
  perf->add_option("--python", po.python, "interpreter for --runtime python")
      ->capture_default_str();
  perf->add_option("--workers", po.workers, "workers per pool")
      ->check(counts())
      ->capture_default_str();
  perf->add_option("--pools", po.pools, "local pools")->check(counts())->capture_default_str();
  perf->add_option("--prefetch", po.prefetch,
                   "mini-batches per pool beyond free workers (default 256)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1000000}));
  perf->add_option("--poll-ms", po.poll_ms, "poll period of the pools")
      ->check(CLI::Range(1u, 60000u))
      ->capture_default_str();
  perf->add_option("--log-level", po.log_level, "log level of the interchange and pools")
      ->check(log_levels())
      ->capture_default_str();
  perf->add_option("--sleep-ms", po.sleep_ms, "each mini-batch sleeps this long")
      ->check(CLI::Range(0u, 3600000u))
      ->capture_default_str();
  perf->add_option("--items-per-batch", po.items_per_batch, "items per mini-batch")
      ->check(counts())
      ->capture_default_str();
  perf->add_option("--window", po.window, "the interchange's client window (default: its own)")
      ->check(counts());
  perf->add_flag("--json", po.json, "one JSON object per run on stdout");
  perf->add_flag("--sweep", po.sweep, "vary each tuning knob in turn and print its effect");
  perf->add_flag("--no-ceiling", a->no_ceiling, "skip the ZeroMQ relay probe");
  perf->add_flag("--no-baseline", a->no_baseline, "skip the multiprocessing.Pool baseline");
  perf->add_flag("--curve", po.curve,
                 "also run over Curve-encrypted TCP and print its ratio to the measured run "
                 "(with --insecure-tcp: to plaintext TCP)");
  perf->add_flag("--encrypted", po.encrypted,
                 "measure over Curve-encrypted TCP loopback instead of private ipc://");
  perf->add_flag("--insecure-tcp", po.insecure_tcp,
                 "UNSAFE: measure over plaintext TCP loopback instead of private ipc://; while it "
                 "runs, any local user can submit jobs that run as you");
  perf->add_option("--keep", po.keep_dir, "keep the store and logs in this folder");
  perf->add_option(
      "--metrics-listen", po.metrics_listen,
      "the interchange serves Prometheus metrics on HOST:PORT (to measure their cost)");
  place_in_help(perf, {{"--tasks", "Input", "N"},
                       {"--time", "Input", "SECONDS"},
                       {"--runtime", "Input"},
                       {"--sleep-ms", "Input", "MS"},
                       {"--items-per-batch", "Input", "N"},
                       {"--json", "Output"},
                       {"--keep", "Output", "DIR"},
                       {"--log-level", "Output", "LEVEL"},
                       {"--python", "Workers", "PATH"},
                       {"--workers", "Workers", "N"},
                       {"--pools", "Workers", "N"},
                       {"--curve", "Cluster"},
                       {"--encrypted", "Cluster"},
                       {"--insecure-tcp", "Cluster"},
                       {"--prefetch", "Advanced", "N"},
                       {"--poll-ms", "Advanced", "MS"},
                       {"--window", "Advanced", "N"},
                       {"--sweep", "Advanced"},
                       {"--no-ceiling", "Advanced"},
                       {"--no-baseline", "Advanced"},
                       {"--metrics-listen", "Advanced", "HOST:PORT"}});
  return {perf, [a](const Logger& log) {
            a->po.ceiling = !a->no_ceiling;
            a->po.baseline = !a->no_baseline;
            return client::run_perf(a->po, log);
          }};
}

// ---- python, executor-serve: the Python package (docs/python.md) ----

Subcommand add_python(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "python",
      "run a Python program with `import fanout` available: fanout python [FILE | -c CODE | -m "
      "MODULE] [ARGS...] (interpreter: $FANOUT_PYTHON, else python3)");
  cmd->prefix_command();  // everything after `python` is the interpreter's
  return {cmd, [cmd](const Logger&) { return client::exec_python(cmd->remaining()); }};
}

// Hidden: the process a fanout.Executor starts (client/commands/executor_serve.hpp).
Subcommand add_executor_serve(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  a->cmd = app.add_subcommand("executor-serve", "");
  a->cmd->group("");
  a->cmd->add_option("job", a->job_file, "the job file the Executor wrote")->required();
  add_run_options(a->cmd, a->ov);
  add_key_options(a->cmd, a->ov.security);
  return {a->cmd, [a](const Logger& log) {
            fanout::net::warn_if_insecure(a->ov.security, log);
            return client::serve_executor(a->job_file, a->ov, log);
          }};
}

}  // namespace

int main(int argc, char** argv) {
  fanout::keep_freed_memory();
  // Named, so help and the man pages say `fanout`, never the path it was started by.
  CLI::App app{"fanout: run a program over a large input in parallel", "fanout"};
  app.formatter(std::make_shared<fanout::HelpFormatter>());  // before the subcommands: they copy it
  app.require_subcommand(1);
  app.set_version_flag("--version", FANOUT_VERSION);
  std::string log_level = "warning";  // the client's own; only `run` takes --log-level
  const std::vector<Subcommand> commands = {
      add_run(app, log_level), add_keygen(app), add_history(app), add_follow(app, false),
      add_follow(app, true),   add_resume(app), add_status(app),  add_report(app),
      add_compare(app),        add_tune(app),   add_perf(app),    add_dashboard(app),
      add_explore(app)};
  const std::vector<Subcommand> python_commands = {add_python(app), add_executor_serve(app)};
  auto gnu = client::split_adhoc_argv(argc, argv);
  if (!gnu) return kExitUsage;
  g_gnu = std::move(*gnu);
  std::vector<char*> cargs;
  for (auto& a : g_gnu.args) cargs.push_back(a.data());
  const int cargc = static_cast<int>(cargs.size());
  if (unknown_subcommand(app, cargc, cargs.data())) return kExitUsage;
  try {
    app.parse(cargc, cargs.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every command-line error exits 2 (README, exit status).
    if (e.get_exit_code() != 0 && unknown_option(app, cargc, cargs.data())) return kExitUsage;
    return app.exit(e) == 0 ? fanout::proto::kExitOk : kExitUsage;
  }
  auto level = fanout::parse_log_level(log_level);
  if (!level) {
    std::fprintf(stderr, "error: --log-level: %s\n", level.error().message.c_str());
    return kExitUsage;
  }
  auto log = fanout::make_logger("client", *level);
  // Commands that only read a store and print what it says may read one shared by its owner
  // with the group; every other command (run, resume, wait, explore, report's writes into the
  // job's own folder) takes files of this user or root only (docs/security.md, "The store's
  // files").
  for (const char* reader : {"history", "status", "compare", "tune", "dashboard"}) {
    if (app.got_subcommand(reader))
      fanout::store::set_store_trust(fanout::store::StoreTrust::Reader);
  }
  for (const Subcommand& c : commands) {
    if (c.app->parsed()) return c.run(log);
  }
  for (const Subcommand& c : python_commands) {
    if (c.app->parsed()) return c.run(log);
  }
  return kExitUsage;
}
