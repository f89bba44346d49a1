// The pool table's policy (interchange/pool_table.hpp): registration and re-registration,
// capacity and the pools with room, liveness in last-seen order, what a lost pool held, and the
// key each routing id is bound to (docs/security.md).
#include "interchange/pool_table.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <vector>

using namespace fanout::ix;
using fanout::Clock;
using fanout::proto::Register;
using std::chrono::milliseconds;

namespace {

Register reg(std::uint32_t workers, std::uint32_t prefetch = 0, std::int64_t pid = 100,
             const std::string& name = "pool-a") {
  Register r;
  r.pool_name = name;
  r.node = "node1";
  r.workers = workers;
  r.prefetch = prefetch;
  r.pid = pid;
  return r;
}

std::set<std::string> free_peers(PoolTable& t) {
  std::set<std::string> out;
  for (std::size_t i = 0; i < t.free_count(); ++i) out.insert(t.free_at(i).peer);
  return out;
}

const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);

}  // namespace

TEST_CASE("interchange.pool_table.new_peer_is_added_with_workers_plus_prefetch") {
  PoolTable t(7);
  auto d = t.on_register("p1", reg(2, 3));
  CHECK(d.outcome == RegisterDecision::Outcome::Add);
  CHECK_FALSE(d.lose_previous);
  Pool& p = t.add("p1", reg(2, 3), t0, 1000.0);
  CHECK(p.id == 7);  // ids continue from the store's
  CHECK(p.capacity == 5);
  CHECK(t.workers() == 2);
  CHECK(t.add("p2", reg(4), t0, 1000.0).id == 8);
  CHECK(t.workers() == 6);
  CHECK(t.find("p1") == &p);
  CHECK(t.find_id(7) == &p);
  CHECK(t.find("nobody") == nullptr);
}

TEST_CASE("interchange.pool_table.register_without_workers_is_rejected") {
  PoolTable t;
  auto d = t.on_register("p1", reg(0));
  CHECK(d.outcome == RegisterDecision::Outcome::Reject);
  CHECK(std::string(d.reason).find("workers") != std::string::npos);
}

TEST_CASE("interchange.pool_table.same_process_registering_again_idle_is_a_repeat") {
  PoolTable t;
  t.add("p1", reg(2), t0, 0);
  auto d = t.on_register("p1", reg(2));
  CHECK(d.outcome == RegisterDecision::Outcome::Repeat);
  CHECK_FALSE(d.lose_previous);
}

TEST_CASE("interchange.pool_table.registering_again_otherwise_loses_the_previous_one") {
  PoolTable t;
  Pool& p = t.add("p1", reg(2), t0, 0);
  SUBCASE("another process") {
    auto d = t.on_register("p1", reg(2, 0, 101));
    CHECK(d.lose_previous);
    CHECK(d.outcome == RegisterDecision::Outcome::Add);
  }
  SUBCASE("other workers") { CHECK(t.on_register("p1", reg(3)).lose_previous); }
  SUBCASE("other prefetch") { CHECK(t.on_register("p1", reg(2, 1)).lose_previous); }
  SUBCASE("other name") { CHECK(t.on_register("p1", reg(2, 0, 100, "pool-b")).lose_previous); }
  SUBCASE("the same process while holding tasks (it restarted its state)") {
    t.assign(p, 11);
    CHECK(t.on_register("p1", reg(2)).lose_previous);
  }
  SUBCASE("with no workers: lost, then rejected") {
    auto d = t.on_register("p1", reg(0));
    CHECK(d.lose_previous);
    CHECK(d.outcome == RegisterDecision::Outcome::Reject);
  }
}

TEST_CASE("interchange.pool_table.pools_with_room_are_the_free_set") {
  PoolTable t;
  Pool& a = t.add("a", reg(2), t0, 0);
  Pool& b = t.add("b", reg(1), t0, 0);
  CHECK(free_peers(t) == std::set<std::string>{"a", "b"});
  t.assign(b, 1);  // b is full
  CHECK(free_peers(t) == std::set<std::string>{"a"});
  CHECK(a.room() == 2);
  t.assign(a, 2);
  CHECK(a.room() == 1);
  t.assign(a, 3);
  CHECK(t.free_count() == 0);
  t.release(b, 1);
  CHECK(free_peers(t) == std::set<std::string>{"b"});
  // The capacity a pool reports moves it in or out too.
  t.set_capacity(b, 0);
  CHECK(t.free_count() == 0);
  t.set_capacity(a, 5);
  CHECK(free_peers(t) == std::set<std::string>{"a"});
  CHECK(a.room() == 3);
  t.remove("a");
  CHECK(t.free_count() == 0);
}

TEST_CASE("interchange.pool_table.free_set_stays_exact_over_many_pools") {
  PoolTable t;
  std::vector<Pool*> pools;
  for (int i = 0; i < 200; ++i) pools.push_back(&t.add("p" + std::to_string(i), reg(1), t0, 0));
  // Fill every third, remove every seventh: the free set is exactly the others.
  std::set<std::string> expect;
  for (int i = 0; i < 200; ++i) {
    const std::string peer = "p" + std::to_string(i);
    if (i % 7 == 0) {
      t.remove(peer);
    } else if (i % 3 == 0) {
      t.assign(*pools[i], static_cast<std::uint64_t>(i));
    } else {
      expect.insert(peer);
    }
  }
  CHECK(free_peers(t) == expect);
  CHECK(t.free_count() == expect.size());
}

