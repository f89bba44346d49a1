// The job file and the command line turned into what a job runs with. See run_settings.hpp.
#include "client/launch/run_settings.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <thread>

#include "client/launch/monitoring.hpp"
#include "client/output/job_outputs.hpp"
#include "fanout/net/keys.hpp"

namespace fanout::client {

void apply_overrides(config::JobConfig& cfg, const RunOverrides& ov) {
  if (!ov.python.empty()) cfg.fanout.python = ov.python;
  if (ov.workers > 0) cfg.fanout.workers = ov.workers;
  if (ov.prefetch >= 0) cfg.fanout.prefetch = static_cast<std::uint32_t>(ov.prefetch);
  if (ov.poll_ms >= 0) cfg.fanout.poll_ms = static_cast<std::uint32_t>(ov.poll_ms);
  if (ov.pools > 0) cfg.instance_count = ov.pools;
  if (ov.priority > 0) cfg.fanout.priority = ov.priority;
  if (!ov.db.empty()) cfg.fanout.db = ov.db;
  if (!ov.run_dir.empty()) cfg.fanout.run_dir = ov.run_dir;
  auto& l = cfg.fanout.launch;
  if (!ov.launcher.empty()) l.kind = ov.launcher;
  if (ov.nodes > 0) l.nodes = ov.nodes;
  if (ov.min_nodes > 0) l.min_nodes = ov.min_nodes;
  if (ov.max_nodes > 0) l.max_nodes = ov.max_nodes;
  if (!ov.interchange_address.empty()) l.interchange_address = ov.interchange_address;
  // The batch-scheduler flags (docs/cluster.md): each replaces its fanout: key.
  if (!ov.queue.empty()) l.queue = ov.queue;
  if (ov.nodes_per_block > 0) l.nodes_per_block = ov.nodes_per_block;
  if (!ov.worker_init.empty()) l.worker_init = ov.worker_init;
  if (!ov.scheduler_options.empty()) l.scheduler_options = ov.scheduler_options;
  if (!ov.metrics_listen.empty()) cfg.fanout.metrics_listen = ov.metrics_listen;
  // The ssh launcher's flags: each replaces its fanout: key.
  if (!ov.hosts.empty()) l.hosts = config::split_host_list(ov.hosts);
  if (!ov.ssh_options.empty()) {
    l.ssh_options.clear();
    for (const auto& o : ov.ssh_options) {
      for (auto& w : config::split_words(o)) l.ssh_options.push_back(std::move(w));
    }
  }
  if (!ov.pool_command.empty()) l.pool_command = ov.pool_command;
  // Elastic pool jobs (docs/cluster.md, section 6): each replaces its fanout: key.
  if (ov.init_nodes > 0) l.init_nodes = ov.init_nodes;
  if (ov.parallelism >= 0) l.parallelism = ov.parallelism;
  if (ov.max_idletime_s >= 0) l.max_idletime_s = ov.max_idletime_s;
}

namespace {

// Whether a pool started on this machine will find accelerators without being told them: the
// kind's variable in the environment the pools inherit (what Slurm sets for --gpus), or, for
// CUDA, the NVIDIA driver's device list. The pool itself decides which; this only says whether
// it should count its workers from them.
bool local_accelerators(const config::PlacementSettings& p) {
  const std::string_view kind =
      p.accelerator_kind.empty() ? std::string_view("cuda") : std::string_view(p.accelerator_kind);
  const std::string var(config::accelerator_variable(kind));
  if (var.empty()) return false;
  if (const char* v = std::getenv(var.c_str()); v != nullptr) {
    return *v != '\0' && std::string_view(v) != "-1";  // set but empty or -1: none
  }
  if (kind != "cuda") return false;
  std::error_code ec;
  return !std::filesystem::is_empty("/proc/driver/nvidia/gpus", ec) && !ec;
}

// Whether pools started with placement `p` and no worker count count their own workers: from the
// devices they are given or find, or from their cores and cores_per_worker.
bool pools_count_workers(const config::PlacementSettings& p, bool local) {
  return !p.accelerators.empty() || p.cores_per_worker > 0 || (local && local_accelerators(p));
}

}  // namespace

std::uint32_t workers_per_pool(const config::JobConfig& cfg) {
  if (cfg.fanout.workers > 0) return cfg.fanout.workers;
  if (cfg.max_concurrency_per_instance > 0) return cfg.max_concurrency_per_instance;
  return std::max(1u, std::thread::hardware_concurrency());
}

RunSettings run_settings(const config::JobConfig& cfg, const RunOverrides& ov) {
  RunSettings rs;
  rs.pools = std::max(1u, cfg.instance_count);
  rs.workers = workers_per_pool(cfg);
  rs.prefetch = cfg.fanout.prefetch;
  rs.poll_ms = cfg.fanout.poll_ms;
  rs.heartbeat_period_ms = cfg.fanout.heartbeat_period_ms;
  rs.heartbeat_threshold_ms = cfg.fanout.heartbeat_threshold_ms;
  rs.log_level = cfg.fanout.log_level.empty() ? cfg.logging_level : cfg.fanout.log_level;
  rs.python = ov.python;
  // Only this build's fanout-pool surely knows the flag: not a fanout.pool_command of the hosts.
  rs.warm_python = cfg.task_type == "run_function" && cfg.fanout.worker_start != "spawn" &&
                   cfg.fanout.launch.pool_command.empty();
  rs.launch = cfg.fanout.launch;
  rs.placement = cfg.fanout.placement;
  // Accelerators or cores per worker and no worker count: each pool counts its workers from
  // what its node offers (devices x workers_per_accelerator, cores / cores_per_worker).
  const auto& p = cfg.fanout.placement;
  const bool counted = cfg.fanout.workers > 0 || cfg.max_concurrency_per_instance > 0;
  // A local job on a machine with accelerators, and no count: as many as its devices hold
  // (ParallelRunStep's default for a GPU compute), not one per core.
  if (!counted && pools_count_workers(p, rs.launch.kind == "local")) {
    rs.workers = 0;
  }
  rs.job_name = cfg.name;
  rs.exit_with_client = ov.exit_with_client;
  rs.quiet = ov.quiet || ov.json;
  if (rs.launch.kind != "local") {
    // A pool job per node (nodes: resources.instance_count unless given); the pools take the
    // node's cores unless the job file says how many workers.
    // ssh: one pool per host listed unless nodes says otherwise.
    if (rs.launch.nodes == 0 && rs.launch.kind == "ssh" && !rs.launch.hosts.empty()) {
      rs.launch.nodes = static_cast<std::uint32_t>(rs.launch.hosts.size());
    }
    if (rs.launch.nodes == 0) rs.launch.nodes = rs.pools;
    if (rs.launch.init_nodes > 0) rs.launch.nodes = rs.launch.init_nodes;  // elastic: the start
    rs.pools = rs.launch.nodes;
    if (cfg.fanout.workers == 0 && cfg.max_concurrency_per_instance == 0) {
      rs.workers = rs.launch.cores_per_node;
    }
    rs.transport = Transport::Curve;
    rs.keys_dir = ov.security.keys_dir.empty() ? net::default_keys_dir() : ov.security.keys_dir;
  }
  if (ov.transport && rs.launch.kind == "local") rs.transport = *ov.transport;
  rs.window = ov.window;
  rs.mem_per_worker_gib = cfg.fanout.mem_per_worker_gib;
  rs.worker_memory_limit_bytes = cfg.fanout.worker_memory_limit_bytes;
  rs.max_minibatches_per_worker = cfg.fanout.max_minibatches_per_worker;
  rs.metrics_listen = cfg.fanout.metrics_listen;
  if (auto mon = monitoring_options(cfg)) {
    rs.resource_monitor_interval_s = mon->resource_monitor_interval_s;
  }
  return rs;
}

namespace {

// The placement keys, and no worker count where local pools counted their own (run_settings()):
// `fanout resume` starts pools that count them again, and `fanout tune` reads what they ran.
void record_placement(const config::JobConfig& cfg, store::JobSettings& s) {
  const auto& p = cfg.fanout.placement;
  s.accelerators = p.accelerators;
  s.accelerator_kind = p.accelerator_kind;
  s.workers_per_accelerator = p.workers_per_accelerator;
  s.cores_per_worker = p.cores_per_worker;
  s.cpu_affinity = p.cpu_affinity;
  const bool counted = cfg.fanout.workers > 0 || cfg.max_concurrency_per_instance > 0;
  const bool local = cfg.fanout.launch.kind == "local";
  if (!counted && local && pools_count_workers(p, local)) s.max_concurrency_per_instance = 0;
}

}  // namespace

store::JobSettings recorded_settings(const config::JobConfig& cfg) {
  store::JobSettings s;
  s.mini_batch_size = cfg.mini_batch_size;
  s.instance_count = cfg.instance_count;
  s.max_concurrency_per_instance = workers_per_pool(cfg);
  s.prefetch = cfg.fanout.prefetch;
  s.poll_ms = cfg.fanout.poll_ms;
  s.heartbeat_period_ms = cfg.fanout.heartbeat_period_ms;
  s.heartbeat_threshold_ms = cfg.fanout.heartbeat_threshold_ms;
  s.max_retries = cfg.max_retries;
  s.timeout_s = cfg.timeout_s;
  s.error_threshold = cfg.error_threshold;
  s.mini_batch_error_threshold = cfg.mini_batch_error_threshold;
  s.allowed_failed_percent = cfg.allowed_failed_percent;
  s.logging_level = cfg.logging_level;
  s.python = cfg.fanout.python;
  s.task_type = cfg.task_type;
  s.priority = cfg.fanout.priority;
  s.mem_per_worker_gib = cfg.fanout.mem_per_worker_gib;
  s.worker_memory_limit_bytes = cfg.fanout.worker_memory_limit_bytes;
  s.max_minibatches_per_worker = cfg.fanout.max_minibatches_per_worker;
  record_placement(cfg, s);
  const auto& l = cfg.fanout.launch;
  s.launcher = l.kind;
  if (l.kind != "local") {
    s.nodes = l.nodes > 0 ? l.nodes : cfg.instance_count;
    s.min_nodes = l.min_nodes;
    s.max_nodes = l.max_nodes;
    s.partition = l.partition;
    s.walltime = l.walltime;
  }
  if (auto mon = monitoring_options(cfg)) {
    s.resource_monitor_interval_s = mon->resource_monitor_interval_s;
    s.profiling_module = mon->profiling_module;
  }
  // The summary of `wait` and `resume` names it as `run`'s does (summary_output).
  if (cfg.append_row_to.empty()) s.output_dir = output_folder(cfg);
  return s;
}

proto::JobSpec job_spec(const config::JobConfig& cfg, const std::string& log_dir) {
  proto::JobSpec spec;
  spec.name = cfg.name;
  // Absolute: `fanout resume` reads the job file again, from any folder, when its submission was
  // cut short.
  spec.spec_path = cfg.spec_path.empty()
                       ? std::string()
                       : std::filesystem::absolute(cfg.spec_path).lexically_normal().string();
  spec.priority = cfg.fanout.priority;
  // The Azure ML task types, as the worker runtimes are named (docs/architecture.md).
  spec.runtime = cfg.task_type == "run_function" ? "python" : cfg.task_type;
  spec.code_dir = cfg.code_dir;
  spec.entry_script = cfg.task_type == "command"  ? cfg.command
                      : cfg.task_type == "native" ? cfg.library
                                                  : cfg.entry_script;
  spec.python = cfg.fanout.python;
  spec.args = cfg.user_args;
  for (const auto& [k, v] : cfg.environment_variables) spec.env.push_back(k + "=" + v);
  spec.env.push_back("FANOUT_ROW_SEP=" + cfg.fanout.row_separator);
  spec.env.push_back(std::string("FANOUT_ROW_HEADER=") + (cfg.fanout.row_header ? "1" : "0"));
  spec.env.push_back("FANOUT_LOGGING_LEVEL=" + cfg.logging_level);
  // fanout.worker_start: the pool reads it from the workers' environment (pool/fork_server.hpp).
  if (cfg.fanout.worker_start == "spawn") spec.env.push_back("FANOUT_WORKER_START=spawn");
  spec.output_path = cfg.append_row_to;
  // Without append_row_to, output_dir is the declared folder output (Azure ML's), not the run
  // folder's outputs/, so that run() writes where the job file says its output is; the pool
  // passes it on as FANOUT_OUTPUT_DIR.
  if (const std::string out = output_folder(cfg); cfg.append_row_to.empty() && !out.empty()) {
    spec.env.push_back("FANOUT_OUTPUT_DIR=" + out);
  }
  spec.log_dir = log_dir;
  spec.max_tries = cfg.max_retries + 1;
  spec.run_timeout_s = cfg.timeout_s;
  spec.error_threshold = cfg.error_threshold;
  spec.mini_batch_error_threshold = cfg.mini_batch_error_threshold;
  spec.allowed_failed_percent = cfg.allowed_failed_percent;
  spec.settings_json = store::settings_json(recorded_settings(cfg));
  spec.input_name = cfg.input_data;
  spec.task_overhead_timeout_s = cfg.task_overhead_timeout_s;
  spec.first_task_creation_timeout_s = cfg.first_task_creation_timeout_s;
  spec.progress_update_timeout_s = cfg.progress_update_timeout_s;
  if (auto mon = monitoring_options(cfg)) {
    spec.resource_monitor_interval_s = mon->resource_monitor_interval_s;
    if (!mon->profiling_module.empty()) {
      spec.env.push_back("FANOUT_PROFILING_MODULE=" + mon->profiling_module);
    }
  }
  return spec;
}

RunSettings resumed_settings(const store::JobSettings& recorded, std::uint32_t workers,
                             std::uint32_t pools, const std::string& python) {
  RunSettings rs;
  rs.pools = std::max(1u, pools > 0 ? pools : recorded.instance_count);
  auto& p = rs.placement;
  p.accelerators = recorded.accelerators;
  p.accelerator_kind = recorded.accelerator_kind;
  p.workers_per_accelerator = recorded.workers_per_accelerator;
  p.cores_per_worker = recorded.cores_per_worker;
  p.cpu_affinity = recorded.cpu_affinity;
  // No count recorded: the pools count their workers as they did on run (from their devices or
  // cores_per_worker), else one per core.
  rs.workers = workers > 0                                 ? workers
               : recorded.max_concurrency_per_instance > 0 ? recorded.max_concurrency_per_instance
               : pools_count_workers(p, true)              ? 0
                                              : std::max(1u, std::thread::hardware_concurrency());
  rs.prefetch = recorded.prefetch;
  rs.poll_ms = recorded.poll_ms;
  rs.heartbeat_period_ms = recorded.heartbeat_period_ms;
  rs.heartbeat_threshold_ms = recorded.heartbeat_threshold_ms;
  rs.log_level = recorded.logging_level.empty() ? RunSettings{}.log_level : recorded.logging_level;
  rs.python = python.empty() ? recorded.python : python;
  rs.mem_per_worker_gib = recorded.mem_per_worker_gib;
  rs.worker_memory_limit_bytes = recorded.worker_memory_limit_bytes;
  rs.max_minibatches_per_worker = recorded.max_minibatches_per_worker;
  // The private interchange resumes every unfinished job: its pools serve them all, and so do
  // not sample resources for one job's sake.
  rs.resource_monitor_interval_s = 0;
  return rs;
}

}  // namespace fanout::client
