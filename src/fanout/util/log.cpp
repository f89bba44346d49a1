// Logger set-up.
#include "fanout/util/log.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <algorithm>
#include <cctype>

namespace fanout {

Expected<spdlog::level::level_enum> parse_log_level(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "trace") return spdlog::level::trace;
  if (s == "debug") return spdlog::level::debug;
  if (s == "info") return spdlog::level::info;
  if (s == "warn" || s == "warning") return spdlog::level::warn;
  if (s == "error") return spdlog::level::err;
  if (s == "critical") return spdlog::level::critical;
  if (s == "off") return spdlog::level::off;
  return make_error(ErrorCode::InvalidArgument,
                    "log level: expected one of trace, debug, info, warning, error, critical, off "
                    "(got '" +
                        name + "')");
}

Logger make_logger(const std::string& name, spdlog::level::level_enum level,
                   const std::string& file, bool threaded) {
  spdlog::sink_ptr sink;
  if (!file.empty()) {
    if (threaded) {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file);
    } else {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_st>(file);
    }
  } else if (threaded) {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_sink_st>();
  }
  auto log = std::make_shared<spdlog::logger>(name, std::move(sink));
  log->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ %n[%P] %v");
  log->set_level(level);
  // INFO is for lifecycle lines (start, bind, register, job submitted/ended, recovery), which do
  // not grow with the number of tasks: each reaches the file before the next
  // step, so a process killed with SIGKILL leaves its story behind. DEBUG and TRACE lines stay
  // buffered until the next INFO line or flush.
  log->flush_on(spdlog::level::info);
  return log;
}

}  // namespace fanout
