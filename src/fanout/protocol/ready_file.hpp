// Where a live interchange listens, as it tells other processes through a file: the run folder's
// `interchange.ready` (read by the client that started it, `fanout wait`, `fanout status`) and
// the store's owner file (read by another `fanout run` on the same store, which attaches to it).
// The one struct, writer and parser of both. The text is `key=value` lines; see docs/store.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "fanout/util/expected.hpp"

namespace fanout::proto {

// An empty (or 0) field is absent from the text. A `fanout run --interchange` client writes only
// `client` and `job` (the pointer `fanout wait` follows); the interchange writes the others.
struct ReadyFile {
  std::string client{};    // the client endpoint (ipc://, tcp://)
  std::string pool{};      // the pool endpoint
  std::int64_t pid = 0;    // the interchange's process id; 0: not known
  std::string host{};      // the host the interchange runs on
  std::string security{};  // "ipc", "insecure" or "curve": what a client must use
  std::string keys{};      // the key folder, with security "curve"
  std::uint64_t job = 0;   // the job a client's pointer names; 0: none
};

// The file's text: one `key=value\n` line per non-empty field, in the struct's order.
[[nodiscard]] std::string format_ready(const ReadyFile& r);

// Reads the text of a ready file. Unknown keys are skipped (a newer writer may add some); an
// empty text is an empty ReadyFile. Error{Parse} naming `where`, the line and what was found for
// a non-empty line without '=', or a pid= or job= that is not a positive number.
[[nodiscard]] Expected<ReadyFile> parse_ready(std::string_view text, std::string_view where);

}  // namespace fanout::proto
