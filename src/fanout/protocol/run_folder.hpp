// The name of a run folder (`<runs>/<name>`), the one spelling that `fanout run`, a pipeline and
// a shared interchange all use, so that `fanout status` and a person see the same shape
// whichever made it. See docs/architecture.md (run folders).
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>

namespace fanout::proto {

// `<job>-<YYYYmmdd-HHMMSS UTC>-<pid>`, plus `-<serial>` when serial > 0 (one process that makes
// several folders in a second: a shared interchange). `job` is sanitised into one safe path
// component: each character other than [A-Za-z0-9_-] becomes '_', and an empty name is "job".
[[nodiscard]] std::string run_folder_name(std::string_view job, std::time_t when, long pid,
                                          std::uint64_t serial = 0);

}  // namespace fanout::proto
