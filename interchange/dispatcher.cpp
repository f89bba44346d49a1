// The dispatch policy: weighted fair share between jobs. See dispatcher.hpp.
#include "interchange/dispatcher.hpp"

#include <algorithm>
#include <cmath>

namespace fanout::ix {

void Dispatcher::plan(JobLedger::Jobs& jobs, const Pool& pool, std::size_t room,
                      std::vector<Pick>& picks) {
  picks.clear();
  if (room == 0) return;
  shares_.clear();
  double weights = 0;
  std::size_t in_flight = 0;
  for (auto& [id, job] : jobs) {
    if (job.state != proto::JobState::Running) continue;
    // A job counts towards the shares while it has work ready or running: one whose tasks are
    // all in flight still holds its share, so the others' targets do not grow past theirs.
    if (job.ready.empty() && job.in_flight == 0) continue;
    const double w = std::max<std::uint32_t>(1, job.spec.priority);
    weights += w;
    in_flight += job.in_flight;
    if (job.ready.empty()) continue;
    shares_.push_back(Share{&job, w, job.in_flight, job.ready.size(), 0});
  }
  if (shares_.empty()) return;
  // Each job's target is its weight's part of everything in flight once this room is filled.
  const double total = static_cast<double>(in_flight + room);
  while (room > 0) {
    Share* best = nullptr;
    for (Share& s : shares_) {
      if (s.ready == 0) continue;
      // Lowest load per weight first; shares_ is in job order, so ties go to the older job.
      if (best == nullptr ||
          static_cast<double>(s.held) * best->weight < static_cast<double>(best->held) * s.weight) {
        best = &s;
      }
    }
    if (best == nullptr) break;
    const double target = total * best->weight / weights;
    const double gap = std::ceil(target - static_cast<double>(best->held));
    const std::size_t n =
        std::min({room, best->ready, gap >= 1 ? static_cast<std::size_t>(gap) : std::size_t{1}});
    best->held += n;
    best->ready -= n;
    best->picked += n;
    room -= n;
  }
  for (const Share& s : shares_) {
    if (s.picked == 0) continue;
    picks.push_back(Pick{s.job, s.picked, pool.jobs_known.count(s.job->id) == 0});
  }
}

}  // namespace fanout::ix
