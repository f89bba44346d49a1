// Elastic pool jobs (client/launch/elastic.hpp): the scaling decision, table-driven.
#include "client/launch/elastic.hpp"

#include <doctest/doctest.h>

#include <vector>

using namespace fanout::client::elastic;

namespace {

PoolJob busy(std::uint64_t id) { return PoolJob{.id = id}; }
PoolJob pending(std::uint64_t id) { return PoolJob{.id = id, .pending = true}; }
PoolJob idle(std::uint64_t id, double since) { return PoolJob{.id = id, .idle_since = since}; }

}  // namespace

TEST_CASE("client.elastic.decide") {
  // now 1000; min 1, max 4, parallelism 1, max_idletime 60, 2 slots per pool job.
  const Settings base{.min_nodes = 1,
                      .max_nodes = 4,
                      .parallelism = 1.0,
                      .max_idletime_s = 60,
                      .slots_per_node = 2};
  struct Row {
    const char* what;
    std::uint64_t backlog, running;
    std::vector<PoolJob> pools;
    Settings s;
    std::uint32_t submit;
    std::vector<std::uint64_t> release;
  };
  Settings none = base;
  none.parallelism = 0;
  Settings half = base;
  half.parallelism = 0.5;
  Settings min2 = base;
  min2.min_nodes = 2;
  const std::vector<Row> rows = {
      {"fits: nothing to do", 0, 2, {busy(1)}, base, 0, {}},
      {"backlog beyond the slots: one more per 2 slots", 3, 2, {busy(1)}, base, 2, {}},
      {"a large backlog: up to max_nodes", 100, 2, {busy(1)}, base, 3, {}},
      {"at max_nodes: none", 100, 8, {busy(1), busy(2), busy(3), busy(4)}, base, 0, {}},
      {"pending pool jobs count as capacity", 2, 2, {busy(1), pending(2)}, base, 0, {}},
      {"parallelism 0: never beyond what there is", 100, 2, {busy(1)}, none, 0, {}},
      {"parallelism 0.5: half a slot per mini-batch", 6, 2, {busy(1)}, half, 1, {}},
      {"below min_nodes: topped up", 0, 0, {}, base, 1, {}},
      {"below min_nodes, nothing waiting", 0, 0, {busy(1)}, min2, 1, {}},
      {"idle past max_idletime, nothing waiting: released",
       0,
       2,
       {busy(1), idle(2, 900)},
       base,
       0,
       {2}},
      {"idle, not long enough: kept", 0, 2, {busy(1), idle(2, 950)}, base, 0, {}},
      {"idle but a backlog waits: kept", 1, 2, {busy(1), idle(2, 900)}, base, 0, {}},
      {"all idle: down to min_nodes, oldest idle first",
       0,
       0,
       {idle(1, 930), idle(2, 900), idle(3, 920)},
       base,
       0,
       {2, 3}},
      {"all idle, min 2: one released",
       0,
       0,
       {idle(1, 930), idle(2, 900), idle(3, 920)},
       min2,
       0,
       {2}},
      {"a pending job is never released as idle", 0, 0, {busy(1), pending(2)}, base, 0, {}},
  };
  for (const auto& r : rows) {
    CAPTURE(r.what);
    const Decision d = decide(r.backlog, r.running, r.pools, 1000, r.s);
    CHECK(d.submit == r.submit);
    CHECK(d.release == r.release);
    CHECK(d.why.empty() == (r.submit == 0 && r.release.empty()));
  }
}
