// fanout-pool: parses the CLI, sets up logging, runs the Pool.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "fanout/config/job_spec.hpp"
#include "fanout/net/security.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/util/cli_help.hpp"
#include "fanout/util/fs.hpp"
#include "fanout/util/log.hpp"
#include "fanout/util/memory.hpp"
#include "fanout/util/test_hooks.hpp"
#include "pool/pool.hpp"
#include "pool/wall_clock.hpp"
#include "pool/walltime.hpp"

namespace {
fanout::pool::Pool* g_pool = nullptr;
void on_signal(int) {
  if (g_pool != nullptr) g_pool->stop();
}

// The Python shim: $FANOUT_SHIM_DIR, then beside the installed binary (PREFIX/share/fanout, or
// PREFIX/fanout where meson-python's wheels put meson's datadir: `pip install`), then the source
// tree.
std::string find_shim_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("FANOUT_SHIM_DIR"); env != nullptr && *env != '\0') return env;
  std::string self = fanout::self_dir();
  for (const std::string& cand :
       {self + "/../share/fanout/python", self + "/../fanout/python", self + "/python"}) {
    if (fs::exists(cand + "/fanout_worker.py")) return fs::path(cand).lexically_normal().string();
  }
  return FANOUT_SHIM_DIR;
}

// fanout-worker: $FANOUT_WORKER_BIN, then beside this binary, else PATH.
std::string find_worker_bin() {
  if (const char* env = std::getenv("FANOUT_WORKER_BIN"); env != nullptr && *env != '\0') {
    return env;
  }
  const std::string cand = fanout::self_dir() + "/fanout-worker";
  if (std::filesystem::exists(cand)) return cand;
  return "fanout-worker";
}

// Test hook (test builds only; docs/scaling.md): FANOUT_TEST_CLOCK_OFFSET_S skews this pool's wall
// clock, as a network namespace cannot. Returns the offset set (0: none), or nullopt after
// printing why the value is wrong. In other builds it reads nothing (`if constexpr`: not even the
// variable's name is compiled in).
std::optional<double> apply_test_clock_offset() {
  if constexpr (fanout::test_hooks::kEnabled) {
    const auto env = fanout::test_hooks::env("FANOUT_TEST_CLOCK_OFFSET_S");
    if (!env || env->empty()) return 0.0;
    std::string why;
    auto v = fanout::pool::parse_clock_offset(std::string(*env), why);
    if (!v) {
      std::fprintf(stderr, "error: FANOUT_TEST_CLOCK_OFFSET_S: %s\n", why.c_str());
      return std::nullopt;
    }
    fanout::pool::set_test_clock_offset(*v);
    return *v;
  }
  return 0.0;
}
// The memory and recycling options (docs/resources.md); the size is parsed after the command line.
void add_memory_options(CLI::App& app, fanout::pool::Options& opts, std::string& memory_limit) {
  app.add_option("--mem-per-worker", opts.mem_per_worker_gib,
                 "GiB of MemAvailable each worker is given: no more workers are started than it "
                 "holds (0: no bound)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--worker-memory-limit", memory_limit,
                 "a worker whose process group's RSS passes this size (\"200mb\", \"4gb\") is "
                 "stopped and its mini-batch fails OUT_OF_MEMORY");
  app.add_option("--max-minibatches-per-worker", opts.max_minibatches_per_worker,
                 "replace a worker after it ran this many mini-batches (0: never)")
      ->capture_default_str();
}

// The walltime options (docs/cluster.md): when the allocation ends, and how long before it the
// pool leaves.
void add_walltime_options(CLI::App& app, std::string& end, unsigned& margin_s) {
  app.add_option("--walltime-end", end,
                 "when this pool's allocation ends, in Unix seconds (the earlier of this and "
                 "$SLURM_JOB_END_TIME counts): mini-batches that would not finish are handed back "
                 "before it");
  app.add_option("--walltime-margin-s", margin_s,
                 "leave this many seconds before --walltime-end, handing back what is left")
      ->check(CLI::Range(0u, 86400u))
      ->capture_default_str();
}

// Sets the walltime from the earlier of --walltime-end and SLURM_JOB_END_TIME. False (said on
// stderr) when the flag's value is not Unix seconds; a bad variable is ignored with a warning.
bool set_walltime(fanout::pool::Options& opts, const std::string& flag, unsigned margin_s) {
  opts.walltime_margin = std::chrono::seconds(margin_s);
  std::string why;
  std::optional<double> from_flag, from_env;
  if (!flag.empty()) {
    from_flag = fanout::pool::parse_walltime_end(flag, why);
    if (!from_flag) {
      std::fprintf(stderr, "error: --walltime-end: %s\n", why.c_str());
      return false;
    }
  }
  if (const char* env = std::getenv("SLURM_JOB_END_TIME"); env != nullptr && *env != '\0') {
    from_env = fanout::pool::parse_walltime_end(env, why);
    if (!from_env) std::fprintf(stderr, "warning: SLURM_JOB_END_TIME ignored: %s\n", why.c_str());
  }
  if (auto end = fanout::pool::earlier_end(from_flag, from_env)) opts.walltime_end = *end;
  return true;
}

