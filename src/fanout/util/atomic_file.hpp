// Files that appear whole or not at all: written under a temporary name, renamed into place.
// Used for the job reports (docs/store.md, "Reports: the logs folder").
#pragma once

#include <cstddef>
#include <fstream>
#include <string>
#include <string_view>

#include "fanout/util/expected.hpp"

namespace fanout {

// A file being written: into "<path>.tmp<pid>", renamed over `path` by commit(), removed if
// never committed. Lets a writer stream a large file to disk instead of holding it in memory,
// while a reader of `path` never sees half of it. Not thread-safe; one owner.
class AtomicFile final {
 public:
  // Creates the parent folders and opens the temporary file. Throws Failure{Io} naming the
  // folder or `path`.
  explicit AtomicFile(std::string path);
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
  std::string path_, tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

// Writes `text` to `path` through an AtomicFile. Creates the parent folders. Error{Io} naming
// the path (or the folder) on failure; no temporary file is left behind.
[[nodiscard]] Expected<void> write_file_atomic(const std::string& path, std::string_view text);

// Removes, under `dir` (recursively), the temporary files ("<name>.tmp<pid>") that AtomicFiles of
// processes no longer alive left behind (a writer killed mid-way). Returns how many; errors
// (an unreadable folder) are skipped.
std::size_t remove_stale_temporaries(const std::string& dir);

}  // namespace fanout
