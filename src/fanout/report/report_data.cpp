// The figures behind report.html, compare and tune. See report_data.hpp and docs/tuning.md.
#include "fanout/report/report_data.hpp"

#include <chrono>
#include <map>

#include "fanout/report/report_figures.hpp"
#include "fanout/store/job_settings.hpp"
#include "fanout/util/error.hpp"

namespace fanout::report {

namespace {

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void set_job(store::ReportJobRow&& job, ReportData& r) {
  r.name = std::move(job.name);
  r.state = std::move(job.state);
  r.reason = std::move(job.reason);
  r.spec_path = std::move(job.spec_path);
  r.runtime = std::move(job.runtime);
  r.entry = std::move(job.entry);
  r.output_path = std::move(job.output_path);
  r.log_dir = std::move(job.log_dir);
  r.total_known = job.total_known;
  r.started = job.started;
  r.ended = job.ended;
  r.total = job.total;
  r.job_started = job.job_started;
  r.settings = std::move(job.settings);
}

void set_counts(const store::MinibatchCounts& c, ReportData& r) {
  r.submitted = c.submitted;
  r.total = std::max(r.total, r.submitted);
  r.succeeded = c.succeeded;
  r.failed = c.failed;
  r.pending = c.pending;
  r.running = c.running;
  r.items_succeeded = c.items_succeeded;
  r.items_failed = c.items_failed;
}

// The job's retry policy as every other reader of jobs.settings sees it (store::JobSettings,
// its default when the job did not record one).
std::uint32_t max_retries_of(const std::string& settings_json) {
  auto s = store::parse_settings_json(settings_json);
  return s ? s->max_retries : store::JobSettings{}.max_retries;
}

}  // namespace

std::string ReportData::setting(const std::string& key, const std::string& fallback) const {
  for (const auto& [k, v] : settings) {
    if (k == key) return v;
  }
  return fallback;
}

ReportDataPass::ReportDataPass(const ReportLimits& limits)
    : tally_(std::make_unique<AttemptTally>(limits.messages_per_failure)) {}
ReportDataPass::~ReportDataPass() = default;

void ReportDataPass::add(const store::AttemptRow& a) { tally_->add(a); }

ReportData ReportDataPass::finish(store::ReportSource& src, std::uint64_t job_id,
                                  const ReportLimits& limits) {
  ReportData r;
  r.snapshot = now_unix();
  r.job_id = job_id;
  auto job = store::read_report_job(src, job_id);
  const std::uint32_t max_retries = max_retries_of(job.settings_json);
  set_job(std::move(job), r);
  const AttemptTally& t = *tally_;
  if (r.ended > 0 && r.state == "succeeded" && r.total_known && t.attempts_failed == 0 &&
      t.attempts == r.total) {
    // Every attempt succeeded and there is one per mini-batch: each mini-batch's row holds its
    // attempt's counts (the writer records both from the one result), so the counts follow
    // from the pass without a scan of the mini-batches.
    r.submitted = r.succeeded = r.total;
    r.items_succeeded = t.done_items_ok;
    r.items_failed = t.done_items_failed;
  } else {
    set_counts(store::read_minibatch_counts(src, job_id), r);
  }
  finish_tally(*tally_, limits, max_retries, r);

  std::map<std::uint64_t, store::PoolRow> pool_rows;
  for (const auto& w : r.workers) {
    if (pool_rows.count(w.pool_id) != 0) continue;
    if (auto row = store::read_pool_row(src, w.pool_id)) pool_rows.emplace(w.pool_id, *row);
  }
  r.pools = pool_totals(r.workers, pool_rows);

  r.exhausted_count = r.failed;
  if (r.failed > 0) {
    for (auto& e : store::read_exhausted(src, job_id, limits.max_exhausted)) {
      r.exhausted.push_back({.minibatch = e.minibatch,
                             .tries = e.tries,
                             .items = e.items,
                             .last = first_line(e.last)});
    }
  }
  auto series = store::read_resource_series(src, job_id, r.t0, limits.resource_bins,
                                            limits.max_process_series);
  r.node_series = std::move(series.nodes);
  r.process_series = std::move(series.processes);
  r.gpu_series = std::move(series.gpus);
  tally_ = std::make_unique<AttemptTally>(limits.messages_per_failure);  // points no longer needed
  return r;
}

ReportData report_data(store::ReportSource& src, std::uint64_t job_id, const ReportLimits& limits,
                       const std::function<void(const store::AttemptRow&)>& on_attempt) {
  ReportDataPass pass(limits);
  src.each_attempt(job_id, [&](const store::AttemptRow& a) {
    if (on_attempt) on_attempt(a);
    pass.add(a);
  });
  return pass.finish(src, job_id, limits);
}

Expected<ReportData> read_report_data(const std::string& db_path, std::uint64_t job_id,
                                      const ReportLimits& limits) {
  try {
    // One read transaction: every figure is of the same moment, even while the job runs.
    store::ReportSource src(db_path);
    ReportData r = report_data(src, job_id, limits, {});
    src.finish();
    return r;
  } catch (const Failure& f) {
    return make_error(f.error().code, f.error().message);
  }
}

}  // namespace fanout::report
