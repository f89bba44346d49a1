// The job ledger's policy (interchange/job_ledger.hpp): input order, retries, the three
// thresholds, ParallelRunStep's job-level timeouts, pool loss and a job's end.
#include "interchange/job_ledger.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

using namespace fanout::ix;
using fanout::Clock;
using fanout::proto::AttemptStatus;
using fanout::proto::JobSpec;
using fanout::proto::JobState;
using fanout::proto::MiniBatch;
using fanout::proto::Task;
using fanout::proto::TaskResult;

namespace {

const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);

JobSpec spec(std::uint32_t max_tries = 3) {
  JobSpec s;
  s.name = std::string("ledger-test");
  s.max_tries = max_tries;
  return s;
}

std::vector<MiniBatch> batches(std::uint64_t from, std::uint64_t n, std::size_t items = 2) {
  std::vector<MiniBatch> out;
  for (std::uint64_t i = from; i < from + n; ++i) {
    out.push_back(MiniBatch{i, std::vector<std::string>(items, "f"), ""});
  }
  return out;
}

// A job with `n` mini-batches submitted and, when `complete`, its SubmitEnd taken.
Job& job_with(JobLedger& l, std::uint64_t n, bool complete = true, JobSpec s = spec()) {
  Job& job = l.accept(std::move(s), t0, 1000.0);
  std::vector<MiniBatch> accepted;
  auto in = batches(0, n);
  l.submit(job, in, accepted);
  if (complete) REQUIRE(l.submit_end(job, n) == JobLedger::InputEnd::Complete);
  return job;
}

std::vector<Task> take(JobLedger& l, Job& job, std::size_t n, std::uint64_t pool = 1) {
  std::vector<Task> out;
  l.take(job, n, pool, out);
  JobLedger::sent(job, out.size());
  return out;
}

TaskResult result_of(const Task& t, AttemptStatus status) {
  TaskResult r;
  r.task_id = t.task_id;
  r.job_id = t.job_id;
  r.index = t.index;
  r.status = static_cast<std::uint8_t>(status);
  if (status == AttemptStatus::RunDone) r.succeeded = t.items.size();
  return r;
}

Completion finish(JobLedger& l, const Task& t, AttemptStatus status, std::uint64_t pool = 1) {
  auto r = result_of(t, status);
  return l.complete(pool, r, t0);
}

}  // namespace

TEST_CASE("interchange.job_ledger.jobs_and_tasks_get_ids_after_the_stores") {
  JobLedger l(10, 500);
  Job& a = l.accept(spec(), t0, 1.0);
  Job& b = l.accept(spec(), t0, 1.0);
  CHECK(a.id == 10);
  CHECK(b.id == 11);
  CHECK(a.state == JobState::Running);
  std::vector<MiniBatch> acc;
  auto in = batches(0, 2);
  l.submit(a, in, acc);
  auto tasks = take(l, a, 2);
  REQUIRE(tasks.size() == 2);
  CHECK(tasks[0].task_id == 500);
  CHECK(tasks[1].task_id == 501);
}

TEST_CASE("interchange.job_ledger.minibatches_are_accepted_in_input_order_only") {
  JobLedger l(1, 1);
  Job& job = l.accept(spec(), t0, 0);
  std::vector<MiniBatch> acc;
  auto first = batches(0, 3);
  CHECK(l.submit(job, first, acc) == 0);
  CHECK(acc.size() == 3);
  // A resumed client resends 1..4: the duplicates 1 and 2 are dropped, 3 and 4 taken.
  auto again = batches(1, 4);
  CHECK(l.submit(job, again, acc) == 2);
  CHECK(acc.size() == 2);
  CHECK(acc[0].index == 3);
  // A gap: 6 before 5 is dropped.
  auto gap = batches(6, 1);
  CHECK(l.submit(job, gap, acc) == 1);
  CHECK(acc.empty());
  CHECK(job.total == 5);
  CHECK(job.ready.size() == 5);
}

