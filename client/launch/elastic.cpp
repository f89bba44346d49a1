// Elastic pool jobs. See elastic.hpp.
#include "client/launch/elastic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace fanout::client::elastic {

Decision decide(std::uint64_t backlog, std::uint64_t running, const std::vector<PoolJob>& pools,
                double now, const Settings& s) {
  Decision d;
  const auto have = static_cast<std::uint32_t>(pools.size());
  const std::uint32_t room = s.max_nodes > have ? s.max_nodes - have : 0;
  const std::uint32_t per = std::max(1u, s.slots_per_node);
  // Scale out: the slots wanted for what is outstanding, beyond the slots there are.
  const double wanted = std::ceil(s.parallelism * static_cast<double>(backlog + running));
  const double slots = static_cast<double>(have) * per;
  std::uint32_t more = 0;
  if (backlog > 0 && wanted > slots) {
    more = static_cast<std::uint32_t>(std::ceil((wanted - slots) / per));
  }
  if (have < s.min_nodes) more = std::max(more, s.min_nodes - have);
  more = std::min(more, room);
  if (more > 0) {
    d.submit = more;
    d.why = fmt::format("{} mini-batches waiting, {} running on {} pool jobs of {} slots: {} more",
                        backlog, running, have, per, more);
    return d;
  }
  if (backlog > 0) return d;  // every pool may be needed soon
  // Scale in: pools idle past max_idletime, oldest idle first, keeping min_nodes.
  std::vector<const PoolJob*> idle;
  for (const auto& p : pools) {
    if (!p.pending && p.idle_since > 0 && now - p.idle_since >= s.max_idletime_s) {
      idle.push_back(&p);
    }
  }
  std::stable_sort(idle.begin(), idle.end(), [](const PoolJob* a, const PoolJob* b) {
    return a->idle_since < b->idle_since;
  });
  const std::uint32_t spare = have > s.min_nodes ? have - s.min_nodes : 0;
  for (std::size_t i = 0; i < idle.size() && i < spare; ++i) d.release.push_back(idle[i]->id);
  if (!d.release.empty()) {
    d.why = fmt::format("nothing waiting, {} pool job(s) idle for {:.0f} s or more: releasing {}",
                        idle.size(), s.max_idletime_s, d.release.size());
  }
  return d;
}

}  // namespace fanout::client::elastic
