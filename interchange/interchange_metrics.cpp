// The interchange's side of its Prometheus metrics: copies the loop's counters into a
// MetricsSnapshot for the exporter (metrics_exporter.hpp). Runs on the poll loop at most every
// kMetricsPeriod, so the per-result cost of metrics is one array increment (count_attempt).
#include "interchange/interchange.hpp"

#include <algorithm>
#include <chrono>

#include "fanout/util/clock.hpp"

namespace fanout::ix {

namespace {

constexpr auto kMetricsPeriod = std::chrono::milliseconds(100);
constexpr auto kRateWindow = std::chrono::seconds(2);  // rates are taken over this long at least
constexpr std::size_t kEndedJobsKept = 50;  // ended jobs still shown, so a last scrape sees them

MetricsSnapshot::JobRow job_row(const Job& job, const std::string& state) {
  return MetricsSnapshot::JobRow{.id = job.id,
                                 .name = job.spec.name,
                                 .state = state,
                                 .total_known = job.submit_done,
                                 .total = job.total,
                                 .succeeded = job.succeeded,
                                 .failed = job.failed,
                                 .items_succeeded = job.items_succeeded,
                                 .items_failed = job.items_failed,
                                 .attempts_failed = job.attempts_failed,
                                 .in_flight = job.in_flight,
                                 .queued = job.ready.size(),
                                 .minibatches_per_s = 0,
                                 .items_per_s = 0};
}

}  // namespace

void Interchange::note_job_ended(const Job& job, const std::string& state) {
  if (!metrics_) return;
  ++jobs_ended_[state];
  auto row = job_row(job, state);
  row.in_flight = 0;
  row.queued = 0;
  ended_rows_.push_back(std::move(row));
  if (ended_rows_.size() > kEndedJobsKept) ended_rows_.pop_front();
  rate_marks_.erase(job.id);
}

void Interchange::publish_metrics(Clock::time_point now) {
  next_metrics_ = now + kMetricsPeriod;
  MetricsSnapshot s;
  s.now_unix = unix_now();
  for (const auto& [id, job] : ledger_.jobs()) {
    auto row = job_row(job, std::string(proto::to_string(job.state)));
    // Rates over a window of at least kRateWindow: the mark moves once the window has passed.
    RateMark& m = rate_marks_[id];
    const std::uint64_t done = job.succeeded + job.failed;
    const std::uint64_t items = job.items_succeeded + job.items_failed;
    if (m.at == Clock::time_point{}) {
      m = RateMark{.at = now, .done = done, .items = items};
    } else if (now - m.at >= kRateWindow) {
      const double dt = std::chrono::duration<double>(now - m.at).count();
      m = RateMark{.at = now,
                   .done = done,
                   .items = items,
                   .minibatches_per_s = static_cast<double>(done - m.done) / dt,
                   .items_per_s = static_cast<double>(items - m.items) / dt};
    }
    row.minibatches_per_s = m.minibatches_per_s;
    row.items_per_s = m.items_per_s;
    s.jobs.push_back(std::move(row));
  }
  s.jobs.insert(s.jobs.end(), ended_rows_.begin(), ended_rows_.end());
  s.jobs_ended = jobs_ended_;
  s.attempts_by_status = attempts_by_status_;
  for (const auto& [peer, pool] : pools_.all()) {
    s.pools.push_back(MetricsSnapshot::PoolRow{
        .id = pool.id,
        .name = pool.reg.pool_name,
        .node = pool.reg.node,
        .workers = pool.reg.workers,
        .held = pool.tasks.size(),
        .busy = std::min<std::uint64_t>(pool.tasks.size(), pool.reg.workers),
        .heartbeat_age_s = std::chrono::duration<double>(now - pool.last_seen).count()});
  }
  std::sort(s.pools.begin(), s.pools.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  s.pools_lost = stats_.pools_lost;
  s.pools_left = stats_.pools_left;
  s.tasks_dispatched = stats_.tasks_dispatched;
  s.results = stats_.results;
  s.late_results = stats_.late_results;
  s.bad_frames = stats_.bad_frames;
  s.refused_peers = zap_ ? zap_->refused() : stats_.refused_peers;
  s.unauthenticated_cut = stats_.unauthenticated_cut;
  s.window_refused = stats_.window_refused;
  const auto w = store_->write_stats();
  s.store_queue_depth = w.queue_depth;
  s.store_commits = w.commits;
  s.store_commit_seconds = w.commit_seconds;
  s.store_last_commit_s = w.last_commit_seconds;
  metrics_->publish(std::move(s));
}

}  // namespace fanout::ix