TEST_CASE("interchange.job_ledger.submit_end_must_match_the_count_known") {
  JobLedger l(1, 1);
  Job& job = job_with(l, 3, false);
  CHECK(l.submit_end(job, 4) == JobLedger::InputEnd::Missing);
  CHECK_FALSE(job.submit_done);
  CHECK(l.submit_end(job, 3) == JobLedger::InputEnd::Complete);
  CHECK(job.submit_done);
  CHECK(l.submit_end(job, 3) == JobLedger::InputEnd::Repeated);
}

TEST_CASE("interchange.job_ledger.a_task_carries_its_try_number") {
  JobLedger l(1, 1);
  Job& job = job_with(l, 1);
  auto t = take(l, job, 1);
  REQUIRE(t.size() == 1);
  CHECK(t[0].attempt == 1);
  CHECK(t[0].items.size() == 2);
  CHECK(job.in_flight == 1);
  CHECK(job.dispatched);
}

TEST_CASE("interchange.job_ledger.failed_try_is_retried_first_until_max_tries") {
  JobLedger l(1, 1);
  Job& job = job_with(l, 2, true, spec(3));
  for (std::uint32_t attempt = 1; attempt <= 3; ++attempt) {
    auto t = take(l, job, 1);  // the retry is at the front, before mini-batch 1
    REQUIRE(t.size() == 1);
    CHECK(t[0].index == 0);
    CHECK(t[0].attempt == attempt);
    auto c = finish(l, t[0], AttemptStatus::WorkerLost);
    CHECK(c.ours);
    CHECK(c.job == &job);
    CHECK(c.gave_up == (attempt == 3));
    CHECK(c.batch == (attempt == 3 ? BatchState::Failed : BatchState::Pending));
  }
  CHECK(job.attempts_failed == 3);
  CHECK(job.failed == 1);
  CHECK(job.items_failed == 2);
  CHECK(job.ready.size() == 1);
  CHECK(job.ready.front().mb.index == 1);
}

TEST_CASE("interchange.job_ledger.success_counts_items_and_sets_the_attempt") {
  JobLedger l(1, 1);
  Job& job = job_with(l, 1);
  auto t = take(l, job, 1);
  auto r = result_of(t[0], AttemptStatus::RunDone);
  r.succeeded = 1;
  r.failed = 1;
  r.attempt = 99;  // what the pool says is not trusted
  auto c = l.complete(1, r, t0 + std::chrono::seconds(5));
  CHECK(c.batch == BatchState::Succeeded);
  CHECK(r.attempt == 1);
  CHECK(r.items == 2);
  CHECK(job.succeeded == 1);
  CHECK(job.items_succeeded == 1);
  CHECK(job.items_failed == 1);
  CHECK(job.in_flight == 0);
  CHECK(job.last_finished_at == t0 + std::chrono::seconds(5));
}

TEST_CASE("interchange.job_ledger.results_not_in_flight_are_late") {
  JobLedger l(1, 1);
  Job& job = job_with(l, 1);
  auto t = take(l, job, 1, 7);
  SUBCASE("from another pool") { CHECK_FALSE(finish(l, t[0], AttemptStatus::RunDone, 8).ours); }
  SUBCASE("for another mini-batch") {
    auto r = result_of(t[0], AttemptStatus::RunDone);
    r.index = 5;
    CHECK_FALSE(l.complete(7, r, t0).ours);
  }
  SUBCASE("twice") {
    CHECK(finish(l, t[0], AttemptStatus::RunDone, 7).ours);
    CHECK_FALSE(finish(l, t[0], AttemptStatus::RunDone, 7).ours);
    CHECK(job.succeeded == 1);
  }
}

TEST_CASE("interchange.job_ledger.untaken_tasks_return_in_order_with_no_try_used") {
  JobLedger l(1, 1);
  Job& job = job_with(l, 3);
  std::vector<Task> out;
  l.take(job, 2, 1, out);
  l.untake(out);
  REQUIRE(job.ready.size() == 3);
  CHECK(job.ready[0].mb.index == 0);
  CHECK(job.ready[1].mb.index == 1);
  CHECK(job.ready[0].attempt == 1);
  CHECK(job.ready[0].mb.items.size() == 2);
  CHECK(job.in_flight == 0);
  CHECK_FALSE(job.dispatched);
  CHECK_FALSE(finish(l, out[0], AttemptStatus::RunDone).ours);
}

