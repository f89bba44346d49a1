// The pool's policies (pool/pool_planner.hpp), without sockets or processes: which worker slot
// runs, queues, starts or retires what, when a job's failing init() ends its tasks, how many tasks
// the pool asks for, when results are due, and the stop causes' stored text.
#include "pool/pool_planner.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

using namespace fanout;
using namespace fanout::pool;
using Kind = PoolAction::Kind;
using State = WorkerTasks::State;
using std::chrono::milliseconds;

namespace {

const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);

proto::Task task(std::uint64_t id, std::uint64_t job = 1, std::size_t item_bytes = 8) {
  proto::Task t;
  t.task_id = id;
  t.job_id = job;
  t.index = id;
  t.items = {std::string(item_bytes, 'f')};
  return t;
}

PoolPlanner planner(std::uint32_t workers, std::uint32_t prefetch = 0) {
  PoolPlanner p(PlannerConfig{workers, prefetch, milliseconds(10)});
  p.job_known(1);
  p.job_known(2);
  return p;
}

SlotView worker(std::uint64_t job, State state, bool running = false, std::size_t queued = 0) {
  SlotView s;
  s.occupied = true;
  s.job_id = job;
  s.state = state;
  s.running = running;
  s.queued = queued;
  return s;
}

std::vector<Kind> kinds(const std::vector<PoolAction>& actions) {
  std::vector<Kind> out;
  for (const auto& a : actions) out.push_back(a.kind);
  return out;
}

// Makes job 1's tasks short (mean 1 ms), so that they may queue in a busy worker's pipe.
void make_short(PoolPlanner& p, std::uint64_t job = 1) { p.task_finished(job, 0.001); }

}  // namespace

TEST_CASE("pool.planner.an_idle_worker_of_the_job_takes_the_first_queued_task") {
  auto p = planner(2);
  p.task_arrived(task(7));
  p.task_arrived(task(8));
  const auto actions = p.assign({worker(1, State::Idle), worker(1, State::Busy, true)});
  REQUIRE(kinds(actions) == std::vector<Kind>{Kind::StartTask});
  CHECK(actions[0].slot == 0);
  CHECK(actions[0].task->task_id == 7);
  // Task 8 waits: the other worker is busy and its tasks are not known to be short.
  REQUIRE(p.queue().size() == 1);
  CHECK(p.queue().front().task_id == 8);
}

TEST_CASE("pool.planner.a_task_fills_every_free_slot_with_workers_of_its_job") {
  auto p = planner(3);
  p.task_arrived(task(1));
  const auto actions = p.assign({SlotView{}, worker(2, State::Busy, true), SlotView{}});
  REQUIRE(kinds(actions) == std::vector<Kind>{Kind::StartWorker, Kind::StartWorker});
  CHECK(actions[0].slot == 0);
  CHECK(actions[1].slot == 2);
  CHECK(actions[0].job_id == 1);
  // The task stays queued until one of them is ready.
  CHECK(p.queue().size() == 1);
}

TEST_CASE("pool.planner.replaced_worker_gets_the_slot") {
  // Slot 1's worker crashed and is gone: its replacement takes slot 1 (and so its process name),
  // not a new index.
  auto p = planner(3);
  p.task_arrived(task(1));
  const auto actions =
      p.assign({worker(1, State::Busy, true), SlotView{}, worker(1, State::Busy, true)});
  REQUIRE(kinds(actions) == std::vector<Kind>{Kind::StartWorker});
  CHECK(actions[0].slot == 1);
}

TEST_CASE("pool.planner.a_task_of_an_unknown_job_fails_as_a_protocol_error") {
  auto p = planner(1);
  p.task_arrived(task(1, /*job=*/9));
  const auto actions = p.assign({SlotView{}});
  REQUIRE(kinds(actions) == std::vector<Kind>{Kind::FailTask});
  CHECK(actions[0].task->task_id == 1);
  CHECK(actions[0].cause == StopCause::UnknownJob);
  CHECK(std::string(to_string(actions[0].cause)) == "ProtocolError");
  CHECK(attempt_status(actions[0].cause) == proto::AttemptStatus::LoadException);
  CHECK(p.queue().empty());
}