// The placement options (docs/resources.md): which devices and CPUs each worker gets.
void add_placement_options(CLI::App& app, fanout::pool::PlacementOptions& p) {
  app.add_option("--accelerators", p.accelerators,
                 "accelerator ids, comma-separated, as CUDA_VISIBLE_DEVICES takes them (default: "
                 "the pool's CUDA_VISIBLE_DEVICES, else the devices NVML finds)");
  app.add_option("--accelerator-kind", p.accelerator_kind,
                 "cuda (CUDA_VISIBLE_DEVICES), rocm (ROCR_VISIBLE_DEVICES) or ze "
                 "(ZE_AFFINITY_MASK)")
      ->check(CLI::IsMember({"cuda", "rocm", "ze"}))
      ->capture_default_str();
  app.add_option("--workers-per-accelerator", p.workers_per_accelerator,
                 "workers sharing each accelerator, round-robin")
      ->check(CLI::Range(1u, 1000u))
      ->capture_default_str();
  app.add_option("--cores-per-worker", p.cores_per_worker,
                 "cores each worker gets; bounds the worker count by the pool's cores (0: the "
                 "cores shared out)")
      ->capture_default_str();
  app.add_option("--cpu-affinity", p.cpu_affinity,
                 "none, block, alternating, or list:CPUS:CPUS... (one CPU list per worker)")
      ->capture_default_str();
}
}  // namespace

