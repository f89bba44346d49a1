// Tests for a worker's bookkeeping (pool/worker_tasks.hpp): how the running task, the tasks queued
// behind it, the replies due for forgotten tasks, the task's clocks and the stop deadline change,
// without a process.
#include "pool/worker_tasks.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "pool/worker_pipe.hpp"

using namespace fanout;
using namespace fanout::pool;
using State = WorkerTasks::State;
using std::chrono::milliseconds;

namespace {

proto::Task task(std::uint64_t id, std::vector<std::string> items = {"/data/a", "/data/b"}) {
  proto::Task t;
  t.task_id = id;
  t.job_id = 1;
  t.index = id * 10;
  t.items = std::move(items);
  return t;
}

const Clock::time_point t0 = Clock::now();

// A Busy worker running task 1, with tasks 2 and 3 queued behind it.
WorkerTasks busy_with_two_queued() {
  WorkerTasks w;
  w.ready();
  w.start(task(1), t0);
  w.enqueue(task(2));
  w.enqueue(task(3));
  return w;
}

}  // namespace

TEST_CASE("pool.worker_tasks.starts_starting_and_becomes_idle_when_ready") {
  WorkerTasks w;
  CHECK(w.state() == State::Starting);
  CHECK_FALSE(w.task());
  w.ready();
  CHECK(w.state() == State::Idle);
  w.start(task(1), t0);
  w.ready();  // a second R frame changes nothing
  CHECK(w.state() == State::Busy);
}

TEST_CASE("pool.worker_tasks.start_makes_it_busy_and_starts_the_clocks") {
  WorkerTasks w;
  w.ready();
  const double before = unix_now();
  w.start(task(7), t0);
  CHECK(w.state() == State::Busy);
  REQUIRE(w.task());
  CHECK(w.task()->task_id == 7);
  CHECK(w.runs(7));
  CHECK_FALSE(w.runs(8));
  CHECK(w.clock().start == t0);
  CHECK(w.clock().phase_start == t0);
  CHECK(w.clock().start_unix >= before);
  CHECK(w.clock().overhead_used == Clock::duration::zero());
  CHECK_FALSE(w.clock().run_started);
  CHECK_FALSE(w.clock().in_run);
}

TEST_CASE("pool.worker_tasks.queued_tasks_count_their_frame_bytes") {
  WorkerTasks w = busy_with_two_queued();
  REQUIRE(w.queued().size() == 2);
  CHECK(w.queued()[0].task_id == 2);
  CHECK(w.queued()[1].task_id == 3);
  CHECK(w.queued_bytes() == task_frame_bytes(task(2)) + task_frame_bytes(task(3)));
  // task_frame_bytes is the size of the frame the pipe carries.
  std::string f;
  const proto::Task t = task(2, {"x", "", "yz"});
  pipe::append_task(f, t.task_id, t.index, t.detail, t.items);
  CHECK(task_frame_bytes(t) == f.size());
}

TEST_CASE("pool.worker_tasks.finish_starts_the_next_queued_task_then_idles") {
  WorkerTasks w = busy_with_two_queued();
  const auto t1 = t0 + milliseconds(5);
  w.run_started(1, t0 + milliseconds(1));
  w.finish(t1);
  CHECK(w.state() == State::Busy);
  CHECK(w.runs(2));
  CHECK(w.queued().size() == 1);
  CHECK(w.queued_bytes() == task_frame_bytes(task(3)));
  // The next task's clocks start at the reply to the one ahead of it.
  CHECK(w.clock().start == t1);
  CHECK(w.clock().phase_start == t1);
  CHECK_FALSE(w.clock().run_started);
  CHECK(w.clock().overhead_used == Clock::duration::zero());
  w.finish(t1);
  CHECK(w.runs(3));
  CHECK(w.queued().empty());
  CHECK(w.queued_bytes() == 0);
  w.finish(t1);
  CHECK(w.state() == State::Idle);
  CHECK_FALSE(w.task());
}

