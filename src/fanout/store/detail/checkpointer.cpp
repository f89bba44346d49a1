// The checkpoint thread. See checkpointer.hpp.
#include "fanout/store/detail/checkpointer.hpp"

#include <pthread.h>
#include <sqlite3.h>

#include <chrono>

namespace fanout::store::detail {

namespace {

// The checkpoint thread runs at most this often (see Checkpointer::run()).
constexpr std::chrono::milliseconds kCheckpointInterval{100};

}  // namespace

Checkpointer::Checkpointer(const std::string& path, Logger log)
    : path_(path), log_(std::move(log)), db_(path, Db::Mode::ReadWriteCreate) {
  // A connection that has not read the database does not know it is in WAL mode: its
  // sqlite3_wal_checkpoint_v2() returns SQLITE_OK having done nothing. One read opens the WAL.
  (void)db_.query_int("SELECT count(*) FROM sqlite_master");
  thread_ = std::thread([this] {
    ::pthread_setname_np(::pthread_self(), "fanout-ckpt");  // as top -H and perf show it
    run();
  });
}

Checkpointer::~Checkpointer() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Checkpointer::request() {
  {
    std::lock_guard lk(mu_);
    due_ = true;
  }
  cv_.notify_one();
}

// When asked (the WAL has grown past kCheckpointPages: task_store.cpp), at most every
// kCheckpointInterval, a PASSIVE checkpoint, which copies what
// readers no longer need and never waits for, or blocks, the writer or a reader. What it cannot
// copy yet is copied by a later one. Once a checkpoint has copied everything, the writer's next
// transaction starts the WAL file over, so the file stays about as large as what is written
// between two checkpoints.
void Checkpointer::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stop_ || due_; });
    if (stop_) break;
    due_ = false;
    lk.unlock();
    int wal_frames = 0, copied = 0;
    const int rc = sqlite3_wal_checkpoint_v2(db_.get(), nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                             &wal_frames, &copied);
    // BUSY: another checkpoint (the writer's backstop) is running; the next one continues.
    if (rc != SQLITE_OK && rc != SQLITE_BUSY && !warned_) {
      warned_ = true;
      log_->warn("store {}: checkpoint failed, the writer's own checkpoints take over: {}", path_,
                 db_.errmsg());
    }
    checkpoints_.fetch_add(1, std::memory_order_relaxed);
    lk.lock();
    cv_.wait_for(lk, kCheckpointInterval, [this] { return stop_; });
  }
}

}  // namespace fanout::store::detail
