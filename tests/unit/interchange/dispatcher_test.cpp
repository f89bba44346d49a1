// The dispatch policy (interchange/dispatcher.hpp): oldest job first, each queue in order, at
// most the pool's room, JobInfo before a job's first task to a pool.
#include "interchange/dispatcher.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace fanout::ix;
using fanout::Clock;

namespace {

const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);

Job& job_with(JobLedger& l, std::uint64_t n) {
  fanout::proto::JobSpec s;
  s.name = "j";
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
