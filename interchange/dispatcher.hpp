// Which ready tasks go to a pool with room: the scheduling policy, apart from sending.
// See docs/architecture.md. Issue 12's fair share replaces plan() and keeps its contract.
#pragma once

#include <cstddef>
#include <vector>

#include "interchange/job_ledger.hpp"
#include "interchange/pool_table.hpp"

namespace fanout::ix {

// Take `count` ready tasks of `job` for the pool; `needs_info`: the pool was never sent the
// job's JobInfo, which must reach it before the first of them.
struct Pick {
  Job* job = nullptr;
  std::size_t count = 0;
  bool needs_info = false;
};

// Stateless today; owned by the interchange poll loop.
class Dispatcher final {
 public:
  // Fills `picks` (cleared first) with at most `room` tasks in all for `pool`: the oldest job
  // first, each job's queue in order, a job with nothing ready yielding to the next. Empty
  // `picks`: nothing is ready for anyone.
  void plan(JobLedger::Jobs& jobs, const Pool& pool, std::size_t room,
            std::vector<Pick>& picks) const;
};

}  // namespace fanout::ix
