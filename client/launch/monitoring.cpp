// --resource_monitor_interval and --profiling_module. See monitoring.hpp.
#include "client/launch/monitoring.hpp"

#include <cmath>
#include <cstdlib>

namespace fanout::client {

Expected<MonitoringOptions> monitoring_options(const config::JobConfig& cfg) {
  MonitoringOptions m;
  const std::string where = cfg.spec_path + ": program_arguments: --";
  if (auto it = cfg.system_args.find("resource_monitor_interval"); it != cfg.system_args.end()) {
    const std::string& text = it->second;
    char* end = nullptr;
    const double v = text.empty() ? -1 : std::strtod(text.c_str(), &end);
    if (text.empty() || end == nullptr || *end != '\0' || !std::isfinite(v) || v < 0) {
      return make_error(
          ErrorCode::InvalidArgument,
          where + it->first + ": expected a number of seconds >= 0 (got '" + text + "')");
    }
    m.resource_monitor_interval_s = v;
  }
  if (auto it = cfg.system_args.find("profiling_module"); it != cfg.system_args.end()) {
    const std::string& v = it->second;
    if (v != "cProfile" && v != "profile") {
      return make_error(ErrorCode::InvalidArgument,
                        where + it->first + ": expected cProfile or profile (got '" + v + "')");
    }
    if (cfg.task_type != "run_function") {
      return make_error(ErrorCode::InvalidArgument,
                        where + it->first + ": profiles Python entry scripts only (task.type is " +
                            cfg.task_type + ")");
    }
    m.profiling_module = v;
  }
  return m;
}

}  // namespace fanout::client
