// The pool's decisions. See pool_planner.hpp.
#include "pool/pool_planner.hpp"

#include <algorithm>
#include <utility>

namespace fanout::pool {

namespace {

bool has_job(const std::deque<proto::Task>& queue, std::uint64_t job_id) {
  return std::any_of(queue.begin(), queue.end(),
                     [&](const proto::Task& t) { return t.job_id == job_id; });
}

}  // namespace

PoolPlanner::PoolPlanner(PlannerConfig config) : config_(config) {}

void PoolPlanner::job_known(std::uint64_t job_id) { jobs_.insert(job_id); }

std::size_t PoolPlanner::job_dropped(std::uint64_t job_id) {
  const auto before = queue_.size();
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                              [&](const proto::Task& t) { return t.job_id == job_id; }),
               queue_.end());
  jobs_.erase(job_id);
  init_failures_.erase(job_id);
  mean_task_s_.erase(job_id);  // capacity() walks it on every loop turn
  return before - queue_.size();
}

void PoolPlanner::task_arrived(proto::Task task) { queue_.push_back(std::move(task)); }

void PoolPlanner::tasks_returned(std::deque<proto::Task> tasks) {
  for (auto it = tasks.rbegin(); it != tasks.rend(); ++it) queue_.push_front(std::move(*it));
}

void PoolPlanner::worker_ready(std::uint64_t job_id) { init_failures_[job_id] = 0; }

std::vector<proto::Task> PoolPlanner::worker_init_failed(std::uint64_t job_id) {
  const bool give_up = ++init_failures_[job_id] >= 3 * config_.workers;
  std::vector<proto::Task> failed;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->job_id != job_id) {
      ++it;
      continue;
    }
    failed.push_back(std::move(*it));
    it = queue_.erase(it);
    if (!give_up) break;
  }
  return failed;
}

void PoolPlanner::task_finished(std::uint64_t job_id, double elapsed_s) {
  // A running mean of the job's task time decides whether its tasks may queue in a worker's
  // pipe (pipeline_room()) and how many tasks the pool asks for (capacity()).
  double& mean = mean_task_s_[job_id];
  mean = mean <= 0 ? elapsed_s : 0.8 * mean + 0.2 * elapsed_s;
}

std::optional<proto::Task> PoolPlanner::worker_start_failed(std::uint64_t job_id) {
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [&](const proto::Task& t) { return t.job_id == job_id; });
  if (it == queue_.end()) return std::nullopt;
  proto::Task t = std::move(*it);
  queue_.erase(it);
  return t;
}

// Tasks the pool asks for: its workers plus its prefetch, raised while a job it runs has short
// tasks (mean under kPipelineMaxTaskS) to what fills its workers' pipes twice over (the depth of
// pipeline_room()), at most kMaxAutoPrefetch. For short tasks, holding them early costs a few
// milliseconds of another pool's time at most, and saves a frame each way per task and the
// workers' wait for the round trip. Tasks under kPrefetchMaxTaskS raise it to one task per
// worker: a worker that ends its task then starts the next from the pool's queue instead of
// waiting for the interchange's round trip, and another pool waits at most one such task per
// worker for it. Longer tasks keep the configured prefetch, so that a pool does not hold work
// another pool could start (why Parsl's prefetch defaults to 0).
std::uint32_t PoolPlanner::capacity() const {
  if (draining_) return 0;
  double shortest = 0;
  for (const auto& [job_id, mean] : mean_task_s_) {
    if (mean <= 0 || mean >= kPrefetchMaxTaskS || jobs_.count(job_id) == 0) continue;
    if (shortest == 0 || mean < shortest) shortest = mean;
  }
  std::size_t extra = config_.prefetch;
  if (shortest >= kPipelineMaxTaskS) {
    extra = std::max<std::size_t>(extra, config_.workers);
  } else if (shortest > 0) {
    extra =
        std::max(extra, std::min(kMaxAutoPrefetch, 2 * config_.workers * pipeline_depth(shortest)));
  }
  return config_.workers + static_cast<std::uint32_t>(extra);
}

