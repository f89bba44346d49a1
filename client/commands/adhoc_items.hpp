// The items of an ad-hoc run reshaped as GNU parallel's options ask: --colsep (columns become
// values), -N / -m / -X (several values per command line) and --pipe (chunks of stdin). Used by
// write_adhoc_job (adhoc.cpp); docs/adhoc.md says how each differs from GNU parallel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "client/commands/adhoc.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::client {

// --colsep: each item split at every match of `o.colsep` (ECMAScript, as GNU's Perl regex for
// the usual `,` `\t` `\s+`; empty columns kept), its columns the values {1}..{n} of the whole
// command line it becomes (config::adhoc_command_for; {%} left to the shell loop; {} is every
// column, a column past the last is empty). Error{InvalidArgument} naming --colsep and the
// regex when it does not compile.
[[nodiscard]] Expected<std::vector<std::string>> column_lines(
    const AdhocOptions& o, const std::vector<std::string>& items);

// -N n, -m, -X: the items (one value each) in groups, each group turned into the whole command
// line it runs (config::adhoc_command_for; {%} left to the shell loop). -N: n values a line
// (the last may have fewer; n 0: none). -m, -X: the values shared evenly among `o.jobs` lines as
// GNU parallel does when it has read them all, none longer than about 128 KiB.
std::vector<std::string> group_lines(const AdhocOptions& o, const std::vector<std::string>& items);

// GNU's --block SIZE: bytes, with K M G (1024-based) or k m g (1000-based). Error naming --block.
[[nodiscard]] Expected<std::uint64_t> parse_block(const std::string& size);

// --pipe: stdin cut into chunks as GNU parallel cuts it: `records` lines each (-N), else about
// `block` bytes each (a chunk ends at the last newline within `block` bytes, or at the first one
// after them when there is none).
std::vector<std::string> cut_chunks(const std::string& data, std::int64_t records,
                                    std::uint64_t block);

}  // namespace fanout::client