TEST_CASE("pool.planner.init_failed_costs_the_first_queued_task_of_its_job_one_try") {
  auto p = planner(2);
  p.task_arrived(task(1, 2));
  p.task_arrived(task(2, 1));
  p.task_arrived(task(3, 1));
  const auto failed = p.worker_init_failed(1);
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].task_id == 2);
  CHECK(p.queue().size() == 2);
}

TEST_CASE("pool.planner.init_failed_three_times_per_worker_fails_every_queued_task_of_the_job") {
  auto p = planner(2);
  for (std::uint64_t id = 1; id <= 10; ++id) p.task_arrived(task(id, id % 2 == 0 ? 1 : 2));
  // 3 x 2 workers: the first five failures cost one task each, the sixth every one left.
  for (int i = 0; i < 5; ++i) CHECK(p.worker_init_failed(1).size() == 1);
  CHECK(p.worker_init_failed(1).empty());  // job 1's five tasks are gone
  for (std::uint64_t id = 11; id <= 14; ++id) p.task_arrived(task(id, 1));
  CHECK(p.worker_init_failed(1).size() == 4);
  // Job 2's tasks are untouched.
  CHECK(p.queue().size() == 5);
}

TEST_CASE("pool.planner.a_ready_worker_resets_the_init_failure_count") {
  auto p = planner(1);
  for (std::uint64_t id = 1; id <= 6; ++id) p.task_arrived(task(id));
  CHECK(p.worker_init_failed(1).size() == 1);
  CHECK(p.worker_init_failed(1).size() == 1);
  p.worker_ready(1);
  // Two failures again: not yet 3 x 1 in a row.
  CHECK(p.worker_init_failed(1).size() == 1);
  CHECK(p.worker_init_failed(1).size() == 1);
  CHECK(p.worker_init_failed(1).size() == 2);  // the third in a row: the rest fail
}

TEST_CASE("pool.planner.a_worker_that_cannot_start_fails_the_first_queued_task_of_its_job") {
  auto p = planner(1);
  p.task_arrived(task(1, 2));
  p.task_arrived(task(2, 1));
  auto failed = p.worker_start_failed(1);
  REQUIRE(failed);
  CHECK(failed->task_id == 2);
  CHECK(std::string(to_string(StopCause::WorkerStartError)) == "WorkerStartError");
  CHECK_FALSE(p.worker_start_failed(1));
}

TEST_CASE("pool.planner.prefetch_grows_when_workers_wait_on_short_tasks") {
  auto p = planner(4, 2);
  CHECK(p.capacity() == 6);  // workers + prefetch while task times are unknown
  p.task_finished(1, 1.0);
  CHECK(p.capacity() == 6);  // long tasks keep the configured prefetch
  make_short(p, 2);          // 1 ms: 2 tasks fit in 2 ms of pipe, twice over per worker
  CHECK(p.capacity() == 4 + 2 * 4 * 2);
  p.job_known(3);
  p.task_finished(3, 1e-6);  // very short: the shortest job counts, up to the cap
  CHECK(p.capacity() == 4 + PoolPlanner::kMaxAutoPrefetch);
  // A dropped job's mean no longer counts.
  (void)p.job_dropped(3);
  CHECK(p.capacity() == 4 + 2 * 4 * 2);
  (void)p.job_dropped(2);
  CHECK(p.capacity() == 6);
}

TEST_CASE("pool.planner.prefetch_holds_one_task_per_worker_for_sub_second_tasks") {
  // A 0.25 s task (one torch mini-batch): the pool holds one more per worker, so that a worker
  // starts its next task from the pool's queue instead of after the interchange's round trip.
  auto p = planner(2);
  CHECK(p.capacity() == 2);  // task times unknown: the configured prefetch (0)
  p.task_finished(1, 0.25);
  CHECK(p.capacity() == 2 + 2);
  // Such tasks never wait in a busy worker's pipe: a sibling that ends first takes them.
  CHECK(p.pipeline_room(worker(1, State::Busy, true)) == 0);
  // A configured prefetch above one per worker stays.
  auto q = planner(2, 5);
  q.task_finished(1, 0.25);
  CHECK(q.capacity() == 2 + 5);
  // Tasks of a second or more keep the configured prefetch, and a dropped job no longer counts.
  auto r = planner(2);
  r.task_finished(1, 1.0);  // PoolPlanner::kPrefetchMaxTaskS
  CHECK(r.capacity() == 2);
  r.task_finished(2, 0.5);
  CHECK(r.capacity() == 4);
  (void)r.job_dropped(2);
  CHECK(r.capacity() == 2);
}

