// Pool jobs a run folder records. See recorded_jobs.hpp.
#include "client/launch/recorded_jobs.hpp"

#include <fmt/format.h>
#include <spdlog/sinks/null_sink.h>

#include <filesystem>
#include <memory>

#include "client/launch/batch_launcher.hpp"
#include "client/launch/hpc_launcher.hpp"
#include "client/launch/hpc_script.hpp"
#include "client/launch/sge_launcher.hpp"
#include "client/launch/slurm_launcher.hpp"
#include "fanout/util/json.hpp"

namespace fanout::client {

namespace {

struct Recorded {
  std::string scheduler{};
  std::unique_ptr<BatchLauncher> launcher{};
};

// The launcher of the scheduler whose folder in `run_dir` records pool jobs, with them adopted;
// no launcher when none does. Detach it, or release() it: destroying it cancels otherwise.
Recorded open_recorded(const std::string& run_dir) {
  namespace fs = std::filesystem;
  auto log = std::make_shared<spdlog::logger>("pool-jobs",
                                              std::make_shared<spdlog::sinks::null_sink_mt>());
  for (const char* name : {"slurm", "sge", "pbs", "lsf", "condor"}) {
    std::error_code ec;
    if (!fs::exists(fs::path(run_dir) / name / "job_ids", ec)) continue;
    BatchLauncher::Options o{.run_dir = run_dir, .quiet = true};
    o.launch.kind = name;
    Recorded r{.scheduler = name};
    if (r.scheduler == "slurm") {
      r.launcher = std::make_unique<SlurmLauncher>(std::move(o), log);
    } else if (r.scheduler == "sge") {
      r.launcher = std::make_unique<SgeLauncher>(std::move(o), log);
    } else {
      r.launcher =
          std::make_unique<HpcLauncher>(HpcLauncher::Options{.scheduler = *hpc::scheduler_of(name),
                                                             .launch = std::move(o.launch),
                                                             .run_dir = run_dir,
                                                             .quiet = true},
                                        log);
    }
    if (r.launcher->adopt_recorded()) return r;
    r.launcher->detach();
  }
  return {};
}

}  // namespace

std::string pool_jobs_status_line(const std::string& run_dir) {
  auto r = open_recorded(run_dir);
  if (!r.launcher) return {};
  r.launcher->detach();
  return r.launcher->status_line();
}

std::string pool_jobs_json_keys(const std::string& run_dir) {
  auto r = open_recorded(run_dir);
  if (!r.launcher) return {};
  r.launcher->detach();
  std::string jobs, slurm_jobs;
  for (const auto& [id, state] : r.launcher->job_states()) {
    jobs += fmt::format("{}{{\"id\":{},\"state\":{}}}", jobs.empty() ? "" : ",", json_quote(id),
                        json_quote(state));
    // Slurm's ids are numbers, and slurm_jobs has always written them as such.
    slurm_jobs += fmt::format("{}{{\"id\":{},\"state\":{}}}", slurm_jobs.empty() ? "" : ",", id,
                              json_quote(state));
  }
  std::string out = fmt::format("\"pool_jobs\":{{\"scheduler\":{},\"jobs\":[{}]}}",
                                json_quote(r.scheduler), jobs);
  if (r.scheduler == "slurm") out += ",\"slurm_jobs\":[" + slurm_jobs + "]";
  return out;
}

std::string release_pool_jobs(const std::string& run_dir) {
  auto r = open_recorded(run_dir);
  if (!r.launcher) return {};
  std::string live;
  for (const auto& [id, state] : r.launcher->job_states()) {
    if (r.launcher->holds_node(state)) live += (live.empty() ? "" : ", ") + id;
  }
  if (live.empty()) {
    r.launcher->detach();
    return {};
  }
  r.launcher->release();
  return fmt::format("{} job(s) {}", r.scheduler, live);
}

}  // namespace fanout::client
