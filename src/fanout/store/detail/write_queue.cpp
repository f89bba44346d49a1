// The writer thread's loop: group commit, transactions of bounded size, held submissions that
// come due. See write_queue.hpp.
#include "fanout/store/detail/write_queue.hpp"

#include <pthread.h>

#include <algorithm>
#include <exception>

#include "fanout/util/error.hpp"

namespace fanout::store::detail {

WriteQueue::WriteQueue(std::string path, Logger log)
    : path_(std::move(path)), log_(std::move(log)) {}

void WriteQueue::start(ApplyFn apply) {
  FANOUT_ASSERT(!thread_.joinable());
  apply_ = std::move(apply);
  thread_ = std::thread([this] {
    ::pthread_setname_np(::pthread_self(), "fanout-store");  // as top -H and perf show it
    run();
  });
}

WriteQueue::~WriteQueue() { stop(); }

void WriteQueue::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_one();
  thread_.join();
}

void WriteQueue::wait_applied() {
  std::unique_lock lk(mu_);
  const std::uint64_t target = queued_;
  if (committed_ >= target) return;
  ++flush_waiters_;
  work_cv_.notify_one();  // cut a group-commit wait short
  done_cv_.wait(lk, [&] { return committed_ >= target; });
  --flush_waiters_;
}

void WriteQueue::wake_when_applied(std::uint64_t ticket) {
  {
    std::lock_guard lk(mu_);
    if (committed_ < ticket) {
      wake_at_ = wake_at_ == 0 ? ticket : std::min(wake_at_, ticket);
      work_cv_.notify_one();  // cut a group-commit wait short
      return;
    }
  }
  if (on_applied_) on_applied_();
}

void WriteQueue::run() {
  std::vector<Op> ops;
  std::unique_lock lk(mu_);
  for (;;) {
    // Held submissions (Writer, "Deferred submission") come due even when nothing else is
    // queued: then a transaction of no operations writes them.
    const auto has_work = [this] { return stop_ || !queue_.empty(); };
    if (held_due_ == TimePoint::max()) {
      work_cv_.wait(lk, has_work);
    } else if (!work_cv_.wait_until(lk, held_due_, has_work)) {
      lk.unlock();
      if (healthy_.load(std::memory_order_relaxed)) {
        apply({});
      } else {
        held_due_ = TimePoint::max();  // dropped: see ok()
      }
      lk.lock();
      continue;
    }
    if (queue_.empty()) break;  // stop requested and everything committed
    // Group commit. A commit writes every page its transaction touched to the WAL, and the
    // hot path touches the same few pages (the right edges of the b-trees) in every
    // transaction: a writer that keeps up would commit a few operations at a time and write
    // those pages again and again. So it waits a moment for more, unless enough are queued,
    // someone waits in wait_applied(), or we stop. Only the time to durability grows, by at
    // most kGroupCommitDelay; nothing is acknowledged to a peer on commit.
    if (queue_.size() < kGroupCommitOps && !stop_ && flush_waiters_ == 0 && wake_at_ == 0) {
      work_cv_.wait_for(lk, kGroupCommitDelay, [this] {
        return stop_ || flush_waiters_ > 0 || wake_at_ != 0 || queue_.size() >= kGroupCommitOps;
      });
    }
    ops.swap(queue_);
    const std::uint64_t first = queued_ - ops.size();
    lk.unlock();
    // Everything queued goes in as few transactions as possible, but no larger than
    // kMaxOpsPerTransaction: a backlog then still commits (and shows to readers) in steps and
    // keeps the WAL file from growing with the backlog.
    for (std::size_t i = 0; i < ops.size(); i += kMaxOpsPerTransaction) {
      const std::size_t n = std::min(kMaxOpsPerTransaction, ops.size() - i);
      // After a failure the rest is dropped (see ok()), but still counted as done so that
      // wait_applied() returns.
      if (healthy_.load(std::memory_order_relaxed)) apply(std::span<Op>(ops).subspan(i, n));
      bool wake = false;
      {
        std::lock_guard done_lk(mu_);
        committed_ = first + i + n;
        if (wake_at_ != 0 && committed_ >= wake_at_) {
          wake_at_ = 0;
          wake = true;
        }
      }
      done_cv_.notify_all();
      if (wake && on_applied_) on_applied_();
    }
    ops.clear();
    lk.lock();
  }
}

void WriteQueue::apply(std::span<Op> ops) {
  try {
    held_due_ = apply_(ops);
  } catch (const std::exception& e) {
    healthy_.store(false, std::memory_order_relaxed);
    log_->critical(
        "store {}: write failed; {} operations rolled back, further writes are dropped: {}", path_,
        ops.size(), e.what());
  }
}

}  // namespace fanout::store::detail