TEST_CASE("interchange.job_ledger.resumed_job_continues_from_the_tries_used") {
  JobLedger l(1, 1);
  fanout::store::UnfinishedJob u;
  u.job_id = 42;
  u.spec = spec(4);
  u.submit_done = false;
  u.succeeded = 3;
  u.remaining = batches(3, 2);
  u.remaining_tries = {2, 0};
  Job& job = l.resume(std::move(u), t0);
  CHECK(job.total == 5);  // before SubmitEnd: the recorded prefix
  auto t = take(l, job, 2);
  CHECK(t[0].attempt == 3);
  CHECK(t[1].attempt == 1);
  CHECK(l.accept(spec(), t0, 0).id == 43);
}

TEST_CASE("interchange.job_ledger.thresholds") {
  JobLedger l(1, 1);
  JobSpec s = spec(1);
  SUBCASE("error_threshold: more failed items than allowed") {
    s.error_threshold = 3;
    Job& job = job_with(l, 10, false, s);
    finish(l, take(l, job, 1)[0], AttemptStatus::RunException);  // 2 items
    CHECK_FALSE(JobLedger::verdict(job).has_value());
    finish(l, take(l, job, 1)[0], AttemptStatus::RunException);  // 4 items > 3
    auto v = JobLedger::verdict(job);
    REQUIRE(v.has_value());
    CHECK(v->state == JobState::Failed);
    CHECK(v->reason.find("error_threshold") == 0);
  }
  SUBCASE("mini_batch_error_threshold: more failed mini-batches than allowed") {
    s.mini_batch_error_threshold = 1;
    Job& job = job_with(l, 10, false, s);
    finish(l, take(l, job, 1)[0], AttemptStatus::RunException);
    CHECK_FALSE(JobLedger::verdict(job).has_value());
    finish(l, take(l, job, 1)[0], AttemptStatus::RunException);
    auto v = JobLedger::verdict(job);
    REQUIRE(v.has_value());
    CHECK(v->reason.find("mini_batch_error_threshold") == 0);
  }
  SUBCASE("allowed_failed_percent: only once the whole input is submitted") {
    s.allowed_failed_percent = 10;
    Job& job = job_with(l, 4, false, s);
    finish(l, take(l, job, 1)[0], AttemptStatus::RunException);
    CHECK_FALSE(JobLedger::verdict(job).has_value());  // the share is not known yet
    REQUIRE(l.submit_end(job, 4) == JobLedger::InputEnd::Complete);
    auto v = JobLedger::verdict(job);  // 25% > 10%
    REQUIRE(v.has_value());
    CHECK(v->reason.find("allowed_failed_percent") == 0);
  }
  SUBCASE("-1 ignores each, and 100% allows every failure") {
    for (double pct : {-1.0, 100.0}) {
      CAPTURE(pct);
      JobLedger fresh(1, 1);
      s.error_threshold = -1;
      s.mini_batch_error_threshold = -1;
      s.allowed_failed_percent = pct;
      Job& job = job_with(fresh, 2, true, s);
      finish(fresh, take(fresh, job, 1)[0], AttemptStatus::RunException);
      CHECK_FALSE(JobLedger::verdict(job).has_value());
      finish(fresh, take(fresh, job, 1)[0], AttemptStatus::RunException);
      auto v = JobLedger::verdict(job);
      REQUIRE(v.has_value());
      CHECK(v->state == JobState::Partial);  // not plainly "succeeded"
      CHECK(v->reason == "2 of 2 mini-batches failed, within the thresholds");
    }
  }
}

