// How a pool starts a worker process for a job: the argv, environment and files of each runtime
// (python: the shim, docs/worker-pipe.md; command and native: fanout-worker, pool/worker_host.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "fanout/protocol/messages.hpp"
#include "pool/worker.hpp"

namespace fanout::pool {

// The interpreter of Python workers when neither the pool's --python nor the job names one.
inline constexpr const char* kDefaultPython = "python3";

struct LaunchContext {
  std::uint64_t job_id = 0;
  std::string node{};
  std::string process{};     // worker name, e.g. "process001"
  std::string shim_dir{};    // folder of fanout_worker.py
  std::string python{};      // overrides the job's interpreter when set
  std::string worker_bin{};  // the fanout-worker executable
};

// True when workers of `spec` mark the start and end of each run() call (S and E frames,
// FANOUT_RUN_MARKERS=1), so that the pool can bound the task overhead around it: python jobs with
// a task overhead timeout. fanout-worker (command, native) never sends markers.
bool run_markers(const proto::JobSpec& spec);

// A worker's PYTHONPATH: the job's entries (environment_variables), then the shim's folder
// (azureml_user, fanout_runtime), then the pool's own PYTHONPATH (`inherited`, may be null).
std::string merged_pythonpath(const std::string& job, const std::string& shim_dir,
                              const char* inherited);

// The launch of one worker for `spec`, by spec.runtime ("python", "command", "native"; anything
// else is run as python, whose shim then reports the error). Creates the job's
// logs/user/{stdout,stderr}/<node> folders.
WorkerLaunch make_launch(const proto::JobSpec& spec, const LaunchContext& ctx);

}  // namespace fanout::pool
