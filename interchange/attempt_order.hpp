// The order in which the report thread hands committed attempts on to the reports being built
// while their jobs run (report_writer.*): attempt id order, the order of
// processed_mini-batches.csv. Attempts commit out of id order (a task handed out earlier can
// finish later), so the attempts above the first id not committed yet (a hole) are held until
// it is. Decides without I/O: the store's writer feeds the report thread what it commits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "fanout/store/committed_attempt.hpp"

namespace fanout::ix {

class AttemptOrder final {
 public:
  // Ids below `first_id` are never handed on (tasks handed out before the first job watched).
  explicit AttemptOrder(std::uint64_t first_id) : next_(first_id) {}

  // The lowest id not handed on yet.
  [[nodiscard]] std::uint64_t next() const noexcept { return next_; }
  // Attempts held (waiting for a hole below them), markers included.
  [[nodiscard]] std::size_t held() const noexcept { return held_.size(); }

  // A committed attempt. `wanted`: its job's report is being built (else only its id counts).
  // An id seen before, or below next(), is ignored.
  void arrive(store::CommittedAttempt&& a, bool wanted);
  // arrive(a, wanted) then release(fn), where an attempt that is next in order goes to `fn`
  // straight away instead of through the held map (no node, no move of its text).
  template <typename Fn>
  void arrive_and_release(store::CommittedAttempt& a, bool wanted, Fn&& fn) {
    if (a.id == next_ && (held_.empty() || held_.begin()->first != next_)) {
      if (wanted) fn(a);
      ++next_;
    } else {
      arrive(std::move(a), wanted);
    }
    release(fn);
  }
  // An id that will never be committed (a task id taken but never handed out, or handed back
  // unstarted).
  void skip(std::uint64_t id);

  // Hands on the held attempts from next() up to the first hole, in id order.
  template <typename Fn>
  void release(Fn&& fn) {
    for (;;) {
      auto it = held_.begin();
      if (it != held_.end() && it->first == next_) {
        if (it->second) fn(*it->second);
        held_.erase(it);
        ++next_;
      } else if (auto s = skipped_.find(next_); s != skipped_.end()) {
        skipped_.erase(s);
        ++next_;
      } else {
        break;
      }
    }
    skipped_.erase(skipped_.begin(), skipped_.lower_bound(next_));
  }

  // Hands on every held attempt of `job_id`, whatever holes are below them: the job has ended
  // and its attempts are all committed, so the holes are other jobs' ids.
  template <typename Fn>
  void release_job(std::uint64_t job_id, Fn&& fn) {
    for (auto& [id, h] : held_) {
      if (h && h->job_id == job_id) {
        fn(*h);
        h.reset();  // a marker: the id is still in order
      }
    }
  }

 private:
  std::uint64_t next_;
  std::map<std::uint64_t, std::optional<store::CommittedAttempt>> held_{};  // empty: a marker
  std::set<std::uint64_t> skipped_{};
};

}  // namespace fanout::ix
