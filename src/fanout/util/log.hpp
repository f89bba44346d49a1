// Logger set-up. One logger per process ("interchange", "pool", "worker", "client"); the level is
// set on the logger so that filtered records are never formatted: logging off costs nothing.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "fanout/util/expected.hpp"

namespace fanout {

using Logger = std::shared_ptr<spdlog::logger>;

// Parses "trace", "debug", "info", "warning"/"warn", "error", "critical", "off" (any case).
[[nodiscard]] Expected<spdlog::level::level_enum> parse_log_level(const std::string& name);

// Makes the process logger writing to stderr, or to `file` when not empty (appending).
// `threaded` picks a mutex-guarded sink for processes that log from more than one thread.
Logger make_logger(const std::string& name, spdlog::level::level_enum level,
                   const std::string& file = {}, bool threaded = false);

}  // namespace fanout
