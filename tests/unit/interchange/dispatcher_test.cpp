// The dispatch policy (interchange/dispatcher.hpp): a weighted fair share of what is in flight
// between the jobs with work, ties to the older job, each queue in order, at most the pool's
// room, JobInfo before a job's first task to a pool.
#include "interchange/dispatcher.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace fanout::ix;
using fanout::Clock;

namespace {

const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);

Job& job_with(JobLedger& l, std::uint64_t n, std::uint32_t priority = 1) {
  fanout::proto::JobSpec s;
  s.name = "j";
  s.priority = priority;
  Job& job = l.accept(s, t0, 0);
  std::vector<fanout::proto::MiniBatch> in, acc;
  for (std::uint64_t i = 0; i < n; ++i) in.push_back({i, {"f"}, ""});
  l.submit(job, in, acc);
  return job;
}

Pool& pool(PoolTable& t, std::uint32_t workers) {
  fanout::proto::Register r;
  r.workers = workers;
  return t.add("p", r, t0, 0);
}

}  // namespace

TEST_CASE("interchange.dispatcher.oldest_job_first_then_the_next") {
  JobLedger l(1, 1);
  PoolTable t;
  Pool& p = pool(t, 10);
  Job& a = job_with(l, 3);
  Job& b = job_with(l, 5);
  Dispatcher d;
  std::vector<Pick> picks;
  d.plan(l.jobs(), p, 6, picks);
  REQUIRE(picks.size() == 2);
  CHECK(picks[0].job == &a);
  CHECK(picks[0].count == 3);
  CHECK(picks[1].job == &b);
  CHECK(picks[1].count == 3);  // the room left
}

TEST_CASE("interchange.dispatcher.never_more_than_the_room") {
  JobLedger l(1, 1);
  PoolTable t;
  Pool& p = pool(t, 10);
  Job& a = job_with(l, 100);
  Dispatcher d;
  std::vector<Pick> picks;
  d.plan(l.jobs(), p, 4, picks);
  REQUIRE(picks.size() == 1);
  CHECK(picks[0].job == &a);
  CHECK(picks[0].count == 4);
  d.plan(l.jobs(), p, 0, picks);
  CHECK(picks.empty());
}

TEST_CASE("interchange.dispatcher.a_job_with_nothing_ready_yields") {
  JobLedger l(1, 1);
  PoolTable t;
  Pool& p = pool(t, 10);
  job_with(l, 0);
  Job& b = job_with(l, 2);
  Dispatcher d;
  std::vector<Pick> picks;
  d.plan(l.jobs(), p, 8, picks);
  REQUIRE(picks.size() == 1);
  CHECK(picks[0].job == &b);
  CHECK(picks[0].count == 2);
}

TEST_CASE("interchange.dispatcher.nothing_ready_plans_nothing") {
  JobLedger l(1, 1);
  PoolTable t;
  Pool& p = pool(t, 10);
  Dispatcher d;
  std::vector<Pick> picks{Pick{}};
  d.plan(l.jobs(), p, 8, picks);
  CHECK(picks.empty());
  job_with(l, 0);
  d.plan(l.jobs(), p, 8, picks);
  CHECK(picks.empty());
}

TEST_CASE("interchange.dispatcher.jobinfo_only_before_a_jobs_first_task_to_a_pool") {
  JobLedger l(1, 1);
  PoolTable t;
  Pool& p = pool(t, 10);
  Job& a = job_with(l, 2);
  Job& b = job_with(l, 2);
  p.jobs_known.insert(a.id);
  Dispatcher d;
  std::vector<Pick> picks;
  d.plan(l.jobs(), p, 4, picks);
  REQUIRE(picks.size() == 2);
  CHECK_FALSE(picks[0].needs_info);
  CHECK(picks[1].job == &b);
  CHECK(picks[1].needs_info);
}

// Several jobs share the pools. Before, the oldest job took every free worker.
TEST_CASE("interchange.dispatcher.a_small_job_behind_a_large_one_gets_its_share_at_once") {
  JobLedger l(1, 1);
  PoolTable t;
  Pool& p = pool(t, 10);
  Job& big = job_with(l, 100000);
  Job& small = job_with(l, 10);
  big.in_flight = 8;  // the large job already holds most of the workers
  Dispatcher d;
  std::vector<Pick> picks;
  d.plan(l.jobs(), p, 2, picks);
  REQUIRE(picks.size() == 1);
  CHECK(picks[0].job == &small);
  CHECK(picks[0].count == 2);
}

TEST_CASE("interchange.dispatcher.equal_jobs_split_the_room_evenly") {
  JobLedger l(1, 1);
  PoolTable t;
  Pool& p = pool(t, 12);
  Job& a = job_with(l, 100);
  Job& b = job_with(l, 100);
  Job& c = job_with(l, 100);
  Dispatcher d;
  std::vector<Pick> picks;
  d.plan(l.jobs(), p, 12, picks);
  REQUIRE(picks.size() == 3);
  CHECK(picks[0].job == &a);
  CHECK(picks[1].job == &b);
  CHECK(picks[2].job == &c);
  for (const Pick& k : picks) CHECK(k.count == 4);
}

TEST_CASE("interchange.dispatcher.priority_weights_the_share") {
  JobLedger l(1, 1);
  PoolTable t;
  Pool& p = pool(t, 8);
  Job& a = job_with(l, 100, 1);
  Job& b = job_with(l, 100, 3);
  Dispatcher d;
  std::vector<Pick> picks;
  d.plan(l.jobs(), p, 8, picks);
  REQUIRE(picks.size() == 2);
  CHECK(picks[0].job == &a);
  CHECK(picks[0].count == 2);
  CHECK(picks[1].job == &b);
  CHECK(picks[1].count == 6);
}

TEST_CASE("interchange.dispatcher.a_job_whose_tasks_are_all_running_keeps_its_share") {
  JobLedger l(1, 1);
  PoolTable t;
  Pool& p = pool(t, 8);
  Job& a = job_with(l, 0);
  a.in_flight = 4;  // nothing ready, half the workers
  Job& b = job_with(l, 100);
  Dispatcher d;
  std::vector<Pick> picks;
  // b may take the free room, but is not owed more than its half of 8 in flight.
  d.plan(l.jobs(), p, 4, picks);
  REQUIRE(picks.size() == 1);
  CHECK(picks[0].job == &b);
  CHECK(picks[0].count == 4);
}

TEST_CASE("interchange.dispatcher.room_a_starved_job_cannot_use_goes_to_the_others") {
  JobLedger l(1, 1);
  PoolTable t;
  Pool& p = pool(t, 10);
  Job& a = job_with(l, 1);
  Job& b = job_with(l, 100);
  Dispatcher d;
  std::vector<Pick> picks;
  d.plan(l.jobs(), p, 10, picks);
  REQUIRE(picks.size() == 2);
  CHECK(picks[0].job == &a);
  CHECK(picks[0].count == 1);
  CHECK(picks[1].job == &b);
  CHECK(picks[1].count == 9);
}
