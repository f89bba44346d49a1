// BatchLauncher's elastic pool jobs and its pool_jobs records. See batch_launcher.hpp and
// docs/cluster.md, section 6.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "client/launch/batch_launcher.hpp"
#include "fanout/store/db.hpp"
#include "fanout/util/error.hpp"

namespace fanout::client {

namespace {

// How often the scaling decision runs at most: above the scheduler refresh of 2 s, so each
// decision sees the states its predecessor's submissions and releases brought.
constexpr auto kDecisionPeriod = std::chrono::seconds(5);
// How long a released pool job may take to drain and end by itself before it is cancelled.
constexpr auto kDrainWait = std::chrono::seconds(60);

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

}  // namespace

bool BatchLauncher::runs_in(const std::string& pool, const std::string& id) const {
  for (auto pos = pool.find(id); pos != std::string::npos; pos = pool.find(id, pos + 1)) {
    const std::size_t end = pos + id.size();
    if ((pos == 0 || !is_digit(pool[pos - 1])) && (end == pool.size() || !is_digit(pool[end]))) {
      return true;
    }
  }
  return false;
}

std::string BatchLauncher::end_reason(const Record& r, const std::string& state) const {
  if (r.released) return "released-idle";
  // The ended state the scheduler named, else the last one it reported (a job it no longer
  // lists). Slurm's words; other schedulers' ended jobs read as finished.
  const std::string& last = state.empty() ? r.last_state : state;
  const std::string word = last.substr(0, last.find(' '));
  if (word == "TIMEOUT") return "walltime";
  if (released_) return "finished";  // the job was over: released with the rest
  if (word == "CANCELLED") return "cancelled";
  for (const char* w : {"FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "PREEMPTED"}) {
    if (word == w) return "failed";
  }
  return "finished";
}

void BatchLauncher::note_states() {
  const double now = unix_now();
  for (const auto& id : ids_) {
    Record& r = records_[id];
    if (r.ended > 0) continue;
    const std::string& st = states_[id];
    if (is_active(st)) {
      if (r.started == 0 && st != submitted_state_) {
        r.started = now;
        r.dirty = true;
      }
      r.last_state = st;
      continue;
    }
    r.ended = now;
    r.reason = end_reason(r, st);
    r.dirty = true;
  }
}

std::uint32_t BatchLauncher::spent() const {
  std::uint32_t n = 0;
  for (const auto& [id, r] : records_) {
    if (r.ended > 0 && !r.released) ++n;
  }
  return n;
}

std::uint32_t BatchLauncher::serving() const {
  std::uint32_t n = 0;
  for (const auto& id : ids_) {
    auto st = states_.find(id);
    auto r = records_.find(id);
    if (st != states_.end() && is_active(st->second) &&
        (r == records_.end() || !r->second.released)) {
      ++n;
    }
  }
  return n;
}

std::string BatchLauncher::poll_elastic() {
  const auto now = Clock::now();
  for (const auto& id : ids_) {
    Record& r = records_[id];
    if (r.released && r.ended == 0 && now >= r.cancel_at) {
      log_->info("pool job {} did not end within {} s of its release: cancelling it", id,
                 kDrainWait.count());
      cancel_one(id);
    }
  }
  write_records();
  if (serving() > 0 || spent() < es_.max_nodes) return {};  // the next decision may add one
  auto note = end_note();
  if (!note) return {};
  return all_ended(*note);
}

void BatchLauncher::observe(const Load& load) {
  if (load.job_id != job_id_ || load.db != db_) {
    job_id_ = load.job_id;
    db_ = load.db;
    for (auto& [id, r] : records_) r.dirty = true;
  }
  refresh(false);
  note_states();
  const auto now = Clock::now();
  if (elastic_ && !released_ && !detached_ && !ids_.empty() && now >= next_decision_) {
    next_decision_ = now + kDecisionPeriod;
    scale(load);
  }
  write_records();
}

double BatchLauncher::idle_since(const std::string& id, const Load& load, double now) const {
  std::uint32_t idle = 0;
  double least = -1;
  for (const auto& [name, idle_s] : load.idle_pools) {
    if (!runs_in(name, id)) continue;
    ++idle;
    least = least < 0 ? idle_s : std::min(least, idle_s);
  }
  // Every pool of the job (one per node of it) must be idle.
  if (idle < std::max(1u, o_.launch.nodes_per_block) || least < 0) return 0;
  return now - least;
}

// One decision: the pools serving (pending ones included, released ones not), then what
// elastic::decide() says, carried out and logged in one line.
void BatchLauncher::scale(const Load& load) {
  const double now = unix_now();
  std::vector<elastic::PoolJob> pools;
  for (std::size_t i = 0; i < ids_.size(); ++i) {
    const std::string& id = ids_[i];
    const std::string& st = states_[id];
    if (records_[id].released || !is_active(st)) continue;
    pools.push_back(elastic::PoolJob{
        .id = i + 1, .pending = st == submitted_state_, .idle_since = idle_since(id, load, now)});
  }
  elastic::Decision d = elastic::decide(load.backlog, load.in_flight, pools, now, es_);
  if (d.submit > 0 && spent() >= es_.max_nodes) d.submit = 0;  // failures spent the budget
  if (d.submit == 0 && d.release.empty()) return;
  log_->info("pool jobs: {}", d.why);
  if (!o_.quiet) std::fprintf(stderr, "fanout: pool jobs: %s\n", d.why.c_str());
  for (auto idx : d.release) release_one(ids_[idx - 1]);
  try {
    for (std::uint32_t i = 0; i < d.submit; ++i) submit();
  } catch (const Failure& f) {
    log_->warn("elastic pool job: {}", f.what());
  }
  refresh(true);
  note_states();
}

void BatchLauncher::release_one(const std::string& id) {
  Record& r = records_[id];
  r.released = true;
  const auto drain = drain_command(id);
  if (!drain.empty()) {
    auto o = run_command(drain, dir_);
    if (o.status.success()) {
      log_->info("pool job {} released: its pool drains and leaves", id);
      r.cancel_at = Clock::now() + kDrainWait;
      return;
    }
    log_->warn("{}: {} ({}); cancelling pool job {}", drain.front(), o.err, o.status.describe(),
               id);
  }
  cancel_one(id);
}

void BatchLauncher::cancel_one(const std::string& id) {
  records_[id].cancel_at = Clock::time_point::max();
  auto o = run_command(cancel_command({id}), dir_);
  if (!o.status.success()) log_->warn("{}: {} ({})", cancel_label(), o.err, o.status.describe());
}

void BatchLauncher::write_records() {
  if (job_id_ == 0 || db_.empty() || detached_) return;
  const bool any =
      std::any_of(records_.begin(), records_.end(), [](const auto& kv) { return kv.second.dirty; });
  if (!any) return;
  try {
    store::Db db(db_, store::Db::Mode::ReadWriteCreate);
    db.exec("PRAGMA busy_timeout = 5000", "set busy_timeout");  // the interchange writes too
    store::Statement st(db,
                        "INSERT INTO pool_jobs (job_id, scheduler, sched_job_id, submitted, "
                        "started, ended, end_reason) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                        "ON CONFLICT (job_id, scheduler, sched_job_id) DO UPDATE SET "
                        "started = excluded.started, ended = excluded.ended, "
                        "end_reason = excluded.end_reason");
    for (auto& [id, r] : records_) {
      if (!r.dirty) continue;
      st.reset();
      st.bind(1, job_id_).bind(2, o_.launch.kind).bind(3, id).bind(4, r.submitted);
      if (r.started > 0) st.bind(5, r.started);
      if (r.ended > 0) st.bind(6, r.ended).bind(7, r.reason);
      st.run();
      r.dirty = false;
    }
  } catch (const Failure& f) {
    // The run goes on without the record; said once.
    if (!record_warned_) log_->warn("pool_jobs: {}", f.what());
    record_warned_ = true;
  }
}

}  // namespace fanout::client