std::size_t PoolPlanner::pipeline_depth(double mean_task_s) {
  const double fit = kPipelineQueueS / mean_task_s;
  return fit >= static_cast<double>(kMaxPipelineDepth)
             ? kMaxPipelineDepth
             : std::max<std::size_t>(1, static_cast<std::size_t>(fit));
}

// A worker may hold more tasks in its pipe while it runs a task of a job whose tasks are short:
// there the pool's round trip between two tasks is a large share of the task, and tasks written
// several to a write() cost the pool and the worker one system call each way instead of one
// per task. It holds about kPipelineQueueS of work (at least one task, at most
// kMaxPipelineDepth), so that a task queued behind others waits little although a sibling
// worker may become free. Long tasks are never queued behind another.
std::size_t PoolPlanner::pipeline_room(const SlotView& s) const {
  if (!s.occupied || s.state != WorkerTasks::State::Busy || !s.running || s.stale > 0 ||
      s.kill_pending) {
    return 0;
  }
  auto m = mean_task_s_.find(s.job_id);
  if (m == mean_task_s_.end() || m->second <= 0 || m->second >= kPipelineMaxTaskS) return 0;
  const std::size_t depth = pipeline_depth(m->second);
  // A worker to be replaced after its max_tasks_per_worker never holds a task it would not run:
  // the tasks in its pipe are all within its count, so none is left behind when it exits.
  return std::min(depth > s.queued ? depth - s.queued : 0, tasks_left(s));
}

bool PoolPlanner::spent(const SlotView& s) const noexcept {
  return config_.max_tasks_per_worker > 0 && s.finished >= config_.max_tasks_per_worker;
}

std::size_t PoolPlanner::tasks_left(const SlotView& s) const noexcept {
  if (config_.max_tasks_per_worker == 0) return SIZE_MAX;
  const std::uint64_t given = s.finished + (s.running ? 1 : 0) + s.queued;
  return given >= config_.max_tasks_per_worker
             ? 0
             : static_cast<std::size_t>(config_.max_tasks_per_worker - given);
}

void PoolPlanner::retire_spent(std::vector<SlotView>& slots, std::vector<PoolAction>& out) const {
  for (std::size_t i = 0; i < slots.size(); ++i) {
    SlotView& s = slots[i];
    if (!s.occupied || s.state != WorkerTasks::State::Idle || !spent(s)) continue;
    s.state = WorkerTasks::State::Stopping;
    s.kill_pending = true;
    out.push_back(PoolAction{PoolAction::Kind::RetireWorker, i, s.job_id});
  }
}

std::vector<PoolAction> PoolPlanner::assign(const std::vector<SlotView>& given) {
  std::vector<PoolAction> out;
  if (draining_) return out;  // draining: what is queued is handed back
  // The walk updates its own copy of the slots as if each action succeeded.
  std::vector<SlotView> slots = given;
  // Spent workers go first, whether or not tasks wait: recycling is for memory a worker keeps.
  if (config_.max_tasks_per_worker > 0) retire_spent(slots, out);
  if (queue_.empty()) return out;
  // With no idle worker and no free slot nothing below can act on any task: stop at once
  // instead of walking the whole prefetched queue (it holds up to workers + prefetch tasks, so
  // the walk would be O(prefetch x workers) per result).
  auto can_act = [&] {
    return std::any_of(slots.begin(), slots.end(), [&](const SlotView& s) {
      return !s.occupied || s.state == WorkerTasks::State::Idle || pipeline_room(s) > 0;
    });
  };
  for (auto it = queue_.begin(); it != queue_.end() && can_act();) it = place(it, slots, out);
  return out;
}

