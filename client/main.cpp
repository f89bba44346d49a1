// fanout: the client CLI. main() dispatches to one subcommand; each subcommand has a function
// that declares its options (CLI11) and returns what runs it, which calls into client_core.
#include <CLI/CLI.hpp>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "client/commands/adhoc.hpp"
#include "client/commands/client.hpp"
#include "client/commands/dashboard.hpp"
#include "client/commands/follow.hpp"
#include "client/commands/keygen.hpp"
#include "client/commands/perf.hpp"
#include "client/commands/pipeline.hpp"
#include "client/commands/report_cmds.hpp"
#include "client/commands/status.hpp"
#include "fanout/config/batch_deployment.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/config/pipeline.hpp"
#include "fanout/net/security.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/util/log.hpp"

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

// Curve keys for a tcp:// --interchange (docs/security.md).
void add_key_options(CLI::App* cmd, fanout::net::Security& sec) {
  cmd->add_option("--keys", sec.keys_dir,
                  "key folder for a tcp:// interchange (default: $FANOUT_KEYS, else "
                  "~/.config/fanout/keys)");
  cmd->add_option("--key", sec.key_name, "this client's key pair in it (default: client)");
  cmd->add_flag("--insecure", sec.insecure,
                "plaintext, unauthenticated tcp:// (loopback addresses only)");
}

// ---- run ----

struct RunArgs {
  client::RunOverrides ov;
  client::AdhocOptions ao;  // -c CMD --input ...: an ad-hoc run without a job file
  std::string job_file, input, output;
  fanout::config::DeploymentRun deployment;
  CLI::App* cmd = nullptr;
};

// The options of an ad-hoc run without a job file, as with GNU parallel
// (client/commands/adhoc.hpp).
constexpr std::array<const char*, 6> kAdhocOnly = {"--name",    "--mini-batch-size", "--retries",
                                                   "--timeout", "--error-threshold", "--env"};
void add_adhoc_options(CLI::App* run, RunArgs& a) {
  run->add_option("job", a.job_file, "the job file (or -c CMD --input ... without one)");
  run->add_option("-c,--command", a.ao.command,
                  "run CMD once per item of --input instead of a job file; "
                  "{} {.} {/} {//} {/.} {#} as in GNU parallel");
  // --input/--output: what an ad-hoc run or a batch deployment file reads and writes.
  run->add_option("--input", a.input,
                  "with -c: a folder (its files are the items), a list file (its lines), or - "
                  "(lines on stdin); with a batch deployment file: the folder or file to score");
  run->add_option("--output", a.output,
                  "with -c: the file the rows (the command's stdout lines) go to (default: "
                  "printed to stdout when the job ends); with a batch deployment file: the "
                  "output folder (default: beside the file)");
  run->add_option("--name", a.ao.name, "with -c: the job's name (default: adhoc-PROGRAM)");
  run->add_option("--mini-batch-size", a.ao.mini_batch_size, "with -c: items per mini-batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_option("--retries", a.ao.max_retries, "with -c: tries after the first for a mini-batch")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  run->add_option("--timeout", a.ao.timeout_s, "with -c: seconds a mini-batch may run (0: none)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--error-threshold", a.ao.error_threshold,
                  "with -c: failed items allowed before the job fails (-1: run everything)")
      ->check(CLI::Range(std::int64_t{-1}, std::numeric_limits<std::int64_t>::max()))
      ->capture_default_str();
  run->add_option("--env", a.ao.env, "with -c: NAME=VALUE for the command (repeatable)");
}

// A long list of independent option declarations; splitting it would only scatter them.
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
  run->add_option("--workers,-j", ov.workers, "worker processes per pool")->check(counts());
  run->add_option("--pools", ov.pools, "local pools (overrides resources.instance_count)")
      ->check(counts());
  run->add_option("--priority", ov.priority,
                  "the job's weight in the interchange's fair share between running jobs "
                  "(fanout.priority; default 1)")
      ->check(CLI::Range(1u, 1000000u));
  run->add_option("--launcher", ov.launcher,
                  "where the pools run: local (default) or slurm (docs/cluster.md)")
      ->check(CLI::IsMember({"local", "slurm"}));
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

