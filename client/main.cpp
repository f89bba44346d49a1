// fanout: the client CLI. Parses arguments and calls into client_core.
#include <CLI/CLI.hpp>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "client/commands/adhoc.hpp"
#include "client/commands/client.hpp"
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
#include "fanout/util/log.hpp"

int main(int argc, char** argv) {
  CLI::App app{"fanout: run a program over a large input in parallel"};
  app.require_subcommand(1);
  app.set_version_flag("--version", FANOUT_VERSION);
  // Allowed values, shared by the options that take them.
  const auto log_levels = CLI::IsMember(
      {"trace", "debug", "info", "warn", "warning", "error", "critical", "off"}, CLI::ignore_case);
  const auto job_states = CLI::IsMember({"running", "succeeded", "partial", "failed", "cancelled"});
  const auto job_ids = CLI::Range(std::uint64_t{1}, std::numeric_limits<std::uint64_t>::max());
  const auto counts = CLI::Range(1u, 1000000u);  // workers, pools

  fanout::client::RunOverrides ov;
  std::string job_file, log_level = "warning";
  auto* run = app.add_subcommand("run", "run a job file (Azure ML parallel-job YAML)");
  run->add_option("job", job_file, "the job file (or -c CMD --input ... without one)");
  // Ad-hoc runs without a job file, as with GNU parallel (client/adhoc.hpp, README).
  fanout::client::AdhocOptions ao;
  run->add_option("-c,--command", ao.command,
                  "run CMD once per item of --input instead of a job file; "
                  "{} {.} {/} {//} {/.} {#} as in GNU parallel");
  // --input/--output: what an ad-hoc run or a batch deployment file reads and writes.
  std::string input_arg, output_arg;
  run->add_option("--input", input_arg,
                  "with -c: a folder (its files are the items), a list file (its lines), or - "
                  "(lines on stdin); with a batch deployment file: the folder or file to score");
  run->add_option("--output", output_arg,
                  "with -c: the file the rows (the command's stdout lines) go to (default: "
                  "printed to stdout when the job ends); with a batch deployment file: the "
                  "output folder (default: beside the file)");
  run->add_option("--name", ao.name, "with -c: the job's name (default: adhoc-PROGRAM)");
  run->add_option("--mini-batch-size", ao.mini_batch_size, "with -c: items per mini-batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_option("--retries", ao.max_retries, "with -c: tries after the first for a mini-batch")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  run->add_option("--timeout", ao.timeout_s, "with -c: seconds a mini-batch may run (0: none)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--error-threshold", ao.error_threshold,
                  "with -c: failed items allowed before the job fails (-1: run everything)")
      ->check(CLI::Range(std::int64_t{-1}, std::numeric_limits<std::int64_t>::max()))
      ->capture_default_str();
  run->add_option("--env", ao.env, "with -c: NAME=VALUE for the command (repeatable)");
  constexpr std::array<const char*, 6> kAdhocOnly = {"--name",    "--mini-batch-size", "--retries",
                                                     "--timeout", "--error-threshold", "--env"};
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
  run->add_option("--workers,-j", ov.workers, "worker processes per pool")->check(counts);
  run->add_option("--pools", ov.pools, "local pools (overrides resources.instance_count)")
      ->check(counts);
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
  run->add_option("--log-level", log_level, "the client's own log level")
      ->check(log_levels)
      ->capture_default_str();
  // Curve keys for a tcp:// --interchange (docs/security.md).
  auto add_key_options = [](CLI::App* cmd, fanout::net::Security& sec) {
    cmd->add_option("--keys", sec.keys_dir,
                    "key folder for a tcp:// interchange (default: $FANOUT_KEYS, else "
                    "~/.config/fanout/keys)");
    cmd->add_option("--key", sec.key_name, "this client's key pair in it (default: client)");
    cmd->add_flag("--insecure", sec.insecure,
                  "plaintext, unauthenticated tcp:// (loopback addresses only)");
  };
  add_key_options(run, ov.security);
  fanout::config::DeploymentRun deployment;
  run->add_flag("--overwrite", ov.overwrite,
                "replace the append_row file an earlier job wrote (default: refuse)");
  run->add_flag("--share-with-group", ov.share_with_group,
                "create the store and the run folder readable by the group too (default: the "
                "owner only; the output file keeps your umask)");

  fanout::client::KeygenOptions ko;
  auto* keygen = app.add_subcommand(
      "keygen", "make the key folder of CurveZMQ keys for tcp:// endpoints (docs/security.md)");
  keygen->add_option("--dir", ko.dir,
                     "the key folder (default: $FANOUT_KEYS, else ~/.config/fanout/keys)");
  keygen->add_option("--add-client", ko.add_client,
                     "add and authorise a client key NAME (repeatable)");
  keygen->add_option("--add-pool", ko.add_pool, "add and authorise a pool key NAME (repeatable)");

  std::string db;
  std::size_t limit = 20;
  std::string state;
  bool json = false;
  auto* hist = app.add_subcommand("history", "recent jobs in the store");
  hist->add_option("--db", db, "SQLite store");
  hist->add_option("--limit,-n", limit, "jobs to show (0: all)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1000000000}))
      ->capture_default_str();
  hist->add_option("--state", state, "only jobs in this state")->check(job_states);
  hist->add_flag("--json", json, "machine-readable output");

  std::uint64_t job_id = 0;
  fanout::client::FollowOptions fo;
  auto* wait = app.add_subcommand("wait", "follow a running job to its end (reattach)");
  wait->add_option("job", job_id, "the job id")->required()->check(job_ids);
  wait->add_option("--db", fo.db, "SQLite store (default: as for run)");
  wait->add_option("--interchange", fo.interchange,
                   "client endpoint (default: from the job's run folder)");
  wait->add_flag("--quiet,-q", fo.quiet, "no progress output");
  wait->add_flag("--allow-partial", fo.allow_partial, "exit 0 when the job ends partial");
  auto* cancel = app.add_subcommand("cancel", "stop a running job");
  cancel->add_option("job", job_id, "the job id")->required()->check(job_ids);
  cancel->add_option("--db", fo.db, "SQLite store (default: as for run)");
  cancel->add_option("--interchange", fo.interchange,
                     "client endpoint (default: from the job's run folder)");
  cancel->add_flag("--quiet,-q", fo.quiet, "no progress output");
  add_key_options(wait, fo.security);
  add_key_options(cancel, fo.security);
  fanout::client::ResumeOptions ro;
  auto* resume = app.add_subcommand(
      "resume",
      "finish an unfinished job on a private interchange (after a crash); --failed: re-run "
      "what failed");
  resume->add_option("job", job_id, "the job id")->required()->check(job_ids);
  resume->add_option("--db", ro.db, "SQLite store (default: as for run)");
  resume->add_option("--python", ro.python, "Python interpreter for the workers");
  resume->add_option("--workers", ro.workers, "worker processes per pool (default: the job's)")
      ->check(counts);
  resume->add_option("--pools", ro.pools, "local pools (default: the job's instance_count)")
      ->check(counts);
  resume->add_flag("--quiet,-q", ro.quiet, "no progress output");
  resume->add_flag("--allow-partial", ro.allow_partial, "exit 0 when the job ends partial");
  resume->add_flag("--failed", ro.failed,
                   "also re-run the mini-batches that failed, of an ended job too (failed, "
                   "cancelled, partial); the output gets only their rows");
  resume->add_flag("--accept-changed-input", ro.accept_changed_input,
                   "resume even when the job's input no longer lists as it was submitted (files "
                   "added or removed, a table changed); recorded in the store");
  bool status_json = false;
  auto* status = app.add_subcommand("status", "a job's counts, rate, pools and last errors");
  status->add_option("job", job_id, "the job id")->required()->check(job_ids);
  status->add_option("--db", db, "SQLite store");
  status->add_flag("--json", status_json, "machine-readable output");

  std::string report_out;
  auto* report = app.add_subcommand("report", "regenerate a job's logs folder from the store");
  report->add_option("job", job_id, "the job id")->required()->check(job_ids);
  report->add_option("--out", report_out, "folder to write to (default: the job's logs folder)");
  report->add_option("--db", db, "SQLite store");
  bool report_html = false;
  report->add_flag("--html", report_html, "write report.html (--out: the file) instead");
  std::vector<std::uint64_t> compare_ids;
  std::string compare_html;
  auto* compare = app.add_subcommand("compare", "compare runs: settings that differ, effect");
  compare->add_option("jobs", compare_ids, "job ids")->required()->check(job_ids);
  compare->add_option("--html", compare_html, "also write the comparison page to this file");
  compare->add_option("--db", db, "SQLite store");
  fanout::report::TuneOptions to;
  std::string tune_write;
  auto* tune =
      app.add_subcommand("tune", "what to change in a job's settings, from what it measured");
  tune->add_option("job", job_id, "the job id")->required()->check(job_ids);
  tune->add_option("--target-duration", to.target_duration_s, "desired duration (s): node count")
      ->check(CLI::PositiveNumber);
  tune->add_option("--cores", to.cores, "cores per node (default: this machine's, if it ran here)")
      ->check(counts);
  tune->add_option("--write", tune_write, "write the suggested settings (YAML) to this file");
  tune->add_option("--db", db, "SQLite store");
  fanout::client::PerfOptions po;
  bool no_ceiling = false, no_baseline = false;
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
      ->check(counts)
      ->capture_default_str();
  perf->add_option("--pools", po.pools, "local pools")->check(counts)->capture_default_str();
  perf->add_option("--prefetch", po.prefetch,
                   "mini-batches per pool beyond free workers (default 256)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1000000}));
  perf->add_option("--poll-ms", po.poll_ms, "poll period of the pools")
      ->check(CLI::Range(1u, 60000u))
      ->capture_default_str();
  perf->add_option("--log-level", po.log_level, "log level of the interchange and pools")
      ->check(log_levels)
      ->capture_default_str();
  perf->add_option("--sleep-ms", po.sleep_ms, "each mini-batch sleeps this long")
      ->check(CLI::Range(0u, 3600000u))
      ->capture_default_str();
  perf->add_option("--items-per-batch", po.items_per_batch, "items per mini-batch")
      ->check(counts)
      ->capture_default_str();
  perf->add_option("--window", po.window, "the interchange's client window (default: its own)")
      ->check(counts);
  perf->add_flag("--json", po.json, "one JSON object per run on stdout");
  perf->add_flag("--sweep", po.sweep, "vary each tuning knob in turn and print its effect");
  perf->add_flag("--no-ceiling", no_ceiling, "skip the ZeroMQ relay probe");
  perf->add_flag("--no-baseline", no_baseline, "skip the multiprocessing.Pool baseline");
  perf->add_flag("--curve", po.curve,
                 "also run over Curve-encrypted TCP and print its ratio to the measured run "
                 "(with --insecure-tcp: to plaintext TCP)");
  perf->add_flag("--encrypted", po.encrypted,
                 "measure over Curve-encrypted TCP loopback instead of private ipc://");
  perf->add_flag("--insecure-tcp", po.insecure_tcp,
                 "UNSAFE: measure over plaintext TCP loopback instead of private ipc://; while it "
                 "runs, any local user can submit jobs that run as you");
  perf->add_option("--keep", po.keep_dir, "keep the store and logs in this folder");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every command-line error exits 2 (README, exit status).
    return app.exit(e) == 0 ? 0 : 2;
  }

  auto level = fanout::parse_log_level(log_level);
  if (!level) {
    std::fprintf(stderr, "error: --log-level: %s\n", level.error().message.c_str());
    return 2;
  }
  auto log = fanout::make_logger("client", *level);
  if (*keygen) return fanout::client::keygen(ko);
  fanout::net::warn_if_insecure(*run ? ov.security : fo.security, log);
  std::string print_rows;  // an ad-hoc run's rows, printed when it ends
  if (*run && !ao.command.empty()) {
    ao.input = input_arg;
    ao.output = output_arg;
    if (!job_file.empty()) {
      std::fprintf(stderr, "error: run: give a job file or -c CMD, not both\n");
      return 2;
    }
    const std::string store = ov.db.empty() ? fanout::client::default_db_path() : ov.db;
    auto job = fanout::client::write_adhoc_job(
        ao, (std::filesystem::absolute(store).parent_path() / "adhoc").string());
    if (!job) {
      std::fprintf(stderr, "error: %s\n", job.error().message.c_str());
      return 2;
    }
    job_file = job->job_file;
    print_rows = job->print_rows;
  } else if (*run) {
    deployment.input = input_arg;
    deployment.output = output_arg;
    for (const char* o : kAdhocOnly) {
      if (run->count(o) > 0) {
        std::fprintf(stderr, "error: run: %s needs -c CMD (an ad-hoc run)\n", o);
        return 2;
      }
    }
  }
  if (*run && job_file.empty()) {
    std::fprintf(stderr, "error: run: expected a job file, or -c CMD --input DIR|FILE|-\n");
    return 2;
  }
  if (*run) {
    // A pipeline file runs its jobs in order; anything else is a parallel job.
    if (auto type = fanout::config::job_file_type(job_file); type && *type == "pipeline") {
      try {
        return fanout::client::run_pipeline(job_file, ov, log);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 3;
      }
    }
    // An Azure ML batch deployment runs as a parallel job over --input.
    const bool is_deployment = fanout::config::is_batch_deployment(job_file);
    if (!is_deployment && (!deployment.input.empty() || !deployment.output.empty())) {
      std::fprintf(stderr,
                   "error: --input and --output are for batch deployment files; %s is "
                   "a job file (its inputs and outputs say what it reads and writes)\n",
                   job_file.c_str());
      return 2;
    }
    auto cfg = is_deployment ? fanout::config::load_batch_deployment(job_file, deployment)
                             : fanout::config::load_job(job_file);
    if (!cfg) {
      std::fprintf(stderr, "error: %s\n", cfg.error().message.c_str());
      return 2;
    }
    if (auto r = fanout::client::prepare(*cfg, ov); !r) {
      std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
      return 2;
    }
    try {
      const int rc = fanout::client::run_job(*cfg, ov, log);
      if (!print_rows.empty()) fanout::client::print_rows_file(print_rows);
      return rc;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 3;
    }
  }
  if (*wait || *cancel) {
    if (fo.db.empty()) fo.db = fanout::client::default_db_path();
    fo.cancel = cancel->parsed();
    return fanout::client::follow_job(job_id, fo, log);
  }
  if (*resume) {
    if (ro.db.empty()) ro.db = fanout::client::default_db_path();
    return fanout::client::resume_job(job_id, ro, log);
  }
  const std::string store_path = db.empty() ? fanout::client::default_db_path() : db;
  if (*status) return fanout::client::print_status(store_path, job_id, status_json);
  if (*report && report_html) {
    return fanout::client::write_html_report(store_path, job_id, report_out);
  }
  if (*report) return fanout::client::write_report(store_path, job_id, report_out);
  if (*compare) return fanout::client::compare_jobs(store_path, compare_ids, compare_html);
  if (*tune) return fanout::client::tune_job(store_path, job_id, to, tune_write);
  if (*perf) {
    po.ceiling = !no_ceiling;
    po.baseline = !no_baseline;
    return fanout::client::run_perf(po, log);
  }
  if (*hist) {
    return fanout::client::print_history(db.empty() ? fanout::client::default_db_path() : db, limit,
                                         state, json);
  }
  return 2;
}
