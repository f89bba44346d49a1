// The report thread's attempt order. See attempt_order.hpp.
#include "interchange/attempt_order.hpp"

#include <utility>

namespace fanout::ix {

void AttemptOrder::arrive(store::CommittedAttempt&& a, bool wanted) {
  if (a.id < next_) return;
  auto [it, added] = held_.try_emplace(a.id);
  if (added && wanted) it->second.emplace(std::move(a));
}

void AttemptOrder::skip(std::uint64_t id) {
  if (id >= next_) skipped_.insert(id);
}

}  // namespace fanout::ix