TEST_CASE("pool.planner.pipeline_depth_is_about_two_ms_of_work_at_least_one_task") {
  CHECK(PoolPlanner::pipeline_depth(0.001) == 2);
  CHECK(PoolPlanner::pipeline_depth(0.01) == 1);
  CHECK(PoolPlanner::pipeline_depth(1e-9) == PoolPlanner::kMaxPipelineDepth);
}

TEST_CASE("pool.planner.short_tasks_queue_in_the_pipe_of_the_least_loaded_busy_worker") {
  auto p = planner(2);
  make_short(p);
  for (std::uint64_t id = 1; id <= 4; ++id) p.task_arrived(task(id));
  const auto actions = p.assign({worker(1, State::Busy, true, 1), worker(1, State::Busy, true, 0)});
  // Depth 2 each: slot 1 (none waiting) first, then slot 0 (tie: the first), then slot 1 again;
  // both pipes are then full and the fourth task waits.
  REQUIRE(kinds(actions) ==
          std::vector<Kind>{Kind::EnqueueTask, Kind::EnqueueTask, Kind::EnqueueTask});
  CHECK(actions[0].slot == 1);
  CHECK(actions[1].slot == 0);
  CHECK(actions[2].slot == 1);
  REQUIRE(p.queue().size() == 1);
  CHECK(p.queue().front().task_id == 4);
}

TEST_CASE("pool.planner.long_or_unknown_tasks_never_queue_behind_another") {
  auto p = planner(1);
  p.task_arrived(task(1));
  CHECK(p.assign({worker(1, State::Busy, true)}).empty());
  p.task_finished(1, 0.5);
  CHECK(p.assign({worker(1, State::Busy, true)}).empty());
  CHECK(p.queue().size() == 1);
}

TEST_CASE("pool.planner.no_pipe_room_in_a_worker_being_stopped_or_owing_replies") {
  auto p = planner(1);
  make_short(p);
  SlotView stopping = worker(1, State::Busy, true);
  stopping.kill_pending = true;
  SlotView owing = worker(1, State::Busy, true);
  owing.stale = 1;
  CHECK(p.pipeline_room(worker(1, State::Busy, true)) == 2);
  CHECK(p.pipeline_room(stopping) == 0);
  CHECK(p.pipeline_room(owing) == 0);
  CHECK(p.pipeline_room(worker(1, State::Idle)) == 0);
}

TEST_CASE("pool.planner.the_pipe_budget_bounds_the_bytes_queued_in_a_worker") {
  auto p = planner(1);
  p.task_finished(1, 1e-6);  // depth 64: only the bytes bound it
  const std::size_t big = PoolPlanner::kPipeBudgetBytes / 3;
  for (std::uint64_t id = 1; id <= 4; ++id) p.task_arrived(task(id, 1, big));
  const auto actions = p.assign({worker(1, State::Busy, true)});
  CHECK(kinds(actions) == std::vector<Kind>{Kind::EnqueueTask, Kind::EnqueueTask});
  CHECK(p.queue().size() == 2);
}

TEST_CASE("pool.planner.an_idle_worker_of_a_job_with_nothing_queued_is_retired_for_another") {
  auto p = planner(2);
  p.task_arrived(task(1, 2));
  const auto actions = p.assign({worker(1, State::Idle), worker(2, State::Busy, true)});
  REQUIRE(kinds(actions) == std::vector<Kind>{Kind::RetireWorker});
  CHECK(actions[0].slot == 0);
  CHECK(p.queue().size() == 1);  // it runs once the slot is free
}

TEST_CASE("pool.planner.no_worker_is_retired_while_one_of_the_job_is_starting") {
  auto p = planner(2);
  p.task_arrived(task(1, 2));
  CHECK(p.assign({worker(1, State::Idle), worker(2, State::Starting)}).empty());
}

