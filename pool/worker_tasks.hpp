// The bookkeeping of one worker, apart from its process and pipe: its state, the task it runs and
// that task's clocks, the tasks queued behind it in its pipe, the replies still due for tasks it
// was made to forget, and why the pool stopped it. See pool/worker.hpp for the I/O around it.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "fanout/protocol/messages.hpp"
#include "fanout/util/clock.hpp"
#include "pool/stop_cause.hpp"

namespace fanout::pool {

// The clocks of the task a worker runs. The overhead (time outside run()) is kept only from the
// S and E markers (jobs with a task overhead timeout): the time outside run() since the task
// started, counted up to the start of the current phase.
struct TaskClock {
  Clock::time_point start{};  // hand-off, or the reply to the task ahead of it in the pipe
  double start_unix = 0;
  bool run_started = false;         // S seen
  bool in_run = false;              // S seen, E not yet
  Clock::time_point phase_start{};  // start, S or E, whichever came last
  Clock::duration overhead_used{};  // overhead before phase_start
};

// Every change goes through a method that keeps these rules: a task is queued only behind a
// running one and starts when that one's reply arrives; an Idle worker holds no task; a Busy one
// holds a task or replies still due for forgotten ones; Stopping is final and has a kill deadline
// until the worker is killed. No I/O: the owning Worker writes the frames and sends the signals
// each change calls for, so these rules are unit-tested without a process. Not thread-safe.
class WorkerTasks final {
 public:
  enum class State : std::uint8_t { Starting, Idle, Busy, Stopping };

  [[nodiscard]] State state() const noexcept { return state_; }
  // The task in progress, if any.
  [[nodiscard]] const std::optional<proto::Task>& task() const noexcept { return task_; }
  // True when `task_id` is the task in progress.
  [[nodiscard]] bool runs(std::uint64_t task_id) const noexcept {
    return task_ && task_->task_id == task_id;
  }
  [[nodiscard]] const TaskClock& clock() const noexcept { return clock_; }
  // Tasks sent after the running one, not started yet, in order.
  [[nodiscard]] const std::deque<proto::Task>& queued() const noexcept { return queued_; }
  // Pipe bytes of the frames of queued().
  [[nodiscard]] std::size_t queued_bytes() const noexcept { return queued_bytes_; }
  // Tasks it finished (replies to its running task), for fanout.max_minibatches_per_worker.
  [[nodiscard]] std::uint64_t finished() const noexcept { return finished_; }
  // Replies still due for tasks forgotten by forget_tasks().
  [[nodiscard]] std::uint32_t stale() const noexcept { return stale_; }
  // When a Stopping worker gets SIGKILL (none once killed()).
  [[nodiscard]] const std::optional<Clock::time_point>& kill_at() const noexcept {
    return kill_at_;
  }
  // Why the worker failed to start: its L frame's text or a load timeout. Empty otherwise.
  [[nodiscard]] const std::string& fail_status() const noexcept { return fail_status_; }
  // The bound its task overran, when the pool stopped it for that (time_out()).
  [[nodiscard]] const std::optional<StopCause>& stop_cause() const noexcept { return stop_cause_; }

  // The worker said it is ready: Starting becomes Idle (other states are kept).
  void ready() noexcept;
  // Hands `task` to an Idle worker, which becomes Busy; its clocks start at `now`.
  void start(proto::Task task, Clock::time_point now);
  // Queues `task` behind the running one. Precondition: a task is running.
  void enqueue(proto::Task task);
  // The reply to the running task arrived. The first queued task starts at `now`; with none
  // queued a Busy worker becomes Idle. Precondition: a task is running.
  void finish(Clock::time_point now);
  // A reply to a task the worker does not run arrived: one of the replies still due is counted
  // off (Busy becomes Idle after the last), or, with none due and nothing queued, a confused
  // worker's running task is dropped unreported.
  void unmatched_reply() noexcept;
  // The S or E marker of `task_id`; a marker of another task changes nothing.
  void run_started(std::uint64_t task_id, Clock::time_point now) noexcept;
  void run_ended(std::uint64_t task_id, Clock::time_point now) noexcept;
  // Forgets the running and queued tasks (re-registration: the interchange requeued them); their
  // replies are still due and are counted off by unmatched_reply(). The state is kept.
  void forget_tasks() noexcept;
  // Takes the queued tasks out (they never started).
  [[nodiscard]] std::deque<proto::Task> take_queued();
  // The job was dropped: forgets its tasks, unreported, and stops with SIGKILL due at `kill_at`.
  // Returns true when a task was running (the worker must get SIGTERM), false when it was not
  // (a Q frame is enough).
  bool cancel(Clock::time_point kill_at) noexcept;
  // Stops a worker that is not needed (it was sent Q); SIGKILL due at `kill_at`.
  void retire(Clock::time_point kill_at) noexcept;
  // The running task overran a bound (`why`, kept as stop_cause()): the worker was sent SIGTERM
  // and keeps its task, reported when it is gone; SIGKILL due at `kill_at`.
  void time_out(StopCause why, Clock::time_point kill_at);
  // The worker cannot serve: `text` (an L frame's text, or a load timeout) is kept as
  // fail_status().
  void load_failed(std::string text);
  // The worker got SIGKILL: no kill deadline is left.
  void killed() noexcept { kill_at_.reset(); }

 private:
  void begin(Clock::time_point now);

  State state_ = State::Starting;
  std::optional<proto::Task> task_{};
  TaskClock clock_{};
  std::deque<proto::Task> queued_{};
  std::size_t queued_bytes_ = 0;
  std::uint64_t finished_ = 0;
  std::uint32_t stale_ = 0;
  std::optional<Clock::time_point> kill_at_{};
  std::string fail_status_{};
  std::optional<StopCause> stop_cause_{};
};

// Bytes of the pipe frame that carries `task` to a worker.
[[nodiscard]] std::size_t task_frame_bytes(const proto::Task& task) noexcept;

}  // namespace fanout::pool
