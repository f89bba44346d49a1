// The plan of a run. See run_plan.hpp.
#include "client/launch/run_plan.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "fanout/protocol/run_folder.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

RunPaths plan_paths(const config::JobConfig& cfg, const RunOverrides& ov, const RunFacts& facts) {
  RunPaths p;
  p.db = resolve_path(facts.cwd, cfg.fanout.db.empty() ? facts.default_db : cfg.fanout.db);
  p.shared = !ov.interchange.empty();
  // A shared interchange names the run folder itself unless the job file names its root.
  if (!cfg.fanout.run_dir.empty() || !p.shared) {
    const std::string root = cfg.fanout.run_dir.empty()
                                 ? fs::path(p.db).parent_path().string() + "/runs"
                                 : resolve_path(facts.cwd, cfg.fanout.run_dir);
    p.run_dir = fs::path(root).lexically_normal().string() + "/" +
                proto::run_folder_name(cfg.name, facts.now, facts.pid);
  }
  p.make_folders = !p.shared;
  return p;
}

InterchangePlan plan_interchange(const RunSettings& rs, const std::string& db,
                                 const std::string& run_dir, const EmbeddedFacts& facts) {
  InterchangePlan p;
  p.sys_dir = run_dir + "/logs/sys";
  p.ready_file = run_dir + "/interchange.ready";
  p.log_file = p.sys_dir + "/interchange.log";
  p.argv = {facts.interchange_bin, "--db", db, "--ready-file", p.ready_file, "--exit-when-idle",
            "--heartbeat-period-ms", std::to_string(rs.heartbeat_period_ms),
            "--heartbeat-threshold-ms", std::to_string(rs.heartbeat_threshold_ms), "--log-level",
            rs.log_level, "--log-file", p.log_file,
            // The private interchange runs as this user, for this user's clients (a 0700 ipc
            // folder, or this user's keys), so it may write wherever the client names, as the
            // client itself could; a shared interchange keeps its operator's roots.
            "--write-root", "/"};
  if (rs.window > 0) p.argv.insert(p.argv.end(), {"--window", std::to_string(rs.window)});
  if (!rs.metrics_listen.empty()) {
    p.argv.insert(p.argv.end(), {"--metrics-listen", rs.metrics_listen});
  }
  if (rs.reopen_failed > 0) {
    p.argv.insert(p.argv.end(), {"--reopen-failed", std::to_string(rs.reopen_failed)});
  }
  switch (rs.transport) {
    case Transport::Ipc:
      // No other local user can enter the folder, so nothing needs keys.
      p.argv.insert(p.argv.end(), {"--client-endpoint", "ipc://" + facts.ipc_dir + "/client",
                                   "--pool-endpoint", "ipc://" + facts.ipc_dir + "/pool"});
      break;
    case Transport::Tcp:
      p.security.insecure = true;
      p.pool_security = {"--insecure"};
      break;
    case Transport::Curve:
      if (rs.keys_dir.empty()) {  // keys of this run only (fanout perf --curve)
        p.security.keys_dir = run_dir + "/keys";
        p.keys = KeysAction::MakeFresh;
      } else {
        // The user's key folder, which pools on other nodes read too (a shared home folder);
        // made as `fanout keygen` would when missing, so a first run needs no setup.
        p.security.keys_dir = rs.keys_dir;
        p.keys = facts.keys_exist ? KeysAction::None : KeysAction::Make;
      }
      p.pool_security = {"--keys", p.security.keys_dir};
      break;
  }
  if (!rs.pool_address.empty()) {
    p.argv.insert(p.argv.end(), {"--pool-endpoint", "tcp://" + rs.pool_address + ":*"});
  }
  p.argv.insert(p.argv.end(), p.pool_security.begin(), p.pool_security.end());
  return p;
}

