// The job file of an ad-hoc run, as GNU parallel users work: `fanout run -c 'gzip -k {}' --input
// DIR|LIST|-` (or `::: a b c`) becomes a command-runtime job file (client/commands/adhoc.* writes
// it beside the store and runs it through the same path as any job file). docs/adhoc.md lists
// what is supported and what differs from GNU parallel.
#pragma once

#include <cstdint>
#include <optional>
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
  bool pipe = false;                  // --pipe: each item is a chunk file, the command's stdin
  bool precomputed = false;           // -X, -m, -N: each item is its whole command line
};

// A `task.command`: a POSIX shell loop that runs `command` once per item of the mini-batch, with
// `{}` the item, `{.}` without its extension, `{/}` its base name, `{//}` its folder, `{/.}` the
// base name without extension, `{#}` its 1-based sequence number in the input, `{%}` its job
// slot (the worker's number in its pool, 1..-j), `{n}` `{n.}` `{n/}` `{n//}` `{n/.}` the value
// of input source n (negative n: counted from the last; past the last: empty). Each value is put
// in as GNU parallel does: quoted only where the shell would read it otherwise (always with
// quote_all; never for a replacement string that starts the command), then the line is run by
// the shell. A command with none of them gets ` {}` appended, as in GNU parallel (not with
// pipe). A failing item fails its mini-batch, and says on stderr which item and its exit status.
// Each item's stderr is also appended to $FANOUT_ADHOC_STDERR when set (the client shows it as
// the job runs).
std::string adhoc_shell_line(const AdhocShell& shell);

// `v` as GNU parallel puts a value into a command: as it is when every character is one the
// shell reads literally (letters, digits, `_./:=@%+,-`), else single-quoted ('it'"'"'s').
// quote_all: always single-quoted.
std::string gnu_quote(std::string_view v, bool quote_all = false);

// What the values of one command line are: one per input source (the default), the arguments
// of -m and -N (`{}` is each of them, quoted, separated by spaces), or of -X (each word holding
// `{}` repeated once per argument).
enum class AdhocArgs { Sources, Multi, Context };

// The command line adhoc_shell_line() runs for one item (`values`; `seq` its 1-based number,
// `slot` what {%} becomes): what --dry-run prints, the Command column of --joblog, and the
// lines -X, -m and -N run.
std::string adhoc_command_for(const std::string& command, const std::vector<std::string>& values,
                              std::uint64_t seq, bool quote_all,
                              AdhocArgs args = AdhocArgs::Sources, std::string_view slot = "1");

// The first replacement string of GNU parallel in `command` that fanout does not support
// (`{= perl =}`, `{0#}`, `{0%}`), as an error message naming it and what to write instead.
std::optional<std::string> unsupported_replacement(const std::string& command);

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
  std::uint32_t timeout_s = 0;  // retry_settings.timeout, always written; 0: none
  std::vector<std::pair<std::string, std::string>> env{};
};

// The job file's text (YAML that config::load_job reads back). It sets FANOUT_COMMAND_ITEMS to
// exit_status, so an item counts as succeeded by its exit status whatever it prints.
std::string adhoc_job_yaml(const AdhocJob& job);

}  // namespace fanout::config
