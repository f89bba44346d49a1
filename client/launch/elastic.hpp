// Elastic pool jobs: how many pool jobs (blocks) to submit and which idle ones to release, as
// Parsl's block scaling does (init_blocks, min_blocks, max_blocks, parallelism, max_idletime).
// Pure: the backlog, the pools and the time are passed in, the launcher carries the decision
// out. Unit-tested in tests/unit/client/elastic_test.cpp. See docs/cluster.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fanout::client::elastic {

struct Settings {
  std::uint32_t min_nodes = 0;  // never fewer pool jobs pending or running
  std::uint32_t max_nodes = 1;  // never more pool jobs pending or running
  // Slots wanted per outstanding mini-batch: 1.0 one slot for each (up to max_nodes), 0 never
  // more pool jobs than there are (Parsl's parallelism).
  double parallelism = 1.0;
  double max_idletime_s = 120;       // a pool idle this long with no backlog is released
  std::uint32_t slots_per_node = 1;  // workers of one pool job
};

// One pool job as the launcher and the interchange see it.
struct PoolJob {
  std::uint64_t id = 0;   // the scheduler's job id
  bool pending = false;   // submitted, its pool not registered yet
  double idle_since = 0;  // Unix seconds its pool last ran nothing; 0: busy (or pending)
};

struct Decision {
  std::uint32_t submit = 0;              // pool jobs to submit now
  std::vector<std::uint64_t> release{};  // pool jobs to drain and end now
  std::string why{};                     // one line for the log; "" when nothing changes
  bool operator==(const Decision&) const = default;
};

// What to do at `now` (Unix seconds) with `backlog` mini-batches waiting for a slot, `running`
// mini-batches running and `pools` pending or running. Adds pool jobs while
// parallelism x (backlog + running) exceeds the slots of the pools there are, up to max_nodes,
// and tops up to min_nodes; releases, oldest idle first, pools idle for max_idletime_s while
// nothing waits, down to min_nodes. Never both at once.
[[nodiscard]] Decision decide(std::uint64_t backlog, std::uint64_t running,
                              const std::vector<PoolJob>& pools, double now, const Settings& s);

}  // namespace fanout::client::elastic
