// Which ready tasks go to a pool with room: the scheduling policy, apart from sending.
// See docs/architecture.md and docs/scaling.md (fair share).
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

// Fair share between jobs. Owned by the interchange poll loop; keeps only scratch space between
// calls.
class Dispatcher final {
 public:
  // Fills `picks` (cleared first, at most one per job, oldest job first) with at most `room`
  // tasks in all for `pool`, each job's queue in order. The room goes to the jobs that hold the
  // fewest tasks in flight for their weight (JobSpec::priority, at least 1): every job with
  // work ready gets its share of what is in flight at once, so a small job submitted behind a
  // large one starts on the next free worker; ties go to the older job. A job with nothing
  // ready yields to the others. One job alone gets min(room, ready). Empty `picks`: nothing is
  // ready for anyone.
  void plan(JobLedger::Jobs& jobs, const Pool& pool, std::size_t room, std::vector<Pick>& picks);

 private:
  struct Share {
    Job* job = nullptr;
    double weight = 1;
    std::size_t held = 0;   // in flight plus picked in this call
    std::size_t ready = 0;  // ready tasks not yet picked
    std::size_t picked = 0;
  };
  std::vector<Share> shares_;  // reused: no allocation per call once grown
};

}  // namespace fanout::ix
