// One worker process hosting a runtime, driven over the worker pipe (pool/worker_pipe.hpp,
// docs/worker-pipe.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "fanout/protocol/messages.hpp"
#include "fanout/util/child_process.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/fd.hpp"
#include "pool/worker_pipe.hpp"
#include "pool/worker_tasks.hpp"

namespace fanout::pool {

// What a worker said, decoded from its pipe.
struct WorkerEvent {
  // RunStarted / RunEnded: the S and E markers around run(), sent only by a worker started with
  // FANOUT_RUN_MARKERS=1 (jobs with a task overhead timeout).
  enum class Kind : std::uint8_t { Ready, LoadError, Done, RunStarted, RunEnded };
  Kind kind = Kind::Ready;
  std::string text{};  // Ready: "<pid> <version>"; LoadError: category line + traceback
  // Done, RunStarted, RunEnded:
  std::uint64_t task_id = 0;
  // Done:
  pipe::DoneStatus status = pipe::DoneStatus::Ok;
  std::uint64_t n_result = 0;
  std::string output{};
  std::string error{};
  double run_s = 0;
  double cpu_s = 0;
};

// How to start a worker for one job.
struct WorkerLaunch {
  std::vector<std::string> argv{};
  std::vector<std::pair<std::string, std::string>> env{};
  std::string cwd{};
  std::string stdout_file{};
  std::string stderr_file{};
  std::vector<int> cpus{};  // pinned to these CPUs (docs/resources.md); empty: not pinned
};

// One worker process and its pipe. The pool drives it through the methods below, each of which
// writes the frames or sends the signals a change of its WorkerTasks calls for. Owned by the Pool;
// not thread-safe.
class Worker final {
 public:
  using State = WorkerTasks::State;

  // Starts the process. Error{Io} when it cannot be started.
  [[nodiscard]] static Expected<Worker> start(const WorkerLaunch& launch, std::uint64_t job_id,
                                              std::string name);
  Worker(Worker&&) noexcept = default;
  Worker& operator=(Worker&&) noexcept = default;
  ~Worker() = default;

  // Writes `task` to the worker's pipe and makes it the running task, its clocks started at
  // `now`. Precondition: state() is Idle. Error{Io} when the worker is gone; `task` is then not
  // moved from.
  [[nodiscard]] Expected<void> start_task(proto::Task&& task, Clock::time_point now);
  // Queues `task` in the pipe of this Busy worker: it starts when the current one ends. Its
  // frame is only buffered here; flush_queued() writes every buffered frame with one write().
  // The caller keeps queued_bytes() + task_frame_bytes(task) below the pipe's capacity, so that
  // the write never blocks on a worker busy with its current task.
  void enqueue(proto::Task task);
  // Writes the frames enqueue() buffered. Error{Io} when the worker is gone: its tasks stay
  // queued, and the pool's EOF handling returns them to its queue.
  [[nodiscard]] Expected<void> flush_queued();
  // The reply to the running task arrived (see WorkerTasks::finish).
  void finish_task(Clock::time_point now) { tasks_.finish(now); }
  // A reply to a task it does not run arrived (see WorkerTasks::unmatched_reply).
  void unmatched_reply() noexcept { tasks_.unmatched_reply(); }
  // An S or E marker arrived (see WorkerTasks::run_started).
  void run_started(std::uint64_t task_id, Clock::time_point now) noexcept {
    tasks_.run_started(task_id, now);
  }
  void run_ended(std::uint64_t task_id, Clock::time_point now) noexcept {
    tasks_.run_ended(task_id, now);
  }
  // An R frame arrived: Starting becomes Idle.
  void ready() noexcept { tasks_.ready(); }
  // An L frame arrived; `text` explains the exit that follows.
  void load_failed(std::string text) { tasks_.load_failed(std::move(text)); }
  // Forgets its tasks (and any frame still buffered); their replies are counted off as they
  // come (see WorkerTasks::forget_tasks).
  void forget_tasks() noexcept;
  // Takes out the queued tasks, which never started (the worker is gone).
  [[nodiscard]] std::deque<proto::Task> take_queued();
  // Its job was dropped: forgets its tasks unreported, then SIGTERM if it was running one, else a
  // Q frame; SIGKILL is due at `kill_at`.
  void cancel(Clock::time_point kill_at);
  // Not needed any more: a Q frame; SIGKILL is due at `kill_at`.
  void retire(Clock::time_point kill_at);
  // Its task overran a bound named `why`: SIGTERM now, SIGKILL due at `kill_at`; the task stays,
  // to be reported once the worker is gone.
  void time_out(StopCause why, Clock::time_point kill_at);
  // Its process group passed the memory limit (`note` says by how much): SIGKILL now. A worker
  // still starting fails its start with "OUT_OF_MEMORY: <note>"; a running task stays, to be
  // reported (StopCause::OutOfMemory, memory_note()) once the worker is gone.
  void stop_for_memory(std::string note, Clock::time_point now);
  // init() did not finish in time: SIGKILL now, with `why` kept as fail_status().
  void abort_start(std::string why);
  // Asks the worker to call shutdown() and exit (a Q frame, then the request pipe is closed).
  void send_quit();
  // SIGKILL now; no kill deadline is left.
  void kill_hard();
  // Reads what is available (non-blocking) and appends decoded events. Returns false on EOF or
  // a framing error (the worker is then gone or broken; see `broken_reason()`).
  bool read_events(std::vector<WorkerEvent>& out);

  [[nodiscard]] const WorkerTasks& tasks() const noexcept { return tasks_; }
  [[nodiscard]] State state() const noexcept { return tasks_.state(); }
  [[nodiscard]] std::size_t queued_bytes() const noexcept { return tasks_.queued_bytes(); }
  [[nodiscard]] int read_fd() const noexcept { return from_.get(); }
  [[nodiscard]] std::uint64_t job_id() const noexcept { return job_id_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::int64_t pid() const noexcept { return pid_; }
  [[nodiscard]] Clock::time_point started() const noexcept { return started_; }
  [[nodiscard]] const std::string& broken_reason() const noexcept { return broken_; }
  // What stop_for_memory() said; empty otherwise.
  [[nodiscard]] const std::string& memory_note() const noexcept { return memory_note_; }
  ChildProcess& process() noexcept { return proc_; }

 private:
  Worker() = default;
  ChildProcess proc_{};
  UniqueFd to_{};
  UniqueFd from_{};
  std::string buf_{};
  std::string out_{};  // frames buffered by enqueue()
  WorkerTasks tasks_{};
  std::uint64_t job_id_ = 0;
  std::string name_{};
  std::int64_t pid_ = 0;
  Clock::time_point started_{};
  std::string broken_{};
  std::string memory_note_{};
};

}  // namespace fanout::pool
