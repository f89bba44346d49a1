// GNU parallel's command line for `fanout run`: the argv pre-pass that runs before CLI11 reads
// the rest. It takes off the input sources (`:::`, `::::`, `-a`), reads the GNU options fanout
// has no CLI11 option for (-N, -m, -X, --colsep, --pipe, --block), turns GNU spellings into
// fanout's (--jobs: -j; --eta, --progress: --bar; -q: --quote) and refuses GNU options it does
// not support, naming what to use instead. docs/adhoc.md lists them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "client/commands/adhoc.hpp"

namespace fanout::client {

// What the pre-pass took off the command line: the arguments CLI11 is to parse, the input
// sources, and the GNU options read here (in `gnu`: max_args, multi, colsep, pipe, block).
struct AdhocArgv {
  std::vector<std::string> args{};
  std::vector<InputSource> sources{};
  AdhocOptions gnu{};
  bool link = false;  // --link: each source linked to the one before
};

// Reads argv as above, for `fanout run` only (other commands' arguments are returned as they
// are). Returns nullopt after printing why on stderr: a :::: or -a file that cannot be read, a
// GNU option fanout refuses, or a bad value.
std::optional<AdhocArgv> split_adhoc_argv(int argc, char** argv);

}  // namespace fanout::client