TEST_CASE("interchange.job_ledger.job_succeeds_once_input_complete_and_all_finished") {
  JobLedger l(1, 1);
  Job& job = job_with(l, 2, false);
  for (auto& t : take(l, job, 2)) finish(l, t, AttemptStatus::RunDone);
  CHECK_FALSE(JobLedger::verdict(job).has_value());  // more input may come
  REQUIRE(l.submit_end(job, 2) == JobLedger::InputEnd::Complete);
  auto v = JobLedger::verdict(job);
  REQUIRE(v.has_value());
  CHECK(v->state == JobState::Succeeded);
  CHECK(v->reason == "all mini-batches succeeded");
}

TEST_CASE("interchange.job_ledger.job_level_timeouts") {
  using std::chrono::seconds;
  JobLedger l(1, 1);
  JobSpec s = spec();
  SUBCASE("first_task_creation_timeout: no task sent since accepted") {
    s.first_task_creation_timeout_s = 10;
    Job& job = job_with(l, 1, true, s);
    CHECK(l.timed_out(t0 + seconds(10)).empty());
    auto out = l.timed_out(t0 + seconds(11));
    REQUIRE(out.size() == 1);
    CHECK(out[0].first == job.id);
    CHECK(out[0].second.reason.find("first_task_creation_timeout") == 0);
    take(l, job, 1);
    CHECK(l.timed_out(t0 + seconds(11)).empty());
  }
  SUBCASE("progress_update_timeout: no attempt finished for that long") {
    s.progress_update_timeout_s = 10;
    Job& job = job_with(l, 2, true, s);
    auto t = take(l, job, 2);
    auto r = result_of(t[0], AttemptStatus::RunDone);
    l.complete(1, r, t0 + seconds(8));
    CHECK(l.timed_out(t0 + seconds(18)).empty());
    auto out = l.timed_out(t0 + seconds(19));
    REQUIRE(out.size() == 1);
    CHECK(out[0].second.reason.find("progress_update_timeout") == 0);
  }
  SUBCASE("0 means none") {
    job_with(l, 1, true, s);
    CHECK(l.timed_out(t0 + std::chrono::hours(100)).empty());
  }
}

TEST_CASE("interchange.job_ledger.lost_attempts_are_retried_and_counted_failed_tries") {
  JobLedger l(1, 1);
  Job& job = job_with(l, 3, true, spec(2));
  auto t = take(l, job, 3);
  std::vector<std::uint64_t> touched;
  auto lost =
      l.lose({t[0].task_id, t[1].task_id}, AttemptStatus::PoolLost, "pool gone", 5.0, touched);
  REQUIRE(lost.size() == 2);
  CHECK(touched == std::vector<std::uint64_t>{job.id});
  CHECK(job.attempts_failed == 2);
  CHECK(job.in_flight == 1);
  // Requeued in their order, at the front, as their second try.
  REQUIRE(job.ready.size() == 2);
  CHECK(job.ready[0].mb.index == 0);
  CHECK(job.ready[1].mb.index == 1);
  CHECK(job.ready[0].attempt == 2);
  for (const auto& a : lost) {
    CHECK(a.batch == BatchState::Pending);
    CHECK(a.result.error_category == "POOL_LOST");
    CHECK(a.result.error_message == "pool gone");
    CHECK(a.result.failed == 2);
    CHECK(a.result.start == 5.0);
  }
  // A late result from the lost pool is not counted.
  CHECK_FALSE(finish(l, t[0], AttemptStatus::RunDone).ours);
}

