// parallel_run_step.settings.json: output settings kept beside an entry script, as ParallelRunStep
// users do. See docs/job-spec.md#output.
#pragma once

#include <optional>
#include <string>

#include "fanout/util/expected.hpp"

namespace fanout::config {

// The keys fanout reads; absent keys stay nullopt. Other keys are ignored.
struct RowSettings {
  std::optional<std::string> separator{};  // "append_row_separator": DataFrame column separator
  std::optional<bool> header{};            // "append_row_header": write the DataFrame's header
};

// Reads `path` (a JSON object). A missing file gives empty settings; anything else that is wrong
// gives Error{InvalidArgument} naming the file, the line and the key.
[[nodiscard]] Expected<RowSettings> load_row_settings(const std::string& path);

}  // namespace fanout::config