GuestSecurity plan_guest(const proto::ReadyFile& owner) {
  GuestSecurity g;
  if (owner.security == "insecure") {
    g.security.insecure = true;
    g.pool_flags = {"--insecure"};
  } else if (owner.security == "curve") {
    g.security.keys_dir = owner.keys;
    if (!owner.keys.empty()) g.pool_flags = {"--keys", owner.keys};
  }
  return g;
}

std::string pool_endpoint_for(const std::string& published, const std::string& host) {
  for (const std::string any : {"tcp://0.0.0.0:", "tcp://*:"}) {
    if (published.rfind(any, 0) == 0) return "tcp://" + host + ":" + published.substr(any.size());
  }
  return published;
}

namespace {

// The job file's placement keys as fanout-pool's options (only those written).
void add_placement_args(const config::PlacementSettings& p, std::vector<std::string>& argv) {
  if (!p.accelerators.empty()) argv.insert(argv.end(), {"--accelerators", p.accelerators});
  if (!p.accelerator_kind.empty()) {
    argv.insert(argv.end(), {"--accelerator-kind", p.accelerator_kind});
  }
  if (p.workers_per_accelerator > 0) {
    argv.insert(argv.end(),
                {"--workers-per-accelerator", std::to_string(p.workers_per_accelerator)});
  }
  if (p.cores_per_worker > 0) {
    argv.insert(argv.end(), {"--cores-per-worker", std::to_string(p.cores_per_worker)});
  }
  if (!p.cpu_affinity.empty()) argv.insert(argv.end(), {"--cpu-affinity", p.cpu_affinity});
}

}  // namespace

std::vector<std::string> plan_pool_argv(const RunSettings& rs, const std::string& pool_bin,
                                        const std::string& pool_endpoint,
                                        const std::vector<std::string>& security) {
  std::vector<std::string> argv = {pool_bin,
                                   "--interchange",
                                   pool_endpoint,
                                   "--prefetch",
                                   std::to_string(rs.prefetch),
                                   "--poll-ms",
                                   std::to_string(rs.poll_ms),
                                   "--exit-on-lost",
                                   "--heartbeat-period-ms",
                                   std::to_string(rs.heartbeat_period_ms),
                                   "--heartbeat-threshold-ms",
                                   std::to_string(rs.heartbeat_threshold_ms),
                                   "--log-level",
                                   rs.log_level};
  if (rs.workers > 0) {  // 0 (a pool on a cluster node): the node's cores
    argv.insert(argv.end(), {"--workers", std::to_string(rs.workers)});
  }
  argv.insert(argv.end(), security.begin(), security.end());
  if (!rs.python.empty()) argv.insert(argv.end(), {"--python", rs.python});
  if (rs.warm_python) argv.emplace_back("--warm-python");
  if (rs.resource_monitor_interval_s > 0) {
    argv.insert(argv.end(),
                {"--resource-monitor-interval", fmt::format("{}", rs.resource_monitor_interval_s)});
  }
  if (rs.mem_per_worker_gib > 0) {
    argv.insert(argv.end(), {"--mem-per-worker", fmt::format("{}", rs.mem_per_worker_gib)});
  }
  if (rs.worker_memory_limit_bytes > 0) {
    argv.insert(argv.end(), {"--worker-memory-limit",
                             fmt::format("{}kb", rs.worker_memory_limit_bytes / 1024)});
  }
  if (rs.max_minibatches_per_worker > 0) {
    argv.insert(argv.end(),
                {"--max-minibatches-per-worker", std::to_string(rs.max_minibatches_per_worker)});
  }
  add_placement_args(rs.placement, argv);
  return argv;
}

LauncherKind plan_launcher(const RunSettings& rs) {
  if (rs.launch.kind == "slurm") return LauncherKind::Slurm;
  if (rs.launch.kind == "sge") return LauncherKind::Sge;
  if (rs.launch.kind == "ssh") return LauncherKind::Ssh;
  if (rs.launch.kind == "pbs" || rs.launch.kind == "lsf" || rs.launch.kind == "condor") {
    return LauncherKind::Hpc;
  }
  return LauncherKind::Local;
}

}  // namespace fanout::client