TEST_CASE("pool.worker_tasks.markers_split_the_task_into_overhead_and_run") {
  WorkerTasks w;
  w.ready();
  w.start(task(1), t0);
  w.run_started(1, t0 + milliseconds(3));
  CHECK(w.clock().run_started);
  CHECK(w.clock().in_run);
  CHECK(w.clock().overhead_used == milliseconds(3));
  CHECK(w.clock().phase_start == t0 + milliseconds(3));
  w.run_ended(1, t0 + milliseconds(10));
  CHECK_FALSE(w.clock().in_run);
  CHECK(w.clock().run_started);
  CHECK(w.clock().overhead_used == milliseconds(3));  // run() time is not overhead
  CHECK(w.clock().phase_start == t0 + milliseconds(10));
  // Markers of another task (one forgotten after a re-registration) change nothing.
  const TaskClock before = w.clock();
  w.run_started(2, t0 + milliseconds(20));
  w.run_ended(2, t0 + milliseconds(21));
  CHECK(w.clock().phase_start == before.phase_start);
  CHECK(w.clock().overhead_used == before.overhead_used);
  CHECK(w.clock().in_run == before.in_run);
}

TEST_CASE("pool.worker_tasks.forgotten_tasks_leave_their_replies_due") {
  WorkerTasks w = busy_with_two_queued();
  w.forget_tasks();
  CHECK_FALSE(w.task());
  CHECK(w.queued().empty());
  CHECK(w.queued_bytes() == 0);
  CHECK(w.stale() == 3);
  CHECK(w.state() == State::Busy);  // it still works on them
  w.unmatched_reply();
  w.unmatched_reply();
  CHECK(w.stale() == 1);
  CHECK(w.state() == State::Busy);
  w.unmatched_reply();
  CHECK(w.stale() == 0);
  CHECK(w.state() == State::Idle);
}

TEST_CASE("pool.worker_tasks.a_stray_reply_ends_the_running_task_only_with_nothing_queued") {
  SUBCASE("nothing queued: the task is dropped unreported") {
    WorkerTasks w;
    w.ready();
    w.start(task(1), t0);
    w.unmatched_reply();
    CHECK_FALSE(w.task());
    CHECK(w.state() == State::Idle);
  }
  SUBCASE("tasks queued: nothing changes") {
    WorkerTasks w = busy_with_two_queued();
    w.unmatched_reply();
    CHECK(w.runs(1));
    CHECK(w.queued().size() == 2);
    CHECK(w.state() == State::Busy);
  }
}

TEST_CASE("pool.worker_tasks.take_queued_returns_them_in_order") {
  WorkerTasks w = busy_with_two_queued();
  auto q = w.take_queued();
  REQUIRE(q.size() == 2);
  CHECK(q[0].task_id == 2);
  CHECK(q[1].task_id == 3);
  CHECK(w.queued().empty());
  CHECK(w.queued_bytes() == 0);
  CHECK(w.runs(1));  // the running task stays, for the pool to report
}

TEST_CASE("pool.worker_tasks.cancel_forgets_everything_and_says_whether_a_task_ran") {
  const auto kill_at = t0 + milliseconds(2000);
  SUBCASE("running a task") {
    WorkerTasks w = busy_with_two_queued();
    CHECK(w.cancel(kill_at));
    CHECK_FALSE(w.task());
    CHECK(w.queued().empty());
    CHECK(w.queued_bytes() == 0);
    CHECK(w.state() == State::Stopping);
    CHECK(w.kill_at() == kill_at);
  }
  SUBCASE("idle") {
    WorkerTasks w;
    w.ready();
    CHECK_FALSE(w.cancel(kill_at));
    CHECK(w.state() == State::Stopping);
    CHECK(w.kill_at() == kill_at);
  }
}

TEST_CASE("pool.worker_tasks.a_timed_out_worker_keeps_its_task_until_killed") {
  WorkerTasks w;
  w.ready();
  w.start(task(1), t0);
  const auto kill_at = t0 + milliseconds(2000);
  w.time_out(fanout::pool::StopCause::RunTimeout, kill_at);
  CHECK(w.state() == State::Stopping);
  CHECK(w.stop_cause() == fanout::pool::StopCause::RunTimeout);
  CHECK(w.fail_status().empty());
  CHECK(w.runs(1));
  CHECK(w.kill_at() == kill_at);
  w.killed();
  CHECK_FALSE(w.kill_at());
  CHECK(w.state() == State::Stopping);
}

TEST_CASE("pool.worker_tasks.retire_and_load_failures") {
  WorkerTasks w;
  w.load_failed("LoadError: score.py does not define run(mini_batch)");
  CHECK(w.fail_status() == "LoadError: score.py does not define run(mini_batch)");
  CHECK(w.state() == State::Starting);
  WorkerTasks idle;
  idle.ready();
  idle.retire(t0);
  CHECK(idle.state() == State::Stopping);
  CHECK(idle.kill_at() == t0);
  CHECK(idle.fail_status().empty());
}
