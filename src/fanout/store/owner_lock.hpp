// One live interchange owns a store at a time: it holds a write lock (fcntl)
// on "<store>.owner" for its whole life, released by the kernel however it ends (SIGKILL too),
// and writes into that file where it listens, so that another `fanout run` on the same store
// attaches to it instead of taking over its jobs. docs/store.md, section 1.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "fanout/util/expected.hpp"
#include "fanout/util/fd.hpp"

namespace fanout::store {

// The lock file of the store at `db_path`.
std::string owner_file(const std::string& db_path);

// What a store's owner published: its pid (from the lock) and the text it wrote ("key=value"
// lines: client=, pool=, pid=, security=, keys=); `text` is empty until it has published. Text
// whose pid= is not the lock holder's is a dead owner's, left in the file: it reads as empty.
struct StoreOwner {
  pid_t pid = 0;
  std::string text{};
};

class OwnerLock final {
 public:
  OwnerLock() = default;
  // Takes the lock of the store at `db_path` (creating the file, mode 0600) and empties the file
  // (what a dead owner published is no longer true). Error{State} naming the store and the
  // owner's pid when a live process holds it; Error{Io} naming the file when it cannot be opened
  // or locked, or when it is not to be trusted (a symbolic link, or a file of another user or
  // writable by others: util/fs.hpp open_trusted), naming its owner and mode.
  static Expected<OwnerLock> acquire(const std::string& db_path);
  // Replaces the file's text (where this owner listens). Error{Io} naming the file.
  Expected<void> publish(const std::string& text);
  [[nodiscard]] bool held() const noexcept { return fd_.valid(); }

 private:
  std::string path_{};
  UniqueFd fd_{};
};

// The live owner of the store at `db_path`, or nullopt when no process holds its lock (or there
// is no owner file). Error{Io} naming the file, its owner and mode when the file is not to be
// trusted (as acquire()): nothing it says is used.
[[nodiscard]] Expected<std::optional<StoreOwner>> find_owner(const std::string& db_path);

}  // namespace fanout::store
