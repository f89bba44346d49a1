// The writer's counts of each job's rows (job_tallies). See tallies.hpp.
#include "fanout/store/detail/tallies.hpp"

#include <algorithm>
#include <limits>
#include <string_view>

namespace fanout::store::detail {

namespace {

// A row this far past a job's highest known index is not tracked (the job is counted in full
// whenever it is touched), so that a sparse index cannot make the model large.
constexpr std::uint64_t kMaxIndexGap = std::uint64_t{1} << 20;

std::uint32_t clamp_items(std::uint64_t items) {
  return static_cast<std::uint32_t>(
      std::min<std::uint64_t>(items, std::numeric_limits<std::uint32_t>::max()));
}

}  // namespace

RowState row_state(std::string_view s) {
  if (s == "pending") return RowState::Pending;
  if (s == "running") return RowState::Running;
  if (s == "succeeded") return RowState::Succeeded;
  if (s == "failed") return RowState::Failed;
  return RowState::Other;
}

void recount_tallies(Db& db, std::uint64_t job_id) {
  // The same count as the migration that created job_tallies.
  Statement st(db, R"sql(
INSERT OR REPLACE INTO job_tallies (job_id, submitted, pending, running, succeeded, failed,
                                   items_succeeded, items_failed, attempts, attempts_failed)
SELECT ?1, count(*), coalesce(sum(state = 'pending'), 0), coalesce(sum(state = 'running'), 0),
       coalesce(sum(state = 'succeeded'), 0), coalesce(sum(state = 'failed'), 0),
       coalesce(sum(CASE WHEN state = 'succeeded' THEN succeeded ELSE 0 END), 0),
       coalesce(sum(CASE state WHEN 'succeeded' THEN failed WHEN 'failed' THEN items
                               ELSE 0 END), 0),
       (SELECT count(*) FROM attempts WHERE job_id = ?1),
       (SELECT count(*) FROM attempts WHERE job_id = ?1 AND status != 'RUN_DONE')
FROM minibatches WHERE job_id = ?1)sql");
  st.bind(1, job_id).run();
}

Tallies::Tallies(Db& db)
    : db_(db),
      load_(db, "SELECT id, state, items FROM minibatches WHERE job_id = ?1"),
      add_(db, R"sql(
UPDATE job_tallies SET submitted = submitted + ?2, pending = pending + ?3,
                       running = running + ?4, succeeded = succeeded + ?5, failed = failed + ?6,
                       items_succeeded = items_succeeded + ?7, items_failed = items_failed + ?8,
                       attempts = attempts + ?9, attempts_failed = attempts_failed + ?10
WHERE job_id = ?1)sql") {}

void Tallies::job_created(std::uint64_t job_id) { jobs_[job_id] = JobRows{}; }

Tallies::JobRows* Tallies::rows(std::uint64_t job_id, std::uint64_t index) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    // A job created before this process, or touched after it ended: its rows, once.
    it = jobs_.emplace(job_id, JobRows{}).first;
    JobRows& j = it->second;
    load_.bind(1, job_id);
    while (load_.step()) {
      const auto id = load_.column_uint64(0);
      if (id >= j.state.size() + kMaxIndexGap) {
        j.untracked = true;
        break;
      }
      if (id >= j.state.size()) {
        j.state.resize(id + 1, RowState::None);
        j.items.resize(id + 1, 0);
      }
      j.state[id] = row_state(load_.column_text(1));
      j.items[id] = clamp_items(load_.column_uint64(2));
    }
    load_.reset();
  }
  JobRows& j = it->second;
  if (!j.untracked && index >= j.state.size()) {
    if (index >= j.state.size() + kMaxIndexGap) {
      j.untracked = true;
    } else {
      j.state.resize(index + 1, RowState::None);
      j.items.resize(index + 1, 0);
    }
  }
  if (j.untracked) {
    // Its deltas are not known: apply() counts it in full.
    j.state.clear();
    j.items.clear();
    recount_.insert(job_id);
    return nullptr;
  }
  return &j;
}

