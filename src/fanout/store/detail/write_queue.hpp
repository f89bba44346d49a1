// The queue between the threads that record (the interchange loop) and the store's one writer
// thread: group commit, backpressure, flush and the writer thread itself. Private to the store.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fanout/store/detail/ops.hpp"
#include "fanout/util/log.hpp"

namespace fanout::store::detail {

// The writer commits once this many operations are queued, or kGroupCommitDelay after the
// first, whichever comes first (see WriteQueue::run()).
inline constexpr std::size_t kGroupCommitOps = 8192;
inline constexpr std::chrono::milliseconds kGroupCommitDelay{20};
// The most queued operations applied in one transaction.
inline constexpr std::size_t kMaxOpsPerTransaction = 32768;
// Operations queued but not yet committed beyond which push() waits (about 40 MB of attempts).
inline constexpr std::uint64_t kMaxBacklog = 4 * kMaxOpsPerTransaction;

// Operations queued by any thread, applied in order by one writer thread it owns, as few
// transactions as possible. push() and wait_applied() are thread-safe; the callback runs on the
// writer thread only. After a failed apply the queue is not ok(): what is queued then is dropped
// (but still counted as applied, so that wait_applied() returns).
class WriteQueue final {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // Applies one transaction's operations and returns when it must run next without new work
  // (the writer's held submissions; TimePoint::max(): only with work). Throws on failure; the
  // operations are then rolled back.
  using ApplyFn = std::function<TimePoint(std::span<Op>)>;

  // A queue that takes operations; nothing is applied before start(). `path` names the store
  // in log messages.
  WriteQueue(std::string path, Logger log);
  // stop().
  ~WriteQueue();
  WriteQueue(const WriteQueue&) = delete;
  WriteQueue& operator=(const WriteQueue&) = delete;

  // Queues `op`. Blocks while kMaxBacklog operations wait to be applied, until half of them
  // are; drops `op` when the queue is not ok().
  template <typename T>
  void push(T&& op) {
    if (!healthy_.load(std::memory_order_relaxed)) return;  // dropped: see ok()
    bool was_empty = false;
    bool enough = false;
    {
      std::unique_lock lk(mu_);
      // Backpressure: a writer that falls behind (a busy machine, a slow disk) slows the caller
      // down instead of letting the queue, and the interchange's memory, grow with the job.
      // The writer is busy whenever the backlog is this large, and wakes us after each commit.
      if (queued_ - committed_ >= kMaxBacklog) {
        done_cv_.wait(lk, [this] {
          return queued_ - committed_ < kMaxBacklog / 2 ||
                 !healthy_.load(std::memory_order_relaxed);
        });
      }
      was_empty = queue_.empty();
      queue_.emplace_back(std::forward<T>(op));
      ++queued_;
      enough = queue_.size() == kGroupCommitOps;
    }
    // A non-empty queue means the writer was already woken, or is busy and will look again,
    // or is waiting for a group commit to fill (woken once it has).
    if (was_empty || enough) work_cv_.notify_one();
  }

  // Starts the writer thread ("fanout-store"), which calls `apply`. Once only.
  void start(ApplyFn apply);

  // Blocks until everything queued before the call is applied (or dropped after a failure),
  // cutting a group-commit wait short.
  void wait_applied();

  // Operations queued so far: a ticket for everything queued before the call.
  [[nodiscard]] std::uint64_t ticket() {
    std::lock_guard lk(mu_);
    return queued_;
  }
  // Whether everything up to `ticket` is applied (or dropped after a failure).
  [[nodiscard]] bool applied(std::uint64_t ticket) {
    std::lock_guard lk(mu_);
    return committed_ >= ticket;
  }
  // wait_applied() without blocking: `on_applied` (set once, before start()) is called once
  // everything up to `ticket` is applied, on the writer thread, or at once on this one when it
  // already is. Group-commit waits are cut short until then. One target at a time: a later
  // call with a lower ticket lowers it; the caller asks again for what is still not applied.
  void wake_when_applied(std::uint64_t ticket);
  void set_on_applied(std::function<void()> on_applied) { on_applied_ = std::move(on_applied); }

  // Applies everything queued, then joins the writer thread (if started). Idempotent; push()
  // must not be called during or after it.
  void stop();

  // Operations queued and not yet applied.
  [[nodiscard]] std::uint64_t backlog() {
    std::lock_guard lk(mu_);
    return queued_ - committed_;
  }

  // False once an apply failed.
  [[nodiscard]] bool ok() const noexcept { return healthy_.load(std::memory_order_relaxed); }

 private:
  void run();
  void apply(std::span<Op> ops);

  std::string path_;
  Logger log_;
  ApplyFn apply_;

  std::mutex mu_;  // guards queue_, queued_, committed_, stop_, flush_waiters_
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::vector<Op> queue_;
  std::uint64_t queued_ = 0;     // operations ever queued
  std::uint64_t committed_ = 0;  // operations ever applied (or dropped after a failure)
  bool stop_ = false;
  int flush_waiters_ = 0;      // threads in wait_applied(): the writer commits without waiting
  std::uint64_t wake_at_ = 0;  // wake_when_applied()'s ticket; 0: none (also commits at once)
  std::function<void()> on_applied_;
  std::atomic<bool> healthy_{true};

  // Writer thread only: when the held submissions are due (see ApplyFn).
  TimePoint held_due_ = TimePoint::max();

  std::thread thread_;
};

}  // namespace fanout::store::detail
