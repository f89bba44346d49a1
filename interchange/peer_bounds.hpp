// What one peer may make the interchange hold, decided without I/O: a client's mini-batches
// beyond its window are refused, and a pool holds a task only as long as its heartbeats list it
// (the task lease). See docs/architecture.md (failure table) and docs/protocol.md (Heartbeat,
// "Limits").
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fanout/protocol/messages.hpp"
#include "fanout/util/clock.hpp"

namespace fanout::ix {

// The client's window, enforced: a client may have submitted mini-batches up to `window` beyond
// the `finished` ones (JobAccepted). Removes from `batches` those whose index is at or beyond
// finished + 2 x window + kWindowSlack and returns how many were removed. The margin is for
// honest clients: one whose count of finished ones is ahead of a restarted interchange's, and
// fanout perf and fanout-pool-load, which send a whole frame of kWindowSlack mini-batches once
// half their window is free.
inline constexpr std::uint64_t kWindowSlack = 1024;
std::size_t refuse_beyond_window(std::vector<proto::MiniBatch>& batches, std::uint64_t finished,
                                 std::uint32_t window);

// The task lease. A pool's Heartbeat lists the tasks it holds (queued, running, results not yet
// sent). A task charged to a pool that was neither listed since it was sent nor listed for
// longer than `grace` is not held by the pool (lost on the way, or dropped by a broken pool that
// heartbeats on): the caller requeues it. A pool that heartbeats no list (an older pool) is
// never judged. Not thread-safe: owned by the interchange loop.
class TaskLeases final {
 public:
  // `task_id` was sent to pool `pool_id` at `now`; `charged` is what the pool is charged with
  // now (PoolTable's Pool::tasks), used to drop the entries of tasks that ended since.
  void sent(std::uint64_t pool_id, std::uint64_t task_id, Clock::time_point now,
            const std::unordered_set<std::uint64_t>& charged);
  // A heartbeat of pool `pool_id` listing `held`. Returns the tasks of `charged` whose lease
  // expired, ascending; the others are renewed (listed) or keep their time.
  [[nodiscard]] std::vector<std::uint64_t> heartbeat(
      std::uint64_t pool_id, const std::unordered_set<std::uint64_t>& charged,
      const std::vector<std::uint64_t>& held, Clock::time_point now, Clock::duration grace);
  // The pool is gone: its leases with it.
  void forget_pool(std::uint64_t pool_id) { renewed_.erase(pool_id); }
  // Entries kept, for tests (bounded by twice what the pools are charged with, plus a little).
  [[nodiscard]] std::size_t entries() const noexcept;

 private:
  // pool id -> task id -> when it was sent or last listed.
  std::unordered_map<std::uint64_t, std::unordered_map<std::uint64_t, Clock::time_point>>
      renewed_{};
};

}  // namespace fanout::ix
