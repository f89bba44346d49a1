// Files that appear whole or not at all: written under a temporary name, renamed into place.
// Used for the job reports (docs/store.md, "Reports: the logs folder").
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "fanout/util/expected.hpp"
#include "fanout/util/fd.hpp"

namespace fanout {

// A file being written: into "<path>.tmp<pid>", renamed over `path` by commit(), removed if
// never committed. Lets a writer stream a large file to disk instead of holding it in memory,
// while a reader of `path` never sees half of it. The temporary file is always a new one
// (O_CREAT | O_EXCL | O_NOFOLLOW): a file or symbolic link already at its name, such as one
// another local user planted in a shared folder, is refused, never written through. The rename
// replaces a symbolic link at `path` itself, never its target. Not thread-safe; one owner.
class AtomicFile final {
 public:
  // Creates the parent folders and the temporary file (mode `mode`, less the umask). Throws
  // Failure{Io} naming the folder or the file (and what is in the way of the temporary one).
  explicit AtomicFile(std::string path, mode_t mode = 0666);
  // Removes the temporary file unless commit() succeeded; never throws.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends `text`. Throws Failure{Io} naming the file when the write fails.
  void write(std::string_view text);
  // Closes the file and renames it over `path`. Throws Failure{Io} naming the file.
  void commit();
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  // Writes buf_ out. Throws Failure{Io} naming the file.
  void flush();

  std::string path_, tmp_;
  UniqueFd fd_{};
  std::string buf_{};  // written in large pieces: callers write a CSV row at a time
  bool committed_ = false;
};

// Writes `text` to `path` through an AtomicFile (mode `mode`, less the umask). Creates the
// parent folders. Error{Io} naming the path (or the folder) on failure; no temporary file is
// left behind.
[[nodiscard]] Expected<void> write_file_atomic(const std::string& path, std::string_view text,
                                               mode_t mode = 0666);

// Removes, under `dir` (recursively), the temporary files ("<name>.tmp<pid>") that AtomicFiles of
// processes no longer alive left behind (a writer killed mid-way). Returns how many; errors
// (an unreadable folder) are skipped.
std::size_t remove_stale_temporaries(const std::string& dir);

}  // namespace fanout