// A pool that leaves on its own hands back what it did not finish: requeued in order
// at the front as the same try, nothing counted failed, even on the last try.
TEST_CASE("interchange.job_ledger.handed_back_tasks_are_requeued_with_no_try_used") {
  JobLedger l(1, 1);
  Job& job = job_with(l, 3, true, spec(1));
  auto t = take(l, job, 3);
  CHECK(l.hand_back({t[0].task_id, t[1].task_id, 999}) ==
        std::vector<std::uint64_t>{t[1].task_id, t[0].task_id});
  CHECK(job.attempts_failed == 0);
  CHECK(job.failed == 0);
  CHECK(job.in_flight == 1);
  REQUIRE(job.ready.size() == 2);
  CHECK(job.ready[0].mb.index == 0);
  CHECK(job.ready[1].mb.index == 1);
  CHECK(job.ready[0].attempt == 1);
  CHECK(job.ready[0].mb.items.size() == 2);
  // Its result, should one still come, is not counted; the retry runs under a new task id.
  CHECK_FALSE(finish(l, t[0], AttemptStatus::RunDone).ours);
  auto again = take(l, job, 1);
  REQUIRE(again.size() == 1);
  CHECK(again[0].index == 0);
  CHECK(again[0].attempt == 1);
  CHECK(again[0].task_id != t[0].task_id);
  CHECK(finish(l, again[0], AttemptStatus::RunDone).ours);
}

// attempts.id must be the task id the pool saw: a lost attempt used to be recorded under
// a fresh id, so the pool's logs and the store disagreed. The retry gets the fresh id.
TEST_CASE("interchange.job_ledger.lost_attempt_keeps_its_task_id") {
  JobLedger l(1, 100);
  Job& job = job_with(l, 1);
  auto t = take(l, job, 1);
  REQUIRE(t[0].task_id == 100);
  std::vector<std::uint64_t> touched;
  auto lost = l.lose({100}, AttemptStatus::PoolLost, "lost", 0, touched);
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].result.task_id == 100);
  CHECK(lost[0].result.attempt == 1);
  CHECK(lost[0].pool_id == 1);
  auto retry = take(l, job, 1);
  CHECK(retry[0].task_id == 101);
  CHECK(retry[0].attempt == 2);
}

TEST_CASE("interchange.job_ledger.ending_a_job_cancels_its_attempts_under_their_task_ids") {
  JobLedger l(1, 1);
  Job& other = job_with(l, 1);
  Job& job = job_with(l, 4);
  auto other_task = take(l, other, 1, 3);
  auto t = take(l, job, 2, 5);
  const auto id = job.id;
  const auto failed_before = job.attempts_failed;
  auto ended = l.end(id, Verdict{JobState::Cancelled, "by a client"}, 9.0);
  CHECK(ended.job.id == id);
  // The stopped attempts count as failed ones, as in the store and job_result.txt.
  CHECK(ended.job.attempts_failed == failed_before + 2);
  CHECK(ended.job.state == JobState::Cancelled);
  CHECK(ended.job.in_flight == 0);
  CHECK(ended.job.ready.empty());
  REQUIRE(ended.stopped.size() == 2);
  CHECK(ended.stopped[0].result.task_id == t[0].task_id);
  CHECK(ended.stopped[1].result.task_id == t[1].task_id);
  CHECK(ended.stopped[0].pool_id == 5);
  CHECK(ended.stopped[0].result.status == static_cast<std::uint8_t>(AttemptStatus::Cancelled));
  CHECK(ended.stopped[0].result.error_category == "CANCELLED");
  CHECK(ended.stopped[0].result.error_message == "stopped: the job cancelled: by a client");
  CHECK(ended.job.attempts_failed == 2);  // the one count: every attempt that is not RUN_DONE
  CHECK(l.find(id) == nullptr);
  CHECK_FALSE(finish(l, t[0], AttemptStatus::RunDone, 5).ours);     // late now
  CHECK(finish(l, other_task[0], AttemptStatus::RunDone, 3).ours);  // the other job runs on
  CHECK_FALSE(JobLedger::verdict(ended.job).has_value());  // an ended job gets no new verdict
}

