// One worker process hosting a runtime, and the pipe protocol that drives it (docs/worker-pipe.md).
// Owned by the Pool; not thread-safe.
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
  std::uint8_t status = 0;  // 0 ok, 1 run() raised, 2 bad return value
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
};

// Bytes of the pipe frame that carries `task` to a worker.
[[nodiscard]] std::size_t task_frame_bytes(const proto::Task& task) noexcept;

class Worker final {
 public:
  enum class State : std::uint8_t { Starting, Idle, Busy, Stopping, Dead };

  // Starts the process. Error{Io} when it cannot be started.
  [[nodiscard]] static Expected<Worker> start(const WorkerLaunch& launch, std::uint64_t job_id,
                                              std::string name);
  Worker(Worker&&) noexcept = default;
  Worker& operator=(Worker&&) noexcept = default;
  ~Worker() = default;

  // Writes one task to the worker's pipe. Precondition: state() is Idle.
  [[nodiscard]] Expected<void> send_task(const proto::Task& task);
  // Adds a task to `queued`: it waits in the pipe of this Busy worker and starts when the
  // current one ends. Its frame is only buffered here; flush_queued() writes every buffered
  // frame with one write(). The caller keeps queued_bytes() + task_frame_bytes(task) below the
  // pipe's capacity, so that the write never blocks on a worker busy with its current task.
  void enqueue(proto::Task task);
  // Writes the frames enqueue() buffered. Error{Io} when the worker is gone: its tasks stay in
  // `queued`, and the pool's EOF handling returns them to its queue.
  [[nodiscard]] Expected<void> flush_queued();
  // The first task of `queued`, which the worker starts now that its previous one is done.
  // Precondition: `queued` is not empty.
  [[nodiscard]] proto::Task pop_queued();
  // Forgets `queued` (and any frame still buffered).
  void clear_queued() noexcept;
  // Pipe bytes of the frames of `queued`.
  [[nodiscard]] std::size_t queued_bytes() const noexcept { return queued_bytes_; }
  // Asks the worker to call shutdown() and exit.
  void send_quit();
  // Reads what is available (non-blocking) and appends decoded events. Returns false on EOF or
  // a framing error (the worker is then gone or broken; see `broken_reason()`).
  bool read_events(std::vector<WorkerEvent>& out);
  // SIGTERM now; the caller SIGKILLs via kill_hard() once the grace period is over.
  void terminate();
  void kill_hard();

  [[nodiscard]] int read_fd() const noexcept { return from_.get(); }
  [[nodiscard]] State state() const noexcept { return state_; }
  void set_state(State s) noexcept { state_ = s; }
  [[nodiscard]] std::uint64_t job_id() const noexcept { return job_id_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::int64_t pid() const noexcept { return pid_; }
  [[nodiscard]] const std::string& broken_reason() const noexcept { return broken_; }
  ChildProcess& process() noexcept { return proc_; }

  // Starts the clocks of `task`, which the worker takes now: at hand-off to an idle worker, or
  // when the reply to the task ahead of it in the pipe arrives.
  void begin_task(Clock::time_point now);

  // The task in progress (Busy), and its timing.
  std::optional<proto::Task> task{};
  std::deque<proto::Task> queued{};  // sent after `task`, not started yet, in order; change it
                                     // only through enqueue(), pop_queued(), clear_queued()
  std::uint32_t stale = 0;           // replies still due for tasks dropped after a Reject
  double task_start_unix = 0;
  Clock::time_point task_start{};
  // The task's overhead, kept only from the S and E markers (jobs with a task overhead timeout):
  // the time outside run() since begin_task(), counted up to the start of the current phase.
  bool run_started = false;         // S seen
  bool in_run = false;              // S seen, E not yet
  Clock::time_point phase_start{};  // begin_task(), S or E, whichever came last
  Clock::duration overhead_used{};  // overhead before phase_start
  Clock::time_point started{};
  std::optional<Clock::time_point> kill_at{};  // SIGKILL deadline after a SIGTERM
  std::string fail_status{};                   // why we stopped it (timeout), if we did

 private:
  Worker() = default;
  ChildProcess proc_{};
  UniqueFd to_{};
  UniqueFd from_{};
  std::string buf_{};
  std::string out_{};  // frames buffered by enqueue()
  std::size_t queued_bytes_ = 0;
  std::uint64_t job_id_ = 0;
  std::string name_{};
  std::int64_t pid_ = 0;
  State state_ = State::Starting;
  std::string broken_{};
};

}  // namespace fanout::pool
