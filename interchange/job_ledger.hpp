// The live jobs of the interchange and their attempts in flight: submission, results, retries,
// the thresholds, ParallelRunStep's job-level timeouts and a job's end. Decides without doing
// I/O; the wiring (interchange.cpp) writes the store and tells pools and clients.
// See docs/architecture.md and docs/store.md (jobs, minibatches, attempts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fanout/protocol/job_state.hpp"
#include "fanout/protocol/messages.hpp"
#include "fanout/store/task_store.hpp"
#include "fanout/util/clock.hpp"

namespace fanout::ix {

// A mini-batch waiting for a pool. `attempt` is the 1-based try it will run as (the only count
// of tries here: Task::attempt carries it to the pool unchanged).
struct Pending {
  proto::MiniBatch mb{};
  std::uint32_t attempt = 1;
};

// An attempt sent to a pool: the task as the pool got it, and that pool's id.
struct InFlight {
  std::uint64_t pool_id = 0;
  proto::Task task{};
};

struct Job {
  std::uint64_t id = 0;
  proto::JobSpec spec{};
  proto::JobState state = proto::JobState::Running;
  bool submit_done = false;
  std::uint64_t total = 0;  // known mini-batches
  std::uint64_t succeeded = 0, failed = 0, items_succeeded = 0, items_failed = 0;
  std::uint64_t attempts_failed = 0;
  std::uint64_t in_flight = 0;
  std::deque<Pending> ready{};  // retries at the front, so a long queue does not starve them
  // For ParallelRunStep's job-level timeouts (JobSpec::*_timeout_s).
  Clock::time_point accepted_at{};       // accepted, or resumed by this process
  Clock::time_point last_finished_at{};  // an attempt of this job last finished (or accepted_at)
  bool dispatched = false;               // a task of this job was sent to a pool
  double started = 0;  // Unix seconds; 0 when resumed after a restart (not known here)
  // Fail fast on init(): set when a mini-batch used its last try on a failed worker start
  // (LOAD_EXCEPTION) while no mini-batch of the job has succeeded and no attempt failed any other
  // way, i.e. init() fails wherever it runs. Holds that error's first line; verdict() fails the
  // job with it instead of spending every other mini-batch's tries on the same error.
  bool other_failures = false;  // an attempt failed other than by LOAD_EXCEPTION
  std::string init_failure{};
};

// How a job ends, once decided.
struct Verdict {
  proto::JobState state = proto::JobState::Failed;
  std::string reason{};
};

// The mini-batch state the store records with an attempt (minibatches.state).
enum class BatchState : std::uint8_t { Pending, Succeeded, Failed };
[[nodiscard]] const char* to_store(BatchState s) noexcept;

// A result from a pool, judged.
struct Completion {
  bool ours = false;   // false: a late result (the task was taken back or its job ended); drop it
  Job* job = nullptr;  // the live job it belongs to; null with `ours` only if the job is gone
  BatchState batch = BatchState::Pending;
  bool gave_up = false;  // a failed attempt that was the mini-batch's last try
};

// An attempt the interchange ended itself (its pool was lost, or its job ended), as the store
// records it. result.task_id is the task id the pool held.
struct EndedAttempt {
  std::uint64_t pool_id = 0;
  proto::TaskResult result{};
  BatchState batch = BatchState::Pending;
  bool gave_up = false;
};

// Not thread-safe: owned and used only by the interchange poll loop. Job references stay valid
// until end() removes the job.
class JobLedger final {
 public:
  using Jobs = std::map<std::uint64_t, Job>;  // by id: ascending is oldest first

  // `first_job_id`, `first_task_id`: the next ids to hand out (above every id in the store).
  JobLedger(std::uint64_t first_job_id, std::uint64_t first_task_id)
      : next_job_id_(first_job_id), next_task_id_(first_task_id) {}
  JobLedger(const JobLedger&) = delete;
  JobLedger& operator=(const JobLedger&) = delete;

  // A new job, with the next job id.
  Job& accept(proto::JobSpec spec, Clock::time_point now, double now_unix);
  // A job the store recorded unfinished, with its remaining mini-batches queued in input order.
  Job& resume(store::UnfinishedJob u, Clock::time_point now);

  // `fanout resume --failed` on a job that still runs (ReopenJob): the mini-batches the store
  // reopened (`u.remaining`, tries used in `u.remaining_tries`) go back to its queue, and its
  // failed counts become the store's.
  void reopen(Job& job, store::UnfinishedJob u);

