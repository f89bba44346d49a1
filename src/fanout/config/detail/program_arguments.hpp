// Private to config/: a parallel job's `task.program_arguments`, split into the entry script's
// own arguments and ParallelRunStep's flags (--error_threshold, --run_max_try, ...), which fanout
// takes out and applies itself. See docs/job-spec.md#program_arguments.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fanout/config/detail/job_io.hpp"
#include "fanout/config/detail/located_yaml.hpp"

namespace fanout::config::detail {

struct ProgramArguments {
  std::string text{};                                // as written, after ${{...}} substitution
  std::vector<std::string> user_args{};              // for the entry script's sys.argv
  std::map<std::string, std::string> system_args{};  // flag (without --) -> its value; last wins
};

// Splits `raw` (written at `w`) like a shell, then substitutes references word by word, so that a
// path with spaces stays one argument. Fails at `w` on an unclosed quote, a system flag without
// a value, or a bad reference.
[[nodiscard]] ProgramArguments read_program_arguments(const YamlReader& r, const Where& w,
                                                      const std::string& raw, const JobRefs& refs);

}  // namespace fanout::config::detail