TEST_CASE("pool.planner.an_idle_worker_whose_job_still_has_tasks_queued_is_kept") {
  auto p = planner(2);
  p.task_arrived(task(1, 2));
  p.task_arrived(task(2, 1));
  // Slot 0 (job 1, Idle) takes task 2; job 2's task waits for its busy worker: nothing retired.
  const auto actions = p.assign({worker(1, State::Idle), worker(2, State::Busy, true)});
  REQUIRE(kinds(actions) == std::vector<Kind>{Kind::StartTask});
  CHECK(actions[0].task->task_id == 2);
}

TEST_CASE("pool.planner.draining_asks_for_nothing_and_starts_nothing") {
  auto p = planner(2, 4);
  p.task_arrived(task(1));
  p.start_draining();
  CHECK(p.capacity() == 0);
  CHECK(p.assign({worker(1, State::Idle), SlotView{}}).empty());
  CHECK(p.queue().size() == 1);  // handed back when the pool leaves
}

TEST_CASE("pool.planner.results_batched_until_due") {
  auto p = planner(2, 6);  // capacity 8: a quarter is 2 results
  for (std::uint64_t id = 1; id <= 4; ++id) p.task_arrived(task(id));
  CHECK_FALSE(p.results_due(0, t0, t0));
  // One result, enough queued to keep both workers busy: it waits for company ...
  CHECK_FALSE(p.results_due(1, t0, t0 + milliseconds(9)));
  // ... until it is `poll` old,
  CHECK(p.results_due(1, t0, t0 + milliseconds(10)));
  // or a quarter of the capacity has finished.
  CHECK(p.results_due(2, t0, t0));
}

TEST_CASE("pool.planner.results_go_at_once_when_the_pool_runs_dry") {
  auto p = planner(2, 6);
  p.task_arrived(task(1));  // fewer queued than workers: the credit is needed now
  CHECK(p.results_due(1, t0, t0));
  auto q = planner(2, 6);
  for (std::uint64_t id = 1; id <= 4; ++id) q.task_arrived(task(id));
  q.start_draining();
  CHECK(q.results_due(1, t0, t0));
}

TEST_CASE("pool.planner.returned_tasks_go_back_to_the_front_in_their_order") {
  auto p = planner(1);
  p.task_arrived(task(9));
  p.tasks_returned(std::deque<proto::Task>{task(3), task(4)});
  REQUIRE(p.queue().size() == 3);
  CHECK(p.queue()[0].task_id == 3);
  CHECK(p.queue()[1].task_id == 4);
  CHECK(p.queue()[2].task_id == 9);
  p.forget_queue();
  CHECK(p.queue().empty());
}

TEST_CASE("pool.planner.a_dropped_job_forgets_its_queued_tasks_and_its_failures") {
  auto p = planner(1);
  p.task_arrived(task(1, 1));
  p.task_arrived(task(2, 2));
  p.task_arrived(task(3, 1));
  CHECK(p.worker_init_failed(1).size() == 1);
  CHECK(p.worker_init_failed(1).size() == 1);
  CHECK(p.job_dropped(1) == 0);
  p.job_known(1);
  for (std::uint64_t id = 4; id <= 6; ++id) p.task_arrived(task(id, 1));
  CHECK(p.job_dropped(1) == 3);
  p.job_known(1);
  for (std::uint64_t id = 4; id <= 6; ++id) p.task_arrived(task(id, 1));
  // The count started again: one failure costs one task.
  CHECK(p.worker_init_failed(1).size() == 1);
  CHECK(p.queue().size() == 3);
}

TEST_CASE("pool.planner.stop_causes_keep_their_stored_text_and_status") {
  CHECK(std::string(to_string(StopCause::RunTimeout)) == "RunTimeout");
  CHECK(std::string(to_string(StopCause::TaskOverheadTimeout)) == "TaskOverheadTimeout");
  CHECK(std::string(to_string(StopCause::WorkerLost)) == "WorkerLost");
  CHECK(attempt_status(StopCause::RunTimeout) == proto::AttemptStatus::RunTimeout);
  CHECK(attempt_status(StopCause::TaskOverheadTimeout) == proto::AttemptStatus::RunTimeout);
  CHECK(attempt_status(StopCause::WorkerLost) == proto::AttemptStatus::WorkerLost);
  CHECK(std::string(proto::to_string(attempt_status(StopCause::RunTimeout))) == "RUN_TIMEOUT");
  CHECK(attempt_status(StopCause::WorkerStartError) == proto::AttemptStatus::LoadException);
}

