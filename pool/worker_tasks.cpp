// A worker's bookkeeping. See worker_tasks.hpp.
#include "pool/worker_tasks.hpp"

#include <utility>

#include "pool/wall_clock.hpp"
#include "pool/worker_pipe.hpp"

namespace fanout::pool {

std::size_t task_frame_bytes(const proto::Task& task) noexcept {
  return pipe::task_frame_bytes(task.detail.size(), task.items);
}

void WorkerTasks::ready() noexcept {
  if (state_ == State::Starting) state_ = State::Idle;
}

void WorkerTasks::begin(Clock::time_point now) {
  clock_ = TaskClock{now, local_unix_now(), false, false, now, Clock::duration::zero()};
}

void WorkerTasks::start(proto::Task task, Clock::time_point now) {
  task_ = std::move(task);
  begin(now);
  state_ = State::Busy;
}

void WorkerTasks::enqueue(proto::Task task) {
  queued_bytes_ += task_frame_bytes(task);
  queued_.push_back(std::move(task));
}

void WorkerTasks::finish(Clock::time_point now) {
  task_.reset();
  ++finished_;
  if (!queued_.empty()) {
    // The next task was already in the worker's pipe: it starts now.
    task_ = std::move(queued_.front());
    queued_.pop_front();
    const std::size_t n = task_frame_bytes(*task_);
    queued_bytes_ = queued_bytes_ > n ? queued_bytes_ - n : 0;
    begin(now);
  } else if (state_ == State::Busy) {
    state_ = State::Idle;
  }
}

void WorkerTasks::unmatched_reply() noexcept {
  if (stale_ > 0) {
    // The reply to a task forgotten after a re-registration.
    --stale_;
    if (stale_ == 0 && !task_ && state_ == State::Busy) state_ = State::Idle;
  } else if (queued_.empty()) {
    // A confused worker: whatever it ran is over, and nothing is waiting behind it.
    task_.reset();
    if (state_ == State::Busy) state_ = State::Idle;
  }
}

void WorkerTasks::run_started(std::uint64_t task_id, Clock::time_point now) noexcept {
  if (!runs(task_id)) return;  // a marker of a task forgotten after a re-registration
  clock_.overhead_used += now - clock_.phase_start;
  clock_.run_started = true;
  clock_.in_run = true;
  clock_.phase_start = now;
}

void WorkerTasks::run_ended(std::uint64_t task_id, Clock::time_point now) noexcept {
  if (!runs(task_id)) return;
  clock_.in_run = false;
  clock_.phase_start = now;
}

void WorkerTasks::forget_tasks() noexcept {
  // The worker still answers each T frame it was sent, so those replies are counted off before
  // it takes a new task.
  stale_ += static_cast<std::uint32_t>((task_ ? 1 : 0) + queued_.size());
  task_.reset();
  queued_.clear();
  queued_bytes_ = 0;
}

std::deque<proto::Task> WorkerTasks::take_queued() {
  queued_bytes_ = 0;
  return std::exchange(queued_, {});
}

bool WorkerTasks::cancel(Clock::time_point kill_at) noexcept {
  queued_.clear();
  queued_bytes_ = 0;
  const bool running = task_.has_value();
  task_.reset();
  state_ = State::Stopping;
  kill_at_ = kill_at;
  return running;
}

void WorkerTasks::retire(Clock::time_point kill_at) noexcept {
  state_ = State::Stopping;
  kill_at_ = kill_at;
}

void WorkerTasks::time_out(StopCause why, Clock::time_point kill_at) {
  stop_cause_ = why;
  state_ = State::Stopping;
  kill_at_ = kill_at;
}

void WorkerTasks::load_failed(std::string text) { fail_status_ = std::move(text); }

}  // namespace fanout::pool
