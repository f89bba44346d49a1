// Per-peer bounds: the client's window and the task lease. See peer_bounds.hpp.
#include "interchange/peer_bounds.hpp"

#include <algorithm>

namespace fanout::ix {

std::size_t refuse_beyond_window(std::vector<proto::MiniBatch>& batches, std::uint64_t finished,
                                 std::uint32_t window) {
  const std::uint64_t limit =
      finished + 2 * static_cast<std::uint64_t>(std::max(window, 1u)) + kWindowSlack;
  const auto keep = std::remove_if(batches.begin(), batches.end(),
                                   [&](const proto::MiniBatch& mb) { return mb.index >= limit; });
  const auto refused = static_cast<std::size_t>(batches.end() - keep);
  batches.erase(keep, batches.end());
  return refused;
}

void TaskLeases::sent(std::uint64_t pool_id, std::uint64_t task_id, Clock::time_point now,
                      const std::unordered_set<std::uint64_t>& charged) {
  auto& leases = renewed_[pool_id];
  leases[task_id] = now;
  // A busy pool sends results, not heartbeats: the entries of its finished tasks are dropped
  // here, so that they stay within twice what it holds.
  if (leases.size() > 2 * charged.size() + 64) {
    for (auto it = leases.begin(); it != leases.end();) {
      it = charged.count(it->first) != 0 ? std::next(it) : leases.erase(it);
    }
  }
}

std::vector<std::uint64_t> TaskLeases::heartbeat(std::uint64_t pool_id,
                                                 const std::unordered_set<std::uint64_t>& charged,
                                                 const std::vector<std::uint64_t>& held,
                                                 Clock::time_point now, Clock::duration grace) {
  std::unordered_set<std::uint64_t> listed(held.begin(), held.end());
  auto& old = renewed_[pool_id];
  std::unordered_map<std::uint64_t, Clock::time_point> next;
  next.reserve(charged.size());
  std::vector<std::uint64_t> expired;
  for (const std::uint64_t task : charged) {
    if (listed.count(task) != 0) {
      next.emplace(task, now);
      continue;
    }
    const auto it = old.find(task);
    // Not seen sent (it cannot be, but then it is as new): its lease starts now.
    const Clock::time_point since = it == old.end() ? now : it->second;
    if (now - since > grace) {
      expired.push_back(task);
    } else {
      next.emplace(task, since);
    }
  }
  old = std::move(next);
  std::sort(expired.begin(), expired.end());
  return expired;
}

std::size_t TaskLeases::entries() const noexcept {
  std::size_t n = 0;
  for (const auto& [pool, leases] : renewed_) n += leases.size();
  return n;
}

}  // namespace fanout::ix