TEST_CASE("interchange.job_ledger.init_failing_everywhere_fails_the_job_fast") {
  JobLedger l(1, 1);
  Job& job = job_with(l, 40, true, spec(2));
  auto fail_load = [&](const Task& t) {
    auto r = result_of(t, AttemptStatus::LoadException);
    r.error_message = "ValueError: no model\nTraceback ...";
    return l.complete(1, r, t0);
  };
  CHECK_FALSE(fail_load(take(l, job, 1)[0]).gave_up);  // mini-batch 0, try 1 of 2
  CHECK_FALSE(JobLedger::verdict(job).has_value());
  CHECK(fail_load(take(l, job, 1)[0]).gave_up);  // its last try: 38 others never ran
  auto v = JobLedger::verdict(job);
  REQUIRE(v.has_value());
  CHECK(v->state == JobState::Failed);
  CHECK(v->reason ==
        "init() failed on every worker start: mini-batch 0 used its 2 tries and none "
        "succeeded: ValueError: no model");
}

TEST_CASE("interchange.job_ledger.init_failing_after_a_success_is_not_fail_fast") {
  JobLedger l(1, 1);
  Job& job = job_with(l, 3, true, spec(1));
  finish(l, take(l, job, 1)[0], AttemptStatus::RunDone);
  finish(l, take(l, job, 1)[0], AttemptStatus::LoadException);
  CHECK_FALSE(JobLedger::verdict(job).has_value());  // init() works somewhere: run the rest
  finish(l, take(l, job, 1)[0], AttemptStatus::RunDone);
  auto v = JobLedger::verdict(job);
  REQUIRE(v.has_value());
  CHECK(v->state == JobState::Partial);
}

TEST_CASE("interchange.job_ledger.a_refused_entry_fails_at_once_without_a_pool") {
  JobLedger l(1, 100);
  Job& job = l.accept(spec(3), t0, 1.0);
  auto in = batches(0, 2);
  MiniBatch refused{2, {"/d/locked"}, "{}"};
  refused.refused = "/d/locked: opendir: Permission denied (EACCES)";
  in.push_back(refused);
  std::vector<MiniBatch> accepted;
  CHECK(l.submit(job, in, accepted) == 0);
  CHECK(job.total == 3);
  CHECK(job.ready.size() == 2);  // never queued for a pool
  auto failed = l.refuse_unreadable(job, accepted, 5.0);
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].result.index == 2);
  CHECK(failed[0].result.task_id == 100);
  CHECK(failed[0].result.error_category == "INPUT_UNREADABLE");
  CHECK(failed[0].result.error_message == refused.refused);
  CHECK(failed[0].batch == BatchState::Failed);  // no retry, whatever max_tries says
  CHECK(job.failed == 1);
  CHECK(job.items_failed == 1);
  CHECK(job.attempts_failed == 1);
  // It counts against the thresholds like any failed mini-batch.
  job.spec.mini_batch_error_threshold = 0;
  auto v = JobLedger::verdict(job);
  REQUIRE(v.has_value());
  CHECK(v->state == JobState::Failed);
}

TEST_CASE("interchange.job_ledger.reopening_a_running_job_queues_what_the_store_reopened") {
  JobLedger l(1, 1);
  Job& job = job_with(l, 2);
  auto t = take(l, job, 2);
  // Out of tries with max_tries 3: three failed tries of mini-batch 0.
  CHECK(finish(l, t[0], AttemptStatus::RunException).batch == BatchState::Pending);
  auto t2 = take(l, job, 1);
  CHECK(finish(l, t2[0], AttemptStatus::RunException).batch == BatchState::Pending);
  auto t3 = take(l, job, 1);
  CHECK(finish(l, t3[0], AttemptStatus::RunException).batch == BatchState::Failed);
  REQUIRE(job.failed == 1);
  fanout::store::UnfinishedJob u;
  u.job_id = job.id;
  u.remaining.push_back(MiniBatch{0, {"f", "f"}, ""});
  u.remaining_tries.push_back(0);
  l.reopen(job, std::move(u));
  CHECK(job.failed == 0);
  CHECK(job.items_failed == 0);
  REQUIRE(job.ready.size() == 1);
  CHECK(job.ready.front().mb.index == 0);
  CHECK(job.ready.front().attempt == 1);
  CHECK_FALSE(JobLedger::verdict(job).has_value());  // mini-batch 1 still runs
}
