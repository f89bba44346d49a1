// What a job runs with, in one place: the command line's overrides of the job file, the job spec
// the interchange receives, the settings recorded with the job (store::JobSettings), and the
// typed RunSettings the embedded interchange and pools are started with, whether from the job
// file (`fanout run`), from the recorded settings (`fanout resume`) or from `fanout perf`.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "fanout/config/job_spec.hpp"
#include "fanout/net/security.hpp"
#include "fanout/protocol/messages.hpp"
#include "fanout/store/job_settings.hpp"

namespace fanout::client {

enum class Transport : std::uint8_t;

// Command-line overrides of job-spec settings (0 / empty: keep the spec's value).
struct RunOverrides {
  std::string interchange{};  // empty: embedded default
  std::string db{};
  std::string python{};
  std::string run_dir{};
  std::int64_t prefetch = -1;
  std::int64_t poll_ms = -1;
  std::uint32_t workers = 0;
  std::uint32_t pools = 0;     // overrides resources.instance_count
  std::uint32_t priority = 0;  // overrides fanout.priority when > 0
  std::uint32_t window = 0;    // the embedded interchange's --window; 0: its default
  // Called once the job is over, before its summary is printed: what streams the job's output
  // (an ad-hoc run's rows and stderr) shows its last lines first.
  std::function<void()> before_summary{};
  // Asked as the job runs: a reason to end it early (an ad-hoc run's --halt success=N met), ""
  // while there is none. The job is cancelled with that reason; with silent_success its summary
  // is left out, as for a job that succeeded.
  std::function<std::string()> halt{};
  bool quiet = false;
  bool allow_partial = false;  // a `partial` job exits 0 (also fanout.allow_partial)
  bool json = false;         // progress as JSON events on stdout (see client/session/progress.hpp)
  net::Security security{};  // for a tcp:// --interchange (docs/security.md)
  bool share_with_group = false;  // the store and run folder readable by the group too
  bool overwrite = false;         // replace an earlier job's append_row file (client/job_outputs)
  // Where the pools run (docs/cluster.md); empty / 0: the job file's fanout: keys.
  std::string launcher{};
  std::uint32_t nodes = 0;
  std::uint32_t min_nodes = 0;
  std::uint32_t max_nodes = 0;
  std::string interchange_address{};
  // Batch schedulers (docs/cluster.md): --queue, --nodes-per-block, --worker-init,
  // --scheduler-options; empty / 0: the job file's keys.
  std::string queue{};
  std::uint32_t nodes_per_block = 0;
  std::string worker_init{};
  std::string scheduler_options{};
  // The ssh launcher (docs/cluster.md): --hosts (comma-separated), --ssh-option (each split at
  // white space), --pool-command; empty: the job file's keys.
  std::string hosts{};
  std::vector<std::string> ssh_options{};
  std::string pool_command{};
  // Elastic pool jobs (docs/cluster.md, section 6): --init-nodes, --parallelism,
  // --max-idletime; 0 / negative: the job file's keys.
  std::uint32_t init_nodes = 0;
  double parallelism = -1;
  double max_idletime_s = -1;
  bool exit_with_client = false;  // release the pools and stop the interchange if the client dies
  std::string
      metrics_listen{};  // the embedded interchange's --metrics-listen (fanout.metrics_listen)
  // How a local embedded interchange listens (fanout explore's curve factor); nullopt: ipc.
  std::optional<Transport> transport{};
  // An ad-hoc run without --bar: a job that succeeded prints no end summary, as GNU parallel
  // prints nothing of its own (a failed, partial or cancelled job still prints its summary).
  bool silent_success = false;
};

// How the embedded interchange listens (docs/security.md). Ipc: ipc:// endpoints in a fresh 0700
// folder, so no other local user can connect and nothing is encrypted (the default). Tcp and
// Curve: TCP on loopback, plaintext (--insecure) or Curve with keys made for this run in
// <run_dir>/keys; `fanout perf` runs on Tcp, and `fanout perf --curve` compares it with Curve.
enum class Transport : std::uint8_t { Ipc, Tcp, Curve };

// How the embedded interchange and its pools are started.
struct RunSettings {
  std::uint32_t pools = 1;
  std::uint32_t workers = 1;  // per pool
  std::uint32_t prefetch = 0;
  std::uint32_t poll_ms = 10;
  std::uint32_t heartbeat_period_ms = 2000;
  std::uint32_t heartbeat_threshold_ms = 10000;
  std::string log_level = "INFO";  // of the interchange and the pools
  std::string python{};            // the pools' --python; empty: their default
  // The pools' --warm-python: a Python job whose workers are forked (fanout.worker_start), so a
  // pool's interpreter can start before the job's first mini-batch reaches it; not with a
  // fanout.pool_command (another build of fanout-pool may not know the flag).
  bool warm_python = false;
  double resource_monitor_interval_s = 0;  // the pools sample from their start; 0: off
  std::uint32_t window = 0;                // the interchange's --window; 0: its default
  std::uint64_t reopen_failed = 0;         // the interchange's --reopen-failed; 0: none
  // The pools' memory and recycling flags (docs/resources.md); 0: not given.
  double mem_per_worker_gib = 0;
  std::uint64_t worker_memory_limit_bytes = 0;
  std::uint32_t max_minibatches_per_worker = 0;
  Transport transport = Transport::Ipc;  // how the interchange listens
  // Launchers other than local (docs/cluster.md): the interchange listens for pools on
  // tcp://pool_address:* with Curve and the keys of `keys_dir` (the user's key folder).
  config::LauncherSettings launch{};
  // The pools' placement options (docs/resources.md): devices, CPUs and threads per worker.
  config::PlacementSettings placement{};
  std::string job_name{};
  std::string pool_address{};  // empty: loopback
  std::string keys_dir{};      // Transport::Curve: empty makes keys for the run in <run_dir>/keys
  bool exit_with_client = false;
  bool quiet = false;
  std::string metrics_listen{};  // the interchange's --metrics-listen; empty: none
};

// Writes the overrides into the job's settings (the `fanout:` block, instance_count).
void apply_overrides(config::JobConfig& cfg, const RunOverrides& ov);

// Workers per pool: fanout.workers, else max_concurrency_per_instance, else the machine's cores.
[[nodiscard]] std::uint32_t workers_per_pool(const config::JobConfig& cfg);

// `fanout run` of a prepared job (see prepare()). Pools get --python only when the command line
// names one: otherwise the job spec's interpreter applies.
[[nodiscard]] RunSettings run_settings(const config::JobConfig& cfg, const RunOverrides& ov);

// The settings recorded with the job, after overrides (prepare() has checked the monitoring
// arguments).
[[nodiscard]] store::JobSettings recorded_settings(const config::JobConfig& cfg);

// The job spec the interchange receives for a prepared job whose logs go to `log_dir`.
[[nodiscard]] proto::JobSpec job_spec(const config::JobConfig& cfg, const std::string& log_dir);

// `fanout resume`: the recorded settings, with the command line's workers, pools and python
// (0 / empty: the recorded ones). Workers not recorded: the machine's cores.
[[nodiscard]] RunSettings resumed_settings(const store::JobSettings& recorded,
                                           std::uint32_t workers, std::uint32_t pools,
                                           const std::string& python);

}  // namespace fanout::client