// The job file a run runs: the one given, or for -c CMD the ad-hoc job written for it (and
// `print_rows`, the rows file printed when it ends). Returns kExitOk, else the exit code after
// printing why.
int resolve_job_file(RunArgs& a, std::string& print_rows) {
  if (!a.ao.command.empty()) {
    a.ao.input = a.input;
    a.ao.output = a.output;
    if (!a.job_file.empty()) {
      std::fprintf(stderr, "error: run: give a job file or -c CMD, not both\n");
      return kExitUsage;
    }
    const std::string store = a.ov.db.empty() ? client::default_db_path() : a.ov.db;
    auto job = client::write_adhoc_job(
        a.ao, (std::filesystem::absolute(store).parent_path() / "adhoc").string());
    if (!job) {
      std::fprintf(stderr, "error: %s\n", job.error().message.c_str());
      return kExitUsage;
    }
    a.job_file = job->job_file;
    print_rows = job->print_rows;
  } else {
    a.deployment.input = a.input;
    a.deployment.output = a.output;
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

int run_command(RunArgs& a, const Logger& log) {
  fanout::net::warn_if_insecure(a.ov.security, log);
  std::string print_rows;  // an ad-hoc run's rows, printed when it ends
  if (int rc = resolve_job_file(a, print_rows); rc != fanout::proto::kExitOk) return rc;
  // A pipeline file runs its jobs in order; anything else is a parallel job.
  if (auto type = fanout::config::job_file_type(a.job_file); type && *type == "pipeline") {
    try {
      return client::run_pipeline(a.job_file, a.ov, log);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return kExitInfra;
    }
  }
  // An Azure ML batch deployment runs as a parallel job over --input.
  const bool is_deployment = fanout::config::is_batch_deployment(a.job_file);
  if (!is_deployment && (!a.deployment.input.empty() || !a.deployment.output.empty())) {
    std::fprintf(stderr,
                 "error: --input and --output are for batch deployment files; %s is "
                 "a job file (its inputs and outputs say what it reads and writes)\n",
                 a.job_file.c_str());
    return kExitUsage;
  }
  auto cfg = is_deployment ? fanout::config::load_batch_deployment(a.job_file, a.deployment)
                           : fanout::config::load_job(a.job_file);
  if (!cfg) {
    std::fprintf(stderr, "error: %s\n", cfg.error().message.c_str());
    return kExitUsage;
  }
  if (auto r = client::prepare(*cfg, a.ov); !r) {
    std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
    return kExitUsage;
  }
  try {
    const int rc = client::run_job(*cfg, a.ov, log);
    if (!print_rows.empty()) client::print_rows_file(print_rows);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
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
  return {cmd, [a](const Logger&) {
            return client::print_history(store_or_default(a->db), a->limit, a->state, a->json);
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
  }
  add_key_options(cmd, a->fo.security);
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
  return {cmd, [a](const Logger& log) {
            a->ro.db = store_or_default(a->ro.db);
            return client::resume_job(a->job_id, a->ro, log);
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
  return {cmd, [a](const Logger&) {
            return client::tune_job(store_or_default(a->db), a->job_id, a->to, a->write);
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
  cmd->add_option("--token", a->token,
                  "every request must carry it (?token=T, a cookie, or "
                  "Authorization: Bearer T)");
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
  return {perf, [a](const Logger& log) {
            a->po.ceiling = !a->no_ceiling;
            a->po.baseline = !a->no_baseline;
            return client::run_perf(a->po, log);
          }};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fanout: run a program over a large input in parallel"};
  app.require_subcommand(1);
  app.set_version_flag("--version", FANOUT_VERSION);
  std::string log_level = "warning";  // the client's own; only `run` takes --log-level
  const std::vector<Subcommand> commands = {
      add_run(app, log_level), add_keygen(app), add_history(app), add_follow(app, false),
      add_follow(app, true),   add_resume(app), add_status(app),  add_report(app),
      add_compare(app),        add_tune(app),   add_perf(app),    add_dashboard(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every command-line error exits 2 (README, exit status).
    return app.exit(e) == 0 ? fanout::proto::kExitOk : kExitUsage;
  }
  auto level = fanout::parse_log_level(log_level);
  if (!level) {
    std::fprintf(stderr, "error: --log-level: %s\n", level.error().message.c_str());
    return kExitUsage;
  }
  auto log = fanout::make_logger("client", *level);
  for (const Subcommand& c : commands) {
    if (c.app->parsed()) return c.run(log);
  }
  return kExitUsage;
}