void Tallies::count(Delta& d, int sign, RowState s, std::uint64_t items, std::uint64_t succeeded,
                    std::uint64_t failed) {
  const auto n = static_cast<std::int64_t>(sign);
  switch (s) {
    case RowState::None:
    case RowState::Other:
      return;
    case RowState::Pending:
      d.pending += n;
      return;
    case RowState::Running:
      d.running += n;
      return;
    case RowState::Succeeded:
      d.succeeded += n;
      d.items_succeeded += n * static_cast<std::int64_t>(succeeded);
      d.items_failed += n * static_cast<std::int64_t>(failed);
      return;
    case RowState::Failed:
      d.failed += n;
      d.items_failed += n * static_cast<std::int64_t>(items);
      return;
  }
}

void Tallies::submitted(std::uint64_t job_id, std::uint64_t index, RowState state,
                        std::uint64_t items) {
  JobRows* j = rows(job_id, index);
  if (j == nullptr) return;
  RowState& s = j->state[index];
  if (s == RowState::None) {
    Delta& d = deltas_[job_id];
    ++d.submitted;
    count(d, 1, state, items, 0, 0);
    s = state;
    j->items[index] = clamp_items(items);
    return;
  }
  if (state != RowState::Running || s == RowState::Running) return;  // the row keeps its state
  running(job_id, index);
}

void Tallies::result(std::uint64_t job_id, std::uint64_t index, RowState state, std::uint64_t items,
                     std::uint64_t succeeded, std::uint64_t failed) {
  JobRows* j = rows(job_id, index);
  if (j == nullptr) return;
  RowState& s = j->state[index];
  Delta& d = deltas_[job_id];
  if (s == RowState::None) {
    ++d.submitted;
    j->items[index] = clamp_items(items);
  } else if (s == RowState::Succeeded) {
    recount_.insert(job_id);  // its item counts are not kept
  } else {
    count(d, -1, s, j->items[index], 0, 0);
  }
  count(d, 1, state, j->items[index], succeeded, failed);
  s = state;
}

void Tallies::running(std::uint64_t job_id, std::uint64_t index) {
  JobRows* j = rows(job_id, index);
  if (j == nullptr) return;
  RowState& s = j->state[index];
  if (s == RowState::None || s == RowState::Running) return;
  Delta& d = deltas_[job_id];
  if (s == RowState::Succeeded) {
    recount_.insert(job_id);
  } else {
    count(d, -1, s, j->items[index], 0, 0);
  }
  ++d.running;
  s = RowState::Running;
}

void Tallies::reopened(std::uint64_t job_id, std::uint64_t index) {
  recount_.insert(job_id);
  if (JobRows* j = rows(job_id, index); j != nullptr && j->state[index] != RowState::None) {
    j->state[index] = RowState::Pending;
  }
}

void Tallies::attempt(std::uint64_t job_id, bool failed) {
  Delta& d = deltas_[job_id];
  ++d.attempts;
  if (failed) ++d.attempts_failed;
}

void Tallies::apply() {
  for (const auto& [job_id, d] : deltas_) {
    if (recount_.contains(job_id)) continue;
    add_.bind(1, job_id)
        .bind(2, d.submitted)
        .bind(3, d.pending)
        .bind(4, d.running)
        .bind(5, d.succeeded)
        .bind(6, d.failed)
        .bind(7, d.items_succeeded)
        .bind(8, d.items_failed)
        .bind(9, d.attempts)
        .bind(10, d.attempts_failed);
    add_.run();
  }
  for (const auto job_id : recount_) recount_tallies(db_, job_id);
  deltas_.clear();
  recount_.clear();
}

void Tallies::discard() {
  deltas_.clear();
  recount_.clear();
  jobs_.clear();
}

}  // namespace fanout::store::detail
