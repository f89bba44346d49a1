// What fanout-pool decides, apart from what it does: the tasks it holds, which worker slot runs,
// queues or starts what, when a job's failing init() ends its tasks, how many tasks to ask for,
// and when results are due. No sockets, processes or clocks (time is passed in); pool.cpp feeds
// it what happened and carries out the actions it returns. Its tests
// (tests/unit/pool/pool_planner_test.cpp) read as the specification. See docs/architecture.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fanout/protocol/messages.hpp"
#include "fanout/util/clock.hpp"
#include "pool/stop_cause.hpp"
#include "pool/worker_tasks.hpp"

namespace fanout::pool {

// One worker slot as the planner sees it. A slot's index is stable: the worker that replaces a
// crashed or retired one takes the same slot (and process name).
struct SlotView {
  bool occupied = false;  // a worker process is in the slot
  std::uint64_t job_id = 0;
  WorkerTasks::State state = WorkerTasks::State::Starting;
  bool running = false;          // a task is in progress
  std::size_t queued = 0;        // tasks waiting in its pipe behind the running one
  std::size_t queued_bytes = 0;  // their frames' bytes
  std::uint32_t stale = 0;       // replies still due for forgotten tasks
  bool kill_pending = false;     // being stopped: a SIGKILL deadline is set
  std::uint64_t finished = 0;    // tasks it has finished (see PlannerConfig::max_tasks_per_worker)
};

// What the pool is to do, in order. `task` is set for StartTask, EnqueueTask and FailTask (the
// planner no longer holds it); `slot` for the worker actions.
struct PoolAction {
  enum class Kind : std::uint8_t {
    StartTask,     // write `task` to the Idle worker in `slot`
    EnqueueTask,   // queue `task` in the pipe of the Busy worker in `slot`
    StartWorker,   // start a worker for `job_id` in the free `slot`
    RetireWorker,  // the Idle worker in `slot` is not needed, or is spent: ask it to exit
    FailTask,      // report `task` failed with `cause` (and `message`)
  };
  Kind kind = Kind::StartTask;
  std::size_t slot = 0;
  std::uint64_t job_id = 0;
  std::optional<proto::Task> task{};
  StopCause cause = StopCause::UnknownJob;
  std::string message{};
};

struct PlannerConfig {
  std::uint32_t workers = 1;
  std::uint32_t prefetch = 0;
  Clock::duration poll{std::chrono::milliseconds(10)};  // longest a result waits for others
  // Tasks a worker runs before it is replaced (fanout.max_minibatches_per_worker, as
  // multiprocessing's maxtasksperchild); 0: never replaced for that.
  std::uint64_t max_tasks_per_worker = 0;
};

// The pool's decisions. Owned by the Pool; not thread-safe.
class PoolPlanner final {
 public:
  explicit PoolPlanner(PlannerConfig config);

  // --- what happened ---
  // A JobInfo arrived: tasks of `job_id` can run here.
  void job_known(std::uint64_t job_id);
  // The job was dropped: its queued tasks are forgotten (returns how many) and its counters too.
  std::size_t job_dropped(std::uint64_t job_id);
  // A task arrived from the interchange; it waits at the back of the queue.
  void task_arrived(proto::Task task);
  // Tasks that never started (from a gone worker's pipe, or one that could not be written) go
  // back to the front of the queue, in their order, no try used.
  void tasks_returned(std::deque<proto::Task> tasks);
  // Registration was lost: the interchange requeued what we held, so the queue is forgotten.
  void forget_queue() noexcept { queue_.clear(); }
  // A worker of `job_id` said it is ready: the job's consecutive init failures are reset.
  void worker_ready(std::uint64_t job_id);
  // A worker of `job_id` ended before it was ready (init() failed, timed out, or the process
  // exited). Each failure costs the job's first queued task one try, so a script whose init()
  // always fails ends its mini-batches instead of restarting forever; after 3 x workers
  // consecutive failures (ParallelRunStep's rule) every queued task of the job fails. Returns
  // the tasks to report failed, taken out of the queue.
  [[nodiscard]] std::vector<proto::Task> worker_init_failed(std::uint64_t job_id);
  // A task of `job_id` ended after `elapsed_s`: updates the job's running mean of task time.
  void task_finished(std::uint64_t job_id, double elapsed_s);
  // A worker could not be started for `job_id`: its first queued task is returned, to be
  // reported failed (StopCause::WorkerStartError), so that a broken launch ends the job's tasks.
  [[nodiscard]] std::optional<proto::Task> worker_start_failed(std::uint64_t job_id);
  // The pool was stopped by a signal: it asks for nothing more and starts nothing it holds.
  void start_draining() noexcept { draining_ = true; }

