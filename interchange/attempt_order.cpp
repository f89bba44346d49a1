// The report thread's attempt order. See attempt_order.hpp.
#include "interchange/attempt_order.hpp"

#include <algorithm>

namespace fanout::ix {

HeldAttempt::HeldAttempt(const store::AttemptRow& a) : row(a) {
  std::string_view* views[] = {&row.status,         &row.pool,          &row.node,  &row.process,
                               &row.error_category, &row.error_message, &row.detail};
  std::size_t size = 0;
  for (const auto* v : views) size += v->size();
  text.reserve(size);
  for (const auto* v : views) text += *v;
  std::size_t at = 0;
  for (auto* v : views) {
    const std::size_t n = v->size();
    *v = std::string_view(text).substr(at, n);
    at += n;
  }
}

std::vector<std::uint64_t> AttemptOrder::missing(std::size_t limit) const {
  std::vector<std::uint64_t> out;
  auto it = held_.lower_bound(next_);
  auto sk = skipped_.lower_bound(next_);
  for (std::uint64_t id = next_; id <= max_seen_ && out.size() < limit; ++id) {
    while (it != held_.end() && it->first < id) ++it;
    while (sk != skipped_.end() && *sk < id) ++sk;
    if (it != held_.end() && it->first == id) continue;
    if (sk != skipped_.end() && *sk == id) continue;
    out.push_back(id);
  }
  return out;
}

void AttemptOrder::arrive(const store::AttemptRow& a, bool wanted) {
  if (a.id < next_ || held_.count(a.id) != 0) return;
  held_.emplace(a.id, wanted ? std::make_unique<HeldAttempt>(a) : nullptr);
  max_seen_ = std::max(max_seen_, a.id);
}

void AttemptOrder::skip(std::uint64_t id) {
  if (id >= next_) skipped_.insert(id);
}

}  // namespace fanout::ix