// Long: one line per command-line option, each bound to a local the rest of main reads.
int main(int argc, char** argv) {
  fanout::keep_freed_memory();
  // Named, so help and the man page say fanout-pool, never the path it was started by.
  CLI::App app{"fanout-pool: runs mini-batches from an interchange in worker processes",
               "fanout-pool"};
  app.set_version_flag("--version", FANOUT_VERSION);
  app.formatter(std::make_shared<fanout::HelpFormatter>());  // 80 columns, as fanout's
  fanout::pool::Options opts;
  std::string log_level = "info", log_file;
  unsigned poll_ms = 10, hb_ms = 2000, hb_threshold_ms = 10000, grace_ms = 2000;
  unsigned drain_grace_ms = 20000;  // inside Slurm's default KillWait of 30 s
  app.add_option("--interchange", opts.interchange, "the interchange's pool endpoint")->required();
  app.add_option("--name", opts.name, "pool name (default: host-pid)");
  app.add_option("--node", opts.node, "node name (default: host name)");
  app.add_option("--workers", opts.workers, "worker processes (default: cores)")
      ->check(CLI::Range(1u, 100000u));
  app.add_option("--first-process", opts.first_process,
                 "number of the first worker, processNNN (pools sharing a node number apart)")
      ->capture_default_str();
  app.add_option("--pool-index", opts.pool_index,
                 "this pool's index among pools started together on its node, from 0: its "
                 "workers are numbered from index x its worker count + 1")
      ->excludes("--first-process");
  app.add_option("--prefetch", opts.prefetch, "tasks held beyond free workers")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--poll-ms", poll_ms, "poll period when idle")
      ->check(CLI::Range(1u, 60000u))
      ->capture_default_str();
  app.add_option("--heartbeat-period-ms", hb_ms, "heartbeat period towards the interchange")
      ->check(CLI::Range(1u, 3600000u))
      ->capture_default_str();
  app.add_option("--heartbeat-threshold-ms", hb_threshold_ms,
                 "the interchange silent this long is lost (must exceed the period)")
      ->check(CLI::Range(1u, 86400000u))
      ->capture_default_str();
  app.add_option("--kill-grace-ms", grace_ms, "SIGTERM to SIGKILL for a timed-out worker")
      ->capture_default_str();
  app.add_option("--drain-grace-ms", drain_grace_ms,
                 "on SIGTERM/SIGINT: running tasks may finish this long, the rest is handed back")
      ->capture_default_str();
  app.add_option("--max-user-log-mb", opts.max_user_log_mb,
                 "cap of each worker's user log file (stdout, stderr, entry_script_log), in MB; "
                 "0: no cap")
      ->capture_default_str();
  app.add_option("--python", opts.python, "interpreter for python workers (overrides the job)");
  app.add_option("--shim-dir", opts.shim_dir, "folder of fanout_worker.py");
  app.add_option("--worker-bin", opts.worker_bin, "fanout-worker (command and native runtimes)");
  app.add_option("--log-level", log_level, "log level")
      ->check(
          CLI::IsMember({"trace", "debug", "info", "warn", "warning", "error", "critical", "off"},
                        CLI::ignore_case))
      ->capture_default_str();
  app.add_option("--log-file", log_file, "append logs here instead of stderr");
  app.add_option("--keys", opts.security.keys_dir,
                 "key folder for Curve on a tcp:// interchange (default: $FANOUT_KEYS, else "
                 "~/.config/fanout/keys; see docs/security.md)");
  app.add_option("--key", opts.security.key_name,
                 "this pool's key pair in the key folder (default: pool)");
  app.add_flag("--insecure", opts.security.insecure,
               "plaintext, unauthenticated tcp:// (loopback addresses only)");
  app.add_flag("--exit-on-lost", opts.exit_on_lost, "exit when the interchange goes silent");
  app.add_flag("--warm-python", opts.warm_python,
               "start a Python interpreter before any job, to become the first Python job's "
               "fork server (fanout run sets this for Python jobs)");
  app.add_option("--resource-monitor-interval", opts.resource_monitor_interval_s,
                 "sample node and worker resources every this many seconds (0: only for jobs "
                 "that ask for it)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  std::string walltime_end;
  unsigned walltime_margin_s = 30;
  add_walltime_options(app, walltime_end, walltime_margin_s);
  std::string worker_memory_limit;
  add_memory_options(app, opts, worker_memory_limit);
  add_placement_options(app, opts.placement);
  fanout::value_names(app, {{"--interchange", "ENDPOINT"},
                            {"--name", "NAME"},
                            {"--node", "NAME"},
                            {"--python", "PATH"},
                            {"--shim-dir", "DIR"},
                            {"--worker-bin", "PATH"},
                            {"--log-file", "PATH"},
                            {"--keys", "DIR"},
                            {"--key", "NAME"},
                            {"--walltime-end", "TIME"},
                            {"--worker-memory-limit", "SIZE"},
                            {"--accelerators", "LIST"},
                            {"--cpu-affinity", "MODE"}});
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every command-line error exits 2 (README, exit status).
    return app.exit(e) == 0 ? fanout::proto::kExitOk : fanout::proto::kExitUsage;
  }

  auto level = fanout::parse_log_level(log_level);
  if (!level) {
    std::fprintf(stderr, "error: --log-level: %s\n", level.error().message.c_str());
    return fanout::proto::kExitUsage;
  }
  if (!worker_memory_limit.empty()) {
    auto bytes = fanout::config::parse_memory_size(worker_memory_limit);
    if (!bytes) {
      std::fprintf(stderr, "error: --worker-memory-limit: %s\n", bytes.error().message.c_str());
      return fanout::proto::kExitUsage;
    }
    opts.worker_memory_limit_bytes = *bytes;
  }
  if (auto ok = fanout::pool::check_placement(opts.placement); !ok) {
    std::fprintf(stderr, "error: %s\n", ok.error().message.c_str());
    return fanout::proto::kExitUsage;
  }
  if (!set_walltime(opts, walltime_end, walltime_margin_s)) return fanout::proto::kExitUsage;
  opts.poll = std::chrono::milliseconds(poll_ms);
  opts.heartbeat_period = std::chrono::milliseconds(hb_ms);
  opts.heartbeat_threshold = std::chrono::milliseconds(hb_threshold_ms);
  opts.kill_grace = std::chrono::milliseconds(grace_ms);
  opts.drain_grace = std::chrono::milliseconds(drain_grace_ms);
  const auto clock_offset = apply_test_clock_offset();
  if (!clock_offset) return fanout::proto::kExitUsage;
  if (opts.shim_dir.empty()) opts.shim_dir = find_shim_dir();
  if (opts.worker_bin.empty()) opts.worker_bin = find_worker_bin();
  auto log = fanout::make_logger("pool", *level, log_file);
  fanout::net::warn_if_insecure(opts.security, log);
  if (*clock_offset != 0) {
    log->warn("test hook: this pool's wall clock is shifted by {} s", *clock_offset);
  }
  try {
    fanout::pool::Pool pool(opts, log);
    g_pool = &pool;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGPIPE, SIG_IGN);
    int rc = pool.run();
    g_pool = nullptr;
    return rc;
  } catch (const std::exception& e) {
    log->critical("{}", e.what());
    return fanout::proto::kExitRuntime;
  }
}
