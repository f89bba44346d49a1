// The job file of an ad-hoc run, as GNU parallel users work: `fanout run -c 'gzip -k {}' --input
// DIR|LIST|-` becomes a command-runtime job file (client/commands/adhoc.* writes it beside the
// store and runs it through the same path as any job file).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fanout::config {

// A `task.command`: a POSIX shell loop that runs `command` once per item of the mini-batch, with
// `{}` the item, `{.}` without its extension, `{/}` its base name, `{//}` its folder, `{/.}` the
// base name without extension, `{#}` its 1-based sequence number in the input. Each is
// substituted quoted (do not quote it again). A command with none of them gets ` {}` appended,
// as in GNU parallel. A failing item fails its mini-batch.
std::string adhoc_shell_line(const std::string& command, std::uint64_t mini_batch_size);

struct AdhocJob {
  std::string name{};
  std::string description{};
  std::string command{};      // the user's command; adhoc_shell_line() makes the task's
  std::string input_type{};   // uri_folder or fanout_list
  std::string input_path{};   // absolute
  std::string output_path{};  // absolute: the append_row_to file
  std::string code{};         // the working folder
  std::uint64_t mini_batch_size = 1;
  std::int64_t error_threshold = -1;
  int max_retries = 0;
  std::uint32_t timeout_s = 0;  // 0: none
  std::vector<std::pair<std::string, std::string>> env{};
};

// The job file's text (YAML that config::load_job reads back).
std::string adhoc_job_yaml(const AdhocJob& job);

}  // namespace fanout::config
