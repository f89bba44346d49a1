// The CPU seconds a worker reports for each mini-batch (the D frame's cpu_seconds), read once
// per group of mini-batches run back to back. See docs/worker-pipe.md.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "pool/worker_pipe.hpp"

namespace fanout::worker {

// A reading of the process's CPU clock costs system calls (fanout-worker's: two), which on
// some virtual machines take several microseconds each: more than a no-op mini-batch. So the
// mini-batches a worker runs back to back share one reading, taken once their run time adds up
// to kExactCpuRunS, or when the replies of one read are about to be written; each gets a share
// of that CPU in proportion to its run time. A mini-batch that runs kExactCpuRunS or longer
// closes its group, so its CPU is its own, give or take the short ones run just before it.
class CpuShares {
 public:
  static constexpr double kExactCpuRunS = 0.001;
  using Reader = double (*)();

  // Takes the first reading.
  explicit CpuShares(Reader read) : read_(read), mark_(read()) {}

  // The D frame just appended to `replies` at `offset` ran for `run_s`; its cpu_seconds is
  // written when its group is settled.
  void add(std::string& replies, std::size_t offset, double run_s) {
    pending_.push_back(Pending{offset, run_s});
    run_sum_ += run_s;
    if (run_sum_ >= kExactCpuRunS) settle(replies);
  }

  // Takes a reading and writes each pending reply's share into its cpu_seconds field. Call it
  // before `replies` is written.
  void settle(std::string& replies) {
    if (pending_.empty()) return;
    const double now = read_();
    const double spent = std::max(0.0, now - mark_);
    mark_ = now;
    const auto n = static_cast<double>(pending_.size());
    for (const Pending& p : pending_) {
      const double share = run_sum_ > 0 ? spent * (p.run_s / run_sum_) : spent / n;
      pipe::write_le<double>(replies.data() + p.offset + pipe::DoneLayout::kCpuSeconds, share);
    }
    pending_.clear();
    run_sum_ = 0;
  }

 private:
  struct Pending {
    std::size_t offset;
    double run_s;
  };
  Reader read_;
  double mark_;
  double run_sum_ = 0;
  std::vector<Pending> pending_;
};

}  // namespace fanout::worker