  // --- decisions ---
  // Hands queued tasks to the workers in `slots`, in queue order, and says which workers to
  // start or retire. See pool_planner.cpp for the rules. The pool executes the actions in order;
  // a StartWorker that fails is reported with worker_start_failed() and assign() is asked again.
  [[nodiscard]] std::vector<PoolAction> assign(const std::vector<SlotView>& slots);
  // Tasks the pool asks for: its workers plus its prefetch, raised for tasks under
  // kPrefetchMaxTaskS (see pool_planner.cpp); 0 while draining.
  [[nodiscard]] std::uint32_t capacity() const;
  // How many more tasks may wait in the pipe of the worker `slot` (0: none).
  [[nodiscard]] std::size_t pipeline_room(const SlotView& slot) const;
  // Whether the worker in `slot` has run its max_tasks_per_worker: it takes no more tasks and
  // is retired once Idle.
  [[nodiscard]] bool spent(const SlotView& slot) const noexcept;
  // Tasks the worker in `slot` may still be given, running and queued counted (SIZE_MAX: no
  // bound).
  [[nodiscard]] std::size_t tasks_left(const SlotView& slot) const noexcept;
  // Whether `pending` results, the oldest made at `oldest`, are to be sent at `now`.
  [[nodiscard]] bool results_due(std::size_t pending, Clock::time_point oldest,
                                 Clock::time_point now) const;

  [[nodiscard]] const std::deque<proto::Task>& queue() const noexcept { return queue_; }
  [[nodiscard]] bool draining() const noexcept { return draining_; }
  [[nodiscard]] const PlannerConfig& config() const noexcept { return config_; }

  // Tasks of a job whose mean is below this may wait in a busy worker's pipe, about
  // kPipelineQueueS of work per worker, at most kMaxPipelineDepth tasks and kPipeBudgetBytes
  // of frames (a Linux pipe holds 64 KiB: writing to a busy worker never blocks).
  static constexpr double kPipelineMaxTaskS = 0.05;
  static constexpr double kPipelineQueueS = 0.002;
  static constexpr std::size_t kMaxPipelineDepth = 64;
  static constexpr std::size_t kPipeBudgetBytes = 48 * 1024;
  // The most capacity() adds beyond the workers for short tasks.
  static constexpr std::size_t kMaxAutoPrefetch = 256;
  // Tasks of a job whose mean is below this (and not below kPipelineMaxTaskS) make capacity()
  // hold one task per worker beyond the workers: the interchange's round trip between two tasks
  // is then not the workers' wait.
  static constexpr double kPrefetchMaxTaskS = 1.0;
  // Tasks a busy worker may hold in its pipe for a job whose mean task time is `mean_task_s`
  // (below kPipelineMaxTaskS).
  [[nodiscard]] static std::size_t pipeline_depth(double mean_task_s);

 private:
  // The walk of assign() for the task at `it`; returns the iterator to go on from.
  std::deque<proto::Task>::iterator place(std::deque<proto::Task>::iterator it,
                                          std::vector<SlotView>& slots,
                                          std::vector<PoolAction>& out);
  // Spent Idle workers are retired (their slots get fresh workers when tasks need them).
  void retire_spent(std::vector<SlotView>& slots, std::vector<PoolAction>& out) const;
  // An Idle worker whose job has nothing queued, retired to make room (see assign()).
  void retire_one_unwanted(std::vector<SlotView>& slots, std::vector<PoolAction>& out) const;

  PlannerConfig config_;
  std::deque<proto::Task> queue_{};
  std::set<std::uint64_t> jobs_{};
  std::map<std::uint64_t, std::uint32_t> init_failures_{};  // consecutive, per job
  std::map<std::uint64_t, double> mean_task_s_{};           // running mean of task time, per job
  bool draining_ = false;
};

}  // namespace fanout::pool