  [[nodiscard]] Job* find(std::uint64_t job_id);
  [[nodiscard]] Jobs& jobs() noexcept { return jobs_; }
  [[nodiscard]] const Jobs& jobs() const noexcept { return jobs_; }
  [[nodiscard]] bool empty() const noexcept { return jobs_.empty(); }

  // SubmitTasks: mini-batches are accepted in input order only (index == the count known), so a
  // resumed client's duplicates and gaps are dropped, never recorded twice. Moves the accepted
  // ones to `accepted` (cleared first) and returns how many were dropped. A job whose input is
  // complete drops them all.
  std::uint64_t submit(Job& job, std::vector<proto::MiniBatch>& batches,
                       std::vector<proto::MiniBatch>& accepted);
  // The mini-batches of `accepted` (just taken by submit()) that the client refused to list as
  // inputs (MiniBatch::refused): each is failed at once as an INPUT_UNREADABLE attempt with a new
  // task id, its message the client's, never retried, counted like any failed mini-batch (the
  // thresholds see it). Returns them for the store, in index order.
  std::vector<EndedAttempt> refuse_unreadable(Job& job,
                                              const std::vector<proto::MiniBatch>& accepted,
                                              double now_unix);
  enum class InputEnd : std::uint8_t {
    Repeated,  // SubmitEnd was already taken: ignore
    Missing,   // `total` is more than the mini-batches known: some were lost on the way
    Complete,  // the input is complete; look for a verdict
  };
  InputEnd submit_end(Job& job, std::uint64_t total);

  // Moves up to `n` ready tasks of `job` to `out` as attempts held by `pool_id`, each with a new
  // task id. The caller sends them and then calls sent(), or untake() if they were not queued.
  void take(Job& job, std::size_t n, std::uint64_t pool_id, std::vector<proto::Task>& out);
  // `n` of `job`'s taken tasks were queued to a pool.
  static void sent(Job& job, std::size_t n) noexcept;
  // Puts taken tasks back at the front of their queues, in order, with no try used.
  void untake(const std::vector<proto::Task>& tasks);

  // A pool's result for a task: success, or a failed try that is retried (back at the front of
  // its job's queue) or, out of tries, a failed mini-batch. Sets r.attempt and r.items from the
  // task sent. A result from another pool than the task's, or for a task not in flight, is late.
  Completion complete(std::uint64_t pool_id, proto::TaskResult& r, Clock::time_point now);

  // The attempts in `task_ids` were lost with their pool: each is recorded `status` under its
  // own task id and retried like a failed try. `touched` gets the live jobs concerned (once).
  std::vector<EndedAttempt> lose(const std::vector<std::uint64_t>& task_ids,
                                 proto::AttemptStatus status, const std::string& why,
                                 double now_unix, std::vector<std::uint64_t>& touched);
  // The attempts in `task_ids` were handed back by a pool that left on its own (PoolLeaving):
  // never started, or stopped by the pool itself. Each goes back to the front of its job's queue
  // as the same try, with no attempt recorded and no try used. Returns the ids that were live
  // (no attempt will have them: the try gets a new id when it is taken again).
  std::vector<std::uint64_t> hand_back(const std::vector<std::uint64_t>& task_ids);
  // The id the next task taken gets.
  [[nodiscard]] std::uint64_t next_task_id() const noexcept { return next_task_id_; }

  // The thresholds, then completion: error_threshold (failed items), mini_batch_error_threshold
  // (failed mini-batches), allowed_failed_percent (a share of the whole input, so only once it
  // is all submitted; 100 or -1 ignores it); a job whose input is complete and all finished
  // succeeded. nullopt: it keeps running.
  [[nodiscard]] static std::optional<Verdict> verdict(const Job& job);
  // Jobs past first_task_creation_timeout (no task sent since accepted) or
  // progress_update_timeout (no attempt finished for that long).
  [[nodiscard]] std::vector<std::pair<std::uint64_t, Verdict>> timed_out(
      Clock::time_point now) const;

  // Ends a live job: every attempt still in flight becomes a CANCELLED attempt, ascending by
  // task id, and the job is removed from the ledger and returned with state and counters final.
  struct Ended {
    Job job{};
    std::vector<EndedAttempt> stopped{};
  };
  Ended end(std::uint64_t job_id, const Verdict& v, double now_unix);

 private:
  // A failed try of `task`: requeued with the next attempt (Pending), or out of tries (Failed);
  // Failed at once when `retry` is false.
  BatchState fail(Job& job, proto::Task&& task, bool retry = true);

  Jobs jobs_{};
  std::unordered_map<std::uint64_t, InFlight> in_flight_{};  // by task id
  std::uint64_t next_job_id_ = 1;
  std::uint64_t next_task_id_ = 1;
};

}  // namespace fanout::ix
