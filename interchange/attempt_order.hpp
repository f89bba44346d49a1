// The order in which the report thread hands committed attempts on to the reports being built
// while their jobs run (report_writer.*): attempt id order, the order of
// processed_mini-batches.csv. Attempts commit out of id order (a task handed out earlier can
// finish later), so the rows above the first id not yet committed (a hole) are held until it
// is. Decides without I/O: the report thread reads the store and feeds it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fanout/store/report_source.hpp"

namespace fanout::ix {

// A copy of a store::AttemptRow whose views point into its own text. Not movable (the views
// point into it); held by unique_ptr.
struct HeldAttempt {
  explicit HeldAttempt(const store::AttemptRow& a);
  HeldAttempt(const HeldAttempt&) = delete;
  HeldAttempt& operator=(const HeldAttempt&) = delete;
  store::AttemptRow row{};
  std::string text{};
};

class AttemptOrder final {
 public:
  // Ids below `first_id` are never handed on (attempts of an earlier interchange run).
  explicit AttemptOrder(std::uint64_t first_id) : next_(first_id), max_seen_(first_id - 1) {}

  // The lowest id not handed on yet; the highest seen.
  [[nodiscard]] std::uint64_t next() const noexcept { return next_; }
  [[nodiscard]] std::uint64_t max_seen() const noexcept { return max_seen_; }
  // Rows held (waiting for a hole below them), markers included.
  [[nodiscard]] std::size_t held() const noexcept { return held_.size(); }
  // The holes: ids from next() to max_seen() neither seen nor skipped, at most `limit`.
  [[nodiscard]] std::vector<std::uint64_t> missing(std::size_t limit) const;

  // A committed attempt. `wanted`: its job's report is being built (else only its id counts).
  // An id seen before, or below next(), is ignored.
  void arrive(const store::AttemptRow& a, bool wanted);
  // An id that will never be committed (a task id taken but never handed out).
  void skip(std::uint64_t id);

  // Hands on the held rows from next() up to the first hole, in id order.
  template <typename Fn>
  void release(Fn&& fn) {
    for (;;) {
      auto it = held_.begin();
      if (it != held_.end() && it->first == next_) {
        if (it->second) fn(static_cast<const store::AttemptRow&>(it->second->row));
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

  // Hands on every held row of `job_id`, whatever holes are below them: the job has ended and
  // its attempts are all committed, so the holes are other jobs' ids.
  template <typename Fn>
  void release_job(std::uint64_t job_id, Fn&& fn) {
    for (auto& [id, h] : held_) {
      if (h && h->row.job_id == job_id) {
        fn(static_cast<const store::AttemptRow&>(h->row));
        h.reset();  // a marker: the id is still in order
      }
    }
  }

 private:
  std::uint64_t next_, max_seen_;
  std::map<std::uint64_t, std::unique_ptr<HeldAttempt>> held_{};  // null: a marker
  std::set<std::uint64_t> skipped_{};
};

}  // namespace fanout::ix
