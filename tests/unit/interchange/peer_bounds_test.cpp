// What a peer may make the interchange hold (interchange/peer_bounds.hpp): a client's
// mini-batches beyond its window are refused; a task a heartbeating pool does not list is
// requeued once its lease expires, and one it lists never is.
#include "interchange/peer_bounds.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <vector>

using namespace fanout::ix;
using fanout::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

std::vector<fanout::proto::MiniBatch> batches(std::uint64_t from, std::uint64_t to) {
  std::vector<fanout::proto::MiniBatch> out;
  for (auto i = from; i < to; ++i) out.push_back(fanout::proto::MiniBatch{i, {"f"}, ""});
  return out;
}

const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);
const Clock::duration grace = seconds(10);

}  // namespace

TEST_CASE("interchange.peer_bounds.window_refuses_what_lies_beyond_twice_the_window") {
  const std::uint64_t k = kWindowSlack;
  SUBCASE("an honest client is never refused") {
    auto b = batches(0, 100);
    CHECK(refuse_beyond_window(b, 0, 100) == 0);
    CHECK(b.size() == 100);
    // fanout perf: a frame of kWindowSlack once half the window is free.
    auto p = batches(5050, 5050 + k);
    CHECK(refuse_beyond_window(p, 5000, 100) == 0);
  }
  SUBCASE("a client ignoring its window: what lies beyond finished + 2 x window is refused") {
    auto b = batches(0, 5000);
    CHECK(refuse_beyond_window(b, 5, 10) == 5000 - 25 - k);
    REQUIRE(b.size() == 25 + k);
    CHECK(b.back().index == 24 + k);
  }
  SUBCASE("finished mini-batches make room") {
    auto b = batches(200 + k, 260 + k);
    CHECK(refuse_beyond_window(b, 190, 20) == 30);
    CHECK(b.size() == 30);
  }
  SUBCASE("a window of 0 counts as 1") {
    auto b = batches(0, 5 + k);
    CHECK(refuse_beyond_window(b, 0, 0) == 3);
  }
}

TEST_CASE("interchange.peer_bounds.lease_expires_for_tasks_never_listed") {
  TaskLeases leases;
  std::unordered_set<std::uint64_t> charged;
  for (std::uint64_t id : {1, 2, 3}) {
    charged.insert(id);
    leases.sent(7, id, t0, charged);
  }
  // Within the grace nothing expires, listed or not (the pool may not have them yet).
  CHECK(leases.heartbeat(7, charged, {1}, t0 + seconds(2), grace).empty());
  CHECK(leases.heartbeat(7, charged, {1}, t0 + seconds(9), grace).empty());
  // Past it: 2 and 3 were never listed; 1 is listed and renewed each time.
  CHECK(leases.heartbeat(7, charged, {1}, t0 + seconds(11), grace) ==
        std::vector<std::uint64_t>{2, 3});
  charged = {1};
  CHECK(leases.heartbeat(7, charged, {1}, t0 + seconds(100), grace).empty());
}

TEST_CASE("interchange.peer_bounds.lease_runs_from_the_last_listing") {
  TaskLeases leases;
  std::unordered_set<std::uint64_t> charged{5};
  leases.sent(1, 5, t0, charged);
  CHECK(leases.heartbeat(1, charged, {5}, t0 + seconds(30), grace).empty());  // listed: renewed
  // No longer listed (the pool dropped it): expires grace after the last listing.
  CHECK(leases.heartbeat(1, charged, {}, t0 + seconds(39), grace).empty());
  CHECK(leases.heartbeat(1, charged, {}, t0 + seconds(41), grace) == std::vector<std::uint64_t>{5});
}

TEST_CASE("interchange.peer_bounds.lease_ignores_other_pools_and_ended_tasks") {
  TaskLeases leases;
  std::unordered_set<std::uint64_t> a{1}, b{2};
  leases.sent(1, 1, t0, a);
  leases.sent(2, 2, t0, b);
  // Pool 1's heartbeat judges only pool 1's tasks.
  CHECK(leases.heartbeat(1, a, {}, t0 + seconds(11), grace) == std::vector<std::uint64_t>{1});
  // A task that ended (no longer charged) is not judged even if never listed.
  b.clear();
  CHECK(leases.heartbeat(2, b, {}, t0 + seconds(11), grace).empty());
  leases.forget_pool(1);
  CHECK(leases.entries() == 0);
}

TEST_CASE("interchange.peer_bounds.a_busy_pool_that_never_heartbeats_keeps_few_entries") {
  TaskLeases leases;
  std::unordered_set<std::uint64_t> charged;
  for (std::uint64_t id = 1; id <= 100000; ++id) {
    charged.insert(id);
    leases.sent(3, id, t0, charged);
    if (id > 8) charged.erase(id - 8);  // its results come back: it holds 8 at a time
  }
  CHECK(leases.entries() <= 2 * charged.size() + 64 + 1);
}
