// The job ledger. See job_ledger.hpp.
#include "interchange/job_ledger.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "fanout/protocol/error_categories.hpp"

namespace fanout::ix {

namespace {

using proto::AttemptStatus;
using proto::JobState;

proto::MiniBatch to_minibatch(proto::Task&& t) {
  return proto::MiniBatch{t.index, std::move(t.items), std::move(t.detail)};
}

}  // namespace

const char* to_store(BatchState s) noexcept {
  switch (s) {
    case BatchState::Pending:
      return "pending";
    case BatchState::Succeeded:
      return "succeeded";
    case BatchState::Failed:
      return "failed";
  }
  return "pending";
}

Job& JobLedger::accept(proto::JobSpec spec, Clock::time_point now, double now_unix) {
  Job job;
  job.id = next_job_id_++;
  job.spec = std::move(spec);
  job.accepted_at = now;
  job.last_finished_at = now;
  job.started = now_unix;
  auto id = job.id;
  return jobs_.emplace(id, std::move(job)).first->second;
}

Job& JobLedger::resume(store::UnfinishedJob u, Clock::time_point now) {
  Job job;
  job.id = u.job_id;
  job.spec = std::move(u.spec);
  job.submit_done = u.submit_done;
  job.total = u.total;
  job.succeeded = u.succeeded;
  job.failed = u.failed;
  job.items_succeeded = u.items_succeeded;
  job.items_failed = u.items_failed;
  job.attempts_failed = u.attempts_failed;
  // Before SubmitEnd the store's total is 0: the known mini-batches are those recorded, which
  // are a prefix of the input (the client resumes submitting from there).
  if (!job.submit_done) job.total = u.succeeded + u.failed + u.remaining.size();
  job.accepted_at = now;
  job.last_finished_at = now;
  for (std::size_t i = 0; i < u.remaining.size(); ++i) {
    // The store counts the tries already used; the next one is that plus one.
    const std::uint32_t used = i < u.remaining_tries.size() ? u.remaining_tries[i] : 0;
    job.ready.push_back(Pending{std::move(u.remaining[i]), used + 1});
  }
  if (job.id >= next_job_id_) next_job_id_ = job.id + 1;
  auto id = job.id;
  return jobs_.emplace(id, std::move(job)).first->second;
}

void JobLedger::reopen(Job& job, store::UnfinishedJob u) {
  job.failed = u.failed;
  job.items_failed = u.items_failed;
  for (std::size_t i = 0; i < u.remaining.size(); ++i) {
    const std::uint32_t used = i < u.remaining_tries.size() ? u.remaining_tries[i] : 0;
    job.ready.push_back(Pending{std::move(u.remaining[i]), used + 1});
  }
}

Job* JobLedger::find(std::uint64_t job_id) {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second;
}

std::uint64_t JobLedger::submit(Job& job, std::vector<proto::MiniBatch>& batches,
                                std::vector<proto::MiniBatch>& accepted) {
  accepted.clear();
  if (job.submit_done) return batches.size();
  std::uint64_t dropped = 0;
  accepted.reserve(batches.size());
  for (auto& mb : batches) {
    if (mb.index != job.total) {
      ++dropped;
      continue;
    }
    ++job.total;
    // What the client could not list as an input never goes to a pool (refuse_unreadable()).
    if (mb.refused.empty()) job.ready.push_back(Pending{mb, 1});
    accepted.push_back(std::move(mb));
  }
  return dropped;
}

std::vector<EndedAttempt> JobLedger::refuse_unreadable(
    Job& job, const std::vector<proto::MiniBatch>& accepted, double now_unix) {
  std::vector<EndedAttempt> out;
  for (const auto& mb : accepted) {
    if (mb.refused.empty()) continue;
    proto::Task task{.task_id = next_task_id_++,
                     .job_id = job.id,
                     .index = mb.index,
                     .attempt = 1,
                     .items = mb.items,
                     .detail = {}};
    EndedAttempt a;
    a.result = proto::failed_result(task, AttemptStatus::RunException,
                                    std::string(proto::kInputUnreadableCategory), mb.refused);
    a.result.start = now_unix;
    a.batch = fail(job, std::move(task), false);
    a.gave_up = true;
    out.push_back(std::move(a));
  }
  return out;
}

JobLedger::InputEnd JobLedger::submit_end(Job& job, std::uint64_t total) {
  if (job.submit_done) return InputEnd::Repeated;
  // Fewer known than the client sent (an interchange restart while submitting): it resubmits
  // the rest and sends SubmitEnd again.
  if (total != job.total) return InputEnd::Missing;
  job.submit_done = true;
  return InputEnd::Complete;
}

void JobLedger::take(Job& job, std::size_t n, std::uint64_t pool_id,
                     std::vector<proto::Task>& out) {
  for (std::size_t i = 0; i < n && !job.ready.empty(); ++i) {
    Pending& p = job.ready.front();
    proto::Task t;
    t.task_id = next_task_id_++;
    t.job_id = job.id;
    t.index = p.mb.index;
    t.attempt = p.attempt;
    t.items = std::move(p.mb.items);
    t.detail = std::move(p.mb.detail);
    job.ready.pop_front();
    // The pool gets a copy; the ledger keeps the task to retry it.
    out.push_back(t);
    in_flight_.emplace(t.task_id, InFlight{pool_id, std::move(t)});
  }
}

void JobLedger::sent(Job& job, std::size_t n) noexcept {
  job.in_flight += n;
  job.dispatched = true;
}

void JobLedger::untake(const std::vector<proto::Task>& tasks) {
  for (auto it = tasks.rbegin(); it != tasks.rend(); ++it) {
    auto fl = in_flight_.find(it->task_id);
    if (fl == in_flight_.end()) continue;
    const std::uint32_t attempt = fl->second.task.attempt;
    if (Job* job = find(it->job_id)) {
      job->ready.push_front(Pending{to_minibatch(std::move(fl->second.task)), attempt});
    }
    in_flight_.erase(fl);
  }
}

BatchState JobLedger::fail(Job& job, proto::Task&& task, bool retry) {
  ++job.attempts_failed;
  if (retry && task.attempt < job.spec.max_tries) {
    const std::uint32_t next = task.attempt + 1;
    job.ready.push_front(Pending{to_minibatch(std::move(task)), next});
    return BatchState::Pending;
  }
  ++job.failed;
  job.items_failed += task.items.size();
  return BatchState::Failed;
}

Completion JobLedger::complete(std::uint64_t pool_id, proto::TaskResult& r, Clock::time_point now) {
  Completion c;
  auto fl_it = in_flight_.find(r.task_id);
  if (fl_it == in_flight_.end() || fl_it->second.pool_id != pool_id ||
      fl_it->second.task.job_id != r.job_id || fl_it->second.task.index != r.index) {
    // Taken back after its pool was declared lost, or the job ended: never written twice.
    return c;
  }
  c.ours = true;
  proto::Task task = std::move(fl_it->second.task);
  in_flight_.erase(fl_it);
  auto job_it = jobs_.find(task.job_id);
  if (job_it == jobs_.end()) return c;
  Job& job = job_it->second;
  c.job = &job;
  --job.in_flight;
  job.last_finished_at = now;
  r.attempt = task.attempt;
  r.items = task.items.size();
  if (r.status == static_cast<std::uint8_t>(AttemptStatus::RunDone)) {
    ++job.succeeded;
    job.items_succeeded += r.succeeded;
    job.items_failed += r.failed;
    c.batch = BatchState::Succeeded;
    return c;
  }
  const std::uint64_t index = task.index;
  // A mini-batch whose input changed since it was listed reads the same changed file on every
  // try: it fails now instead of using its tries (docs/worker-pipe.md, "Changed input").
  c.batch = fail(job, std::move(task), r.error_category != proto::kInputChangedCategory);
  c.gave_up = c.batch == BatchState::Failed;
  if (r.status != static_cast<std::uint8_t>(AttemptStatus::LoadException)) {
    job.other_failures = true;
  } else if (c.gave_up && job.succeeded == 0 && !job.other_failures && job.init_failure.empty()) {
    std::string_view first = r.error_message;
    first = first.substr(0, first.find('\n'));
    job.init_failure = fmt::format(
        "init() failed on every worker start: mini-batch {} used its {} tries and none "
        "succeeded: {}",
        index, job.spec.max_tries, first.substr(0, 300));
  }
  return c;
}

std::vector<EndedAttempt> JobLedger::lose(const std::vector<std::uint64_t>& task_ids,
                                          AttemptStatus status, const std::string& why,
                                          double now_unix, std::vector<std::uint64_t>& touched) {
  std::vector<EndedAttempt> out;
  touched.clear();
  // Newest first: each retry goes to the front of its queue, so the oldest ends up in front.
  for (auto tid = task_ids.rbegin(); tid != task_ids.rend(); ++tid) {
    auto fl_it = in_flight_.find(*tid);
    if (fl_it == in_flight_.end()) continue;
    InFlight fl = std::move(fl_it->second);
    in_flight_.erase(fl_it);
    auto job_it = jobs_.find(fl.task.job_id);
    if (job_it == jobs_.end()) continue;
    Job& job = job_it->second;
    EndedAttempt a;
    a.pool_id = fl.pool_id;
    // Recorded under the task id the pool held (attempts.id); a retry gets a new one.
    a.result = proto::failed_result(fl.task, status, std::string(proto::to_string(status)), why);
    a.result.start = now_unix;
    --job.in_flight;
    a.batch = fail(job, std::move(fl.task));
    a.gave_up = a.batch == BatchState::Failed;
    out.push_back(std::move(a));
    if (std::find(touched.begin(), touched.end(), job.id) == touched.end()) {
      touched.push_back(job.id);
    }
  }
  return out;
}

std::vector<std::uint64_t> JobLedger::hand_back(const std::vector<std::uint64_t>& task_ids) {
  std::vector<std::uint64_t> out;
  // Newest first, each to the front: the oldest ends up in front.
  for (auto tid = task_ids.rbegin(); tid != task_ids.rend(); ++tid) {
    auto fl = in_flight_.find(*tid);
    if (fl == in_flight_.end()) continue;
    if (Job* job = find(fl->second.task.job_id)) {
      const std::uint32_t attempt = fl->second.task.attempt;
      job->ready.push_front(Pending{to_minibatch(std::move(fl->second.task)), attempt});
      --job->in_flight;
      out.push_back(*tid);
    }
    in_flight_.erase(fl);
  }
  return out;
}

std::optional<Verdict> JobLedger::verdict(const Job& job) {
  if (proto::is_ended(job.state)) return std::nullopt;
  if (!job.init_failure.empty()) return Verdict{JobState::Failed, job.init_failure};
  const auto& s = job.spec;
  if (s.error_threshold >= 0 && job.items_failed > static_cast<std::uint64_t>(s.error_threshold)) {
    return Verdict{JobState::Failed, fmt::format("error_threshold exceeded: {} failed items > {}",
                                                 job.items_failed, s.error_threshold)};
  }
  if (s.mini_batch_error_threshold >= 0 &&
      job.failed > static_cast<std::uint64_t>(s.mini_batch_error_threshold)) {
    return Verdict{JobState::Failed,
                   fmt::format("mini_batch_error_threshold exceeded: {} failed mini-batches > {}",
                               job.failed, s.mini_batch_error_threshold)};
  }
  // allowed_failed_percent is a share of the whole job, known once every mini-batch is
  // submitted; from then on failures only add up, so crossing it ends the job at once.
  if (job.submit_done && job.total > 0 && s.allowed_failed_percent >= 0 &&
      s.allowed_failed_percent < 100) {
    const double pct = 100.0 * static_cast<double>(job.failed) / static_cast<double>(job.total);
    if (pct > s.allowed_failed_percent) {
      return Verdict{
          JobState::Failed,
          fmt::format("allowed_failed_percent exceeded: {:.1f}% of mini-batches failed > {}%", pct,
                      s.allowed_failed_percent)};
    }
  }
  // Within the thresholds: done once the whole input is known and every mini-batch finished.
  if (!job.submit_done || job.succeeded + job.failed < job.total) return std::nullopt;
  // Failed mini-batches within the thresholds: ParallelRunStep's success, recorded as partial.
  if (job.failed == 0) return Verdict{JobState::Succeeded, "all mini-batches succeeded"};
  return Verdict{
      JobState::Partial,
      fmt::format("{} of {} mini-batches failed, within the thresholds", job.failed, job.total)};
}

std::vector<std::pair<std::uint64_t, Verdict>> JobLedger::timed_out(Clock::time_point now) const {
  using Secs = std::chrono::duration<double>;
  std::vector<std::pair<std::uint64_t, Verdict>> expired;
  for (const auto& [id, job] : jobs_) {
    const auto& s = job.spec;
    // ParallelRunStep's first_task_creation_timeout: the job never got a mini-batch started
    // (no pool, or no input submitted).
    if (!job.dispatched && s.first_task_creation_timeout_s > 0 &&
        now - job.accepted_at > Secs(s.first_task_creation_timeout_s)) {
      expired.emplace_back(
          id, Verdict{JobState::Failed, fmt::format("first_task_creation_timeout exceeded: no "
                                                    "mini-batch started within {} s",
                                                    s.first_task_creation_timeout_s)});
      continue;
    }
    // progress_update_timeout: no attempt of the job finished (succeeded or failed) for that
    // long. A hung job, or one whose client stopped submitting, ends instead of waiting forever.
    if (s.progress_update_timeout_s > 0 &&
        now - job.last_finished_at > Secs(s.progress_update_timeout_s)) {
      expired.emplace_back(
          id, Verdict{JobState::Failed, fmt::format("progress_update_timeout exceeded: no "
                                                    "mini-batch finished for {} s",
                                                    s.progress_update_timeout_s)});
    }
  }
  return expired;
}

JobLedger::Ended JobLedger::end(std::uint64_t job_id, const Verdict& v, double now_unix) {
  Ended out;
  auto job_it = jobs_.find(job_id);
  if (job_it == jobs_.end()) return out;
  Job& job = job_it->second;
  job.state = v.state;
  // Attempts still in pools are stopped: each is recorded CANCELLED now under its own task id;
  // a result that still arrives is late.
  std::vector<std::pair<std::uint64_t, InFlight>> stopped;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (it->second.task.job_id == job_id) {
      stopped.emplace_back(it->first, std::move(it->second));
      it = in_flight_.erase(it);
    } else {
      ++it;
    }
  }
  std::sort(stopped.begin(), stopped.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::string message =
      fmt::format("stopped: the job {}: {}", proto::to_string(v.state), v.reason);
  out.stopped.reserve(stopped.size());
  for (auto& [task_id, fl] : stopped) {
    EndedAttempt a;
    a.pool_id = fl.pool_id;
    a.result = proto::failed_result(fl.task, AttemptStatus::Cancelled, "CANCELLED", message);
    a.result.start = now_unix;
    out.stopped.push_back(std::move(a));
  }
  // A CANCELLED attempt is a failed one, as the store (status != RUN_DONE) and job_result.txt
  // count it: one definition for the console and the report.
  job.attempts_failed += out.stopped.size();
  job.in_flight = 0;
  job.ready.clear();
  out.job = std::move(job);
  jobs_.erase(job_it);
  return out;
}

}  // namespace fanout::ix
