// The dispatch policy. See dispatcher.hpp.
#include "interchange/dispatcher.hpp"

#include <algorithm>

namespace fanout::ix {

void Dispatcher::plan(JobLedger::Jobs& jobs, const Pool& pool, std::size_t room,
                      std::vector<Pick>& picks) const {
  picks.clear();
  for (auto& [id, job] : jobs) {
    if (room == 0) break;
    if (job.ready.empty()) continue;
    const std::size_t n = std::min(room, job.ready.size());
    picks.push_back(Pick{&job, n, pool.jobs_known.count(id) == 0});
    room -= n;
  }
}

}  // namespace fanout::ix