// ---- fanout.max_minibatches_per_worker: a worker is replaced after N tasks ----

namespace {

PoolPlanner recycling_planner(std::uint32_t workers, std::uint64_t max_tasks) {
  PoolPlanner p(PlannerConfig{workers, 0, milliseconds(10), max_tasks});
  p.job_known(1);
  p.job_known(2);
  return p;
}

SlotView with_finished(SlotView s, std::uint64_t finished) {
  s.finished = finished;
  return s;
}

}  // namespace

TEST_CASE("pool.planner.a_spent_idle_worker_is_retired_and_its_slot_refilled") {
  auto p = recycling_planner(2, 3);
  p.task_arrived(task(1));
  // Slot 0 ran its 3 tasks: retired first; task 1 goes to slot 1's idle worker, not to it.
  const auto actions = p.assign(
      {with_finished(worker(1, State::Idle), 3), with_finished(worker(1, State::Idle), 1)});
  REQUIRE(kinds(actions) == std::vector<Kind>{Kind::RetireWorker, Kind::StartTask});
  CHECK(actions[0].slot == 0);
  CHECK(actions[1].slot == 1);
  CHECK(actions[1].task->task_id == 1);
  // Once the spent worker has exited its slot is free: the next task starts a fresh worker there.
  p.task_arrived(task(2));
  const auto next = p.assign({SlotView{}, with_finished(worker(1, State::Busy, true), 1)});
  REQUIRE(kinds(next) == std::vector<Kind>{Kind::StartWorker});
  CHECK(next[0].slot == 0);
  CHECK(p.queue().size() == 1);
}

TEST_CASE("pool.planner.a_spent_worker_is_retired_even_with_nothing_queued") {
  auto p = recycling_planner(1, 2);
  const auto actions = p.assign({with_finished(worker(1, State::Idle), 2)});
  REQUIRE(kinds(actions) == std::vector<Kind>{Kind::RetireWorker});
  // Below its count, or busy, or already stopping: nothing.
  CHECK(p.assign({with_finished(worker(1, State::Idle), 1)}).empty());
  CHECK(p.assign({with_finished(worker(1, State::Busy, true), 2)}).empty());
  CHECK(p.assign({with_finished(worker(1, State::Stopping), 5)}).empty());
  // Without max_tasks_per_worker nobody is spent.
  auto plain = planner(1);
  CHECK(plain.assign({with_finished(worker(1, State::Idle), 1000)}).empty());
}

TEST_CASE("pool.planner.a_worker_never_holds_more_tasks_than_it_has_left") {
  auto p = recycling_planner(1, 3);
  make_short(p);  // short tasks may wait in a busy worker's pipe
  for (std::uint64_t id = 1; id <= 6; ++id) p.task_arrived(task(id));
  // It finished 1 and runs 1: one more may wait in its pipe, the rest stays with the pool, so
  // nothing is in its pipe when it exits after its third.
  const SlotView busy = with_finished(worker(1, State::Busy, true), 1);
  CHECK(p.tasks_left(busy) == 1);
  CHECK(p.pipeline_room(busy) == 1);
  const auto actions = p.assign({busy});
  REQUIRE(kinds(actions) == std::vector<Kind>{Kind::EnqueueTask});
  CHECK(p.queue().size() == 5);
  const SlotView full = with_finished(worker(1, State::Busy, true, 1), 1);
  CHECK(p.tasks_left(full) == 0);
  CHECK(p.pipeline_room(full) == 0);
  CHECK(p.assign({full}).empty());
}

TEST_CASE("pool.planner.a_draining_pool_recycles_nothing") {
  auto p = recycling_planner(1, 1);
  p.start_draining();
  CHECK(p.assign({with_finished(worker(1, State::Idle), 1)}).empty());
}