TEST_CASE("interchange.pool_table.silent_pools_are_found_in_last_seen_order") {
  PoolTable t;
  Pool& a = t.add("a", reg(1), t0, 0);
  t.add("b", reg(1), t0 + milliseconds(10), 0);
  Pool& c = t.add("c", reg(1), t0 + milliseconds(20), 0);
  const auto threshold = milliseconds(100);
  CHECK(t.silent(t0 + milliseconds(100), threshold).empty());
  CHECK(t.silent(t0 + milliseconds(115), threshold) == std::vector<std::string>{"a", "b"});
  // Any frame moves a pool to the back: a is live again, c is now the oldest-but-one.
  t.seen(a, t0 + milliseconds(110));
  CHECK(t.silent(t0 + milliseconds(115), threshold) == std::vector<std::string>{"b"});
  t.seen(c, t0 + milliseconds(112));
  CHECK(t.silent(t0 + milliseconds(211), threshold) == std::vector<std::string>{"b", "a"});
  t.remove("b");
  CHECK(t.silent(t0 + milliseconds(211), threshold) == std::vector<std::string>{"a"});
}

TEST_CASE("interchange.pool_table.removing_a_pool_returns_the_tasks_it_held") {
  PoolTable t;
  Pool& a = t.add("a", reg(4), t0, 0);
  for (std::uint64_t id : {9, 3, 5}) t.assign(a, id);
  t.release(a, 5);
  auto removed = t.remove("a");
  REQUIRE(removed.has_value());
  CHECK(removed->pool.reg.pool_name == "pool-a");
  CHECK(removed->tasks == std::vector<std::uint64_t>{3, 9});  // ascending
  CHECK(t.find("a") == nullptr);
  CHECK(t.find_id(removed->pool.id) == nullptr);
  CHECK(t.workers() == 0);
  CHECK(t.empty());
  CHECK_FALSE(t.remove("a").has_value());
}

TEST_CASE("interchange.pool_table.forgetting_a_job_names_the_pools_that_knew_it") {
  PoolTable t;
  Pool& a = t.add("a", reg(1), t0, 0);
  Pool& b = t.add("b", reg(1), t0, 0);
  t.add("c", reg(1), t0, 0);
  a.jobs_known.insert(4);
  b.jobs_known.insert(4);
  b.jobs_known.insert(5);
  auto peers = t.forget_job(4);
  std::sort(peers.begin(), peers.end());
  CHECK(peers == std::vector<std::string>{"a", "b"});
  CHECK(t.forget_job(4).empty());
  CHECK(b.jobs_known.count(5) == 1);
}

TEST_CASE("interchange.pool_table.a_routing_id_stays_with_the_key_that_first_registered_it") {
  PoolTable t;
  // Unbound: any key may register; the first one binds the routing id.
  CHECK(t.bound_key("p1") == nullptr);
  CHECK(t.key_holds("p1", "key-a"));
  t.bind_key("p1", "key-a");
  REQUIRE(t.bound_key("p1") != nullptr);
  CHECK(*t.bound_key("p1") == "key-a");
  Pool& p = t.add("p1", reg(2), t0, 1000.0, "key-a");
  CHECK(p.key == "key-a");
  CHECK(t.key_holds("p1", "key-a"));
  // Another authorised key can neither use the registered id nor rebind it.
  CHECK_FALSE(t.key_holds("p1", "key-b"));
  t.bind_key("p1", "key-b");
  CHECK(*t.bound_key("p1") == "key-a");
  // The binding outlives the pool: the name cannot be registered anew by another key either.
  REQUIRE(t.remove("p1").has_value());
  CHECK_FALSE(t.key_holds("p1", "key-b"));
  CHECK(t.key_holds("p1", "key-a"));
  // Other routing ids are not affected.
  CHECK(t.key_holds("p2", "key-b"));
}

TEST_CASE("interchange.pool_table.a_pool_name_stays_with_the_key_that_first_registered_it") {
  PoolTable t;
  CHECK(t.name_key("good") == nullptr);
  CHECK(t.name_holds("good", "key-a"));
  t.bind_name("good", "key-a");
  REQUIRE(t.name_key("good") != nullptr);
  CHECK(*t.name_key("good") == "key-a");
  // Another key cannot use the name (from any routing id) nor rebind it; the binding outlives
  // the pool.
  CHECK_FALSE(t.name_holds("good", "key-b"));
  t.bind_name("good", "key-b");
  CHECK(*t.name_key("good") == "key-a");
  t.add("p1", reg(1), t0, 1000.0, "key-a");
  REQUIRE(t.remove("p1").has_value());
  CHECK_FALSE(t.name_holds("good", "key-b"));
  CHECK(t.name_holds("good", "key-a"));
  CHECK(t.name_holds("other", "key-b"));
}

TEST_CASE("interchange.pool_table.plaintext_peers_carry_no_key_and_always_hold") {
  PoolTable t;
  t.bind_key("p1", "");
  t.add("p1", reg(1), t0, 1000.0);
  CHECK(t.find("p1")->key.empty());
  CHECK(t.key_holds("p1", ""));
}