// One task of the walk, by the first rule that applies:
// 1. its job is unknown (tasks arrive after their JobInfo): it fails, it cannot run;
// 2. an Idle worker of its job takes it (a spent one was retired at the start of assign());
// 3. a free slot gets a worker for its job, and the task is looked at again (so one task fills
//    every free slot with workers of its job: they are ready together);
// 4. short tasks only: it waits in the pipe of the busy worker of its job with the fewest
//    waiting, so that it starts the moment the current ones end instead of a pool round trip
//    later, its frames kept below the pipe's capacity (a write to a busy worker never blocks);
// 5. else it stays queued, and unless a worker of its job is starting, an Idle worker of a job
//    with nothing queued is retired (its slot is reused once it has exited).
std::deque<proto::Task>::iterator PoolPlanner::place(std::deque<proto::Task>::iterator it,
                                                     std::vector<SlotView>& slots,
                                                     std::vector<PoolAction>& out) {
  using State = WorkerTasks::State;
  const std::uint64_t job = it->job_id;
  if (jobs_.count(job) == 0) {
    out.push_back(PoolAction{PoolAction::Kind::FailTask, 0, job, std::move(*it),
                             StopCause::UnknownJob, "pool received a task for an unknown job"});
    return queue_.erase(it);
  }
  std::optional<std::size_t> idle, free_slot;
  bool starting = false;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const SlotView& s = slots[i];
    if (!s.occupied) {
      if (!free_slot) free_slot = i;
      continue;
    }
    if (s.job_id != job) continue;
    if (s.state == State::Idle && !idle) idle = i;
    if (s.state == State::Starting) starting = true;
  }
  if (idle) {
    slots[*idle].state = State::Busy;
    slots[*idle].running = true;
    out.push_back(PoolAction{PoolAction::Kind::StartTask, *idle, job, std::move(*it)});
    return queue_.erase(it);
  }
  if (free_slot) {
    slots[*free_slot] = SlotView{true, job, State::Starting};
    out.push_back(PoolAction{PoolAction::Kind::StartWorker, *free_slot, job});
    return it;
  }
  std::optional<std::size_t> shortest;
  const std::size_t bytes = task_frame_bytes(*it);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const SlotView& s = slots[i];
    if (!s.occupied || s.job_id != job || pipeline_room(s) == 0) continue;
    if (s.queued_bytes + bytes > kPipeBudgetBytes) continue;
    if (!shortest || s.queued < slots[*shortest].queued) shortest = i;
  }
  if (shortest) {
    ++slots[*shortest].queued;
    slots[*shortest].queued_bytes += bytes;
    out.push_back(PoolAction{PoolAction::Kind::EnqueueTask, *shortest, job, std::move(*it)});
    return queue_.erase(it);
  }
  if (!starting) retire_one_unwanted(slots, out);
  return ++it;
}

void PoolPlanner::retire_one_unwanted(std::vector<SlotView>& slots,
                                      std::vector<PoolAction>& out) const {
  for (std::size_t i = 0; i < slots.size(); ++i) {
    SlotView& s = slots[i];
    if (!s.occupied || s.state != WorkerTasks::State::Idle || has_job(queue_, s.job_id)) continue;
    s.state = WorkerTasks::State::Stopping;
    s.kill_pending = true;
    out.push_back(PoolAction{PoolAction::Kind::RetireWorker, i, s.job_id});
    return;
  }
}

// Results travel in batches: one frame per result would cost the pool and the interchange a
// ZeroMQ send, a wake-up and a decode each, and make every TaskBatch in return just as small.
// A result waits while the pool still holds enough queued tasks to keep its workers busy, until
// a quarter of the capacity has finished or it is `poll` old. See docs/performance.md.
bool PoolPlanner::results_due(std::size_t pending, Clock::time_point oldest,
                              Clock::time_point now) const {
  if (pending == 0) return false;
  if (pending >= std::max<std::size_t>(1, capacity() / 4)) return true;
  if (draining_ || queue_.size() < config_.workers) return true;  // running dry: credit needed
  return now - oldest >= config_.poll;
}

}  // namespace fanout::pool
