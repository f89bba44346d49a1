// The derived figures of one job. See job_figures.hpp.
#include "fanout/report/job_figures.hpp"

#include <algorithm>

namespace fanout::report {

JobFigures job_figures(const ReportData& d) {
  JobFigures f;
  const double end = d.ended > 0 ? d.ended : d.snapshot;
  f.duration_s = d.started > 0 ? std::max(end - d.started, 0.0) : 0.0;
  f.span_s = d.first_start > 0 ? std::max(d.last_end - d.first_start, 0.0) : 0.0;
  if (f.duration_s > 0) {
    f.items_per_s = static_cast<double>(d.items_succeeded + d.items_failed) / f.duration_s;
    f.minibatches_per_s = static_cast<double>(d.succeeded + d.failed) / f.duration_s;
  }
  double run = 0, busy = 0, cpu = 0;
  for (const auto& p : d.pools) {
    JobFigures::PoolUse u{.name = p.name, .node = p.node, .workers = p.workers};
    if (f.span_s > 0 && p.workers > 0) {
      const double capacity = static_cast<double>(p.workers) * f.span_s;
      u.run_share = p.run_s / capacity;
      u.busy_share = p.elapsed_s / capacity;
    }
    f.workers += p.workers;
    run += p.run_s;
    busy += p.elapsed_s;
    cpu += p.cpu_s;
    f.pools.push_back(std::move(u));
  }
  if (f.span_s > 0 && f.workers > 0) {
    f.run_share = run / (static_cast<double>(f.workers) * f.span_s);
    f.busy_share = busy / (static_cast<double>(f.workers) * f.span_s);
    f.cores_used = cpu / f.span_s;
  }
  f.measured = d.run_hist.n;
  f.mean_run_s = d.run_hist.mean;
  f.mean_overhead_s = std::max(d.overhead_hist.mean, 0.0);
  f.overhead_share = f.mean_run_s > 0 ? f.mean_overhead_s / f.mean_run_s : 0;
  f.cpu_share = d.run_elapsed_s > 0 ? d.run_cpu_s / d.run_elapsed_s : 0;

  // A worker's idle time between its first start and last end, spread over its gaps: no sort
  // of the attempts needed.
  double idle = 0, tail = 0;
  for (const auto& w : d.workers) {
    if (w.attempts >= 2) {
      idle += std::max(w.last_end - w.first_start - w.elapsed_s, 0.0);
      f.gaps += w.attempts - 1;
    }
    tail += std::max(d.last_end - w.last_end, 0.0);
  }
  if (f.gaps > 0) f.mean_gap_s = idle / static_cast<double>(f.gaps);
  if (!d.workers.empty()) {
    f.tail_s = tail / static_cast<double>(d.workers.size());
    if (f.span_s > 0) f.tail_share = f.tail_s / f.span_s;
  }
  return f;
}

}  // namespace fanout::report
