// The job file of an ad-hoc run, as GNU parallel users work: `fanout run -c 'gzip -k {}' --input
// DIR|LIST|-` (or `::: a b c`) becomes a command-runtime job file (client/commands/adhoc.* writes
// it beside the store and runs it through the same path as any job file). docs/adhoc.md lists
// what is supported and what differs from GNU parallel.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fanout::config {

// Separates the values of one item when there are several input sources (`::: a b ::: 1 2`):
// the ASCII unit separator, which no file name or text line is expected to hold.
inline constexpr char kSourceSeparator = '\x1f';

// How the task's shell loop runs the user's command (-c) on each item of a mini-batch.
struct AdhocShell {
  std::string command{};              // with GNU parallel's replacement strings
  std::uint64_t mini_batch_size = 1;  // for {#}
  std::size_t sources = 1;            // values per item (kSourceSeparator between them)
  bool quote_all = false;             // -q: quote every value, even one the shell reads as it is
  bool tag = false;                   // --tag: each stdout and stderr line starts with the item
  bool results = false;               // --results: outputs under $FANOUT_ADHOC_RESULTS
};

// A `task.command`: a POSIX shell loop that runs `command` once per item of the mini-batch, with
// `{}` the item, `{.}` without its extension, `{/}` its base name, `{//}` its folder, `{/.}` the
// base name without extension, `{#}` its 1-based sequence number in the input, `{1}`..`{9}` the
// value of that input source. Each value is put in as GNU parallel does: quoted only where the
// shell would read it otherwise (always with quote_all), then the line is run by the shell. A
// command with none of them gets ` {}` appended, as in GNU parallel. A failing item fails its
// mini-batch, and says on stderr which item and its exit status. Each item's stderr is also
// appended to $FANOUT_ADHOC_STDERR when set (the client shows it as the job runs).
std::string adhoc_shell_line(const AdhocShell& shell);

// `v` as GNU parallel puts a value into a command: as it is when every character is one the
// shell reads literally (letters, digits, `_./:=@%+,-`), else single-quoted ('it'"'"'s').
// quote_all: always single-quoted.
std::string gnu_quote(std::string_view v, bool quote_all = false);

// The command line adhoc_shell_line() runs for one item (`values`, one per source; `seq` its
// 1-based number): what --dry-run prints and the Command column of --joblog.
std::string adhoc_command_for(const std::string& command, const std::vector<std::string>& values,
                              std::uint64_t seq, bool quote_all);

struct AdhocJob {
  std::string name{};
  std::string description{};
  AdhocShell shell{};         // the user's command; adhoc_shell_line() makes the task's
  std::string input_type{};   // uri_folder or fanout_list
  std::string input_path{};   // absolute
  std::string output_path{};  // absolute: the append_row_to file
  std::string code{};         // the working folder
  std::int64_t error_threshold = -1;
  int max_retries = 0;
  std::uint32_t timeout_s = 0;  // 0: none
  std::vector<std::pair<std::string, std::string>> env{};
};

// The job file's text (YAML that config::load_job reads back). It sets FANOUT_COMMAND_ITEMS to
// exit_status, so an item counts as succeeded by its exit status whatever it prints.
std::string adhoc_job_yaml(const AdhocJob& job);

}  // namespace fanout::config
