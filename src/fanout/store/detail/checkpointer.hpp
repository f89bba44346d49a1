// The store's checkpoint thread: copies committed pages from the WAL into the database file
// off the writer thread. Private to the store.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "fanout/store/db.hpp"
#include "fanout/util/log.hpp"

namespace fanout::store::detail {

// Checkpoints (copying committed pages from the WAL into the database file) run on a thread of
// their own, with a connection of their own: SQLite's automatic checkpoint would run them on the
// writer thread, inside a commit, and the writer is the serial stage of the hot path. The
// writer asks for one once the WAL holds kCheckpointPages (task_store.cpp). request() is
// thread-safe and cheap; the rest is for the owner.
class Checkpointer final {
 public:
  // Opens a connection of its own to the store at `path` (in WAL mode) and starts the thread
  // ("fanout-ckpt"). Throws Failure{Database} naming the path.
  Checkpointer(const std::string& path, Logger log);
  // Stops and joins the thread, then closes the connection.
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Asks for a checkpoint soon. Requests made while one runs, or
  // within kCheckpointInterval of the last, are served by one checkpoint.
  void request();

  // Checkpoints run so far.
  [[nodiscard]] std::uint64_t checkpoints() const noexcept {
    return checkpoints_.load(std::memory_order_relaxed);
  }

 private:
  void run();

  std::string path_;
  Logger log_;
  Db db_;
  std::mutex mu_;  // guards due_, stop_
  std::condition_variable cv_;
  bool due_ = false;
  bool stop_ = false;
  bool warned_ = false;  // checkpoint thread only
  std::atomic<std::uint64_t> checkpoints_{0};
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace fanout::store::detail
