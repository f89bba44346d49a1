// The ParallelRunStep system arguments that change what fanout does:
// --resource_monitor_interval and --profiling_module (from JobConfig::system_args), checked and
// turned into what the job's pools and workers receive. See docs/job-spec.md.
#pragma once

#include <string>

#include "fanout/config/job_spec.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::client {

struct MonitoringOptions {
  double resource_monitor_interval_s = 0;  // 0: off
  std::string profiling_module{};          // "", "cProfile" or "profile"
};

// Reads and checks the two arguments. Error{InvalidArgument} naming the job file and the flag,
// e.g. "job.yaml: program_arguments: --profiling_module: expected cProfile or profile (got
// 'yappi')".
[[nodiscard]] Expected<MonitoringOptions> monitoring_options(const config::JobConfig& cfg);

}  // namespace fanout::client
