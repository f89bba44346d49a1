// The figures behind report.html, compare and tune. See report_queries.hpp and docs/tuning.md.
#include "fanout/store/report_queries.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

#include "fanout/store/db.hpp"
#include "fanout/store/task_store.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store {

namespace {

// An attempt whose run() and overhead are measured: the base of the histograms and of tune.
#define FANOUT_MEASURED "(status = 'RUN_DONE' AND run_s IS NOT NULL AND elapsed_s IS NOT NULL)"

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The first line of a message, at most 300 bytes.
std::string first_line(std::string_view s) {
  s = s.substr(0, s.find('\n'));
  if (s.size() > 300) s = s.substr(0, 300);
  return std::string(s);
}

void read_job(Db& db, std::uint64_t job_id, ReportData& r) {
  Statement job(db,
                "SELECT j.name, j.state, j.reason, coalesce(j.spec_path, ''), "
                "coalesce(j.runtime, ''), coalesce(j.entry_script, ''), "
                "coalesce(j.output_path, ''), coalesce(j.log_dir, ''), j.submit_done, "
                "coalesce(j.started, j.created, 0), coalesce(j.ended, 0), c.total, c.submitted, "
                "c.succeeded, c.failed, c.pending, c.running, c.items_succeeded, c.items_failed, "
                "c.attempts, c.attempts_failed "
                "FROM jobs j JOIN job_counts c ON c.job_id = j.id WHERE j.id = ?1");
  job.bind(1, job_id);
  if (!job.step()) {
    throw Failure(ErrorCode::NotFound, fmt::format("{}: no job {}", db.path(), job_id));
  }
  r.job_id = job_id;
  r.name = job.column_text(0);
  r.state = job.column_text(1);
  r.reason = job.column_text(2);
  r.spec_path = job.column_text(3);
  r.runtime = job.column_text(4);
  r.entry = job.column_text(5);
  r.output_path = job.column_text(6);
  r.log_dir = job.column_text(7);
  r.total_known = job.column_int64(8) != 0;
  r.started = job.column_double(9);
  r.ended = job.column_double(10);
  r.total = job.column_uint64(11);
  r.submitted = job.column_uint64(12);
  r.succeeded = job.column_uint64(13);
  r.failed = job.column_uint64(14);
  r.pending = job.column_uint64(15);
  r.running = job.column_uint64(16);
  r.items_succeeded = job.column_uint64(17);
  r.items_failed = job.column_uint64(18);
  r.attempts = job.column_uint64(19);
  r.attempts_failed = job.column_uint64(20);

  Statement settings(db, "SELECT key, value FROM job_settings WHERE job_id = ?1 ORDER BY key");
  settings.bind(1, job_id);
  while (settings.step()) {
    r.settings.emplace_back(std::string(settings.column_text(0)),
                            std::string(settings.column_text(1)));
  }
}

// Workers, pools and the attempt-time statistics.
void read_workers(Db& db, std::uint64_t job_id, ReportData& r) {
  Statement w(db,
              "SELECT pool_id, coalesce(pool, ''), coalesce(node, ''), process, count(*), "
              "sum(status = 'RUN_DONE'), min(start), max(start + elapsed_s), "
              "total(elapsed_s), total(run_s), total(cpu_s) "
              "FROM attempts WHERE job_id = ?1 AND start IS NOT NULL AND coalesce(process, '') "
              "!= '' GROUP BY pool_id, process ORDER BY pool, pool_id, process");
  w.bind(1, job_id);
  while (w.step()) {
    ReportData::Worker x;
    x.pool_id = w.column_uint64(0);
    x.pool = w.column_text(1);
    x.node = w.column_text(2);
    x.process = w.column_text(3);
    x.attempts = w.column_uint64(4);
    x.succeeded = w.column_uint64(5);
    x.first_start = w.column_double(6);
    x.last_end = w.column_double(7);
    x.elapsed_s = w.column_double(8);
    x.run_s = w.column_double(9);
    x.cpu_s = w.column_double(10);
    r.worker_attempts += x.attempts;
    r.first_start = r.first_start == 0 ? x.first_start : std::min(r.first_start, x.first_start);
    r.last_end = std::max(r.last_end, x.last_end);
    r.workers.push_back(std::move(x));
  }
}

// The pools that ran the workers' attempts, with their totals.
void read_pools(Db& db, ReportData& r) {
  Statement p(db,
              "SELECT id, coalesce(name, ''), coalesce(node, ''), coalesce(state, ''), "
              "coalesce(workers, 0), coalesce(prefetch, 0) FROM pools WHERE id = ?1");
  std::map<std::uint64_t, ReportData::Pool> pools;
  for (const auto& x : r.workers) {
    auto [it, fresh] = pools.try_emplace(x.pool_id);
    auto& pool = it->second;
    if (fresh) {
      pool.id = x.pool_id;
      pool.name = x.pool;
      pool.node = x.node;
      p.bind(1, x.pool_id);
      if (p.step()) {
        pool.state = p.column_text(3);
        pool.workers = p.column_uint64(4);
        pool.prefetch = p.column_uint64(5);
      }
      p.reset();
      pool.first_start = x.first_start;
    }
    pool.attempts += x.attempts;
    pool.elapsed_s += x.elapsed_s;
    pool.run_s += x.run_s;
    pool.cpu_s += x.cpu_s;
    pool.first_start = std::min(pool.first_start, x.first_start);
    pool.last_end = std::max(pool.last_end, x.last_end);
  }
  for (auto& [id, pool] : pools) {
    // A pool row without a worker count (an older pool): count the processes seen instead.
    if (pool.workers == 0) {
      pool.workers = static_cast<std::uint64_t>(std::count_if(
          r.workers.begin(), r.workers.end(), [&](const auto& x) { return x.pool_id == id; }));
    }
    r.pools.push_back(std::move(pool));
  }
}

// For a job of many attempts, one scan grouped by worker and time bin gives the workers, the
// binned timeline and the attempts started per bin of the series (a scan of a million attempts
// costs about as much as their grouping, so three queries become one).
void read_workers_binned(Db& db, std::uint64_t job_id, const ReportLimits& limits, ReportData& r) {
  const double end = r.ended > 0 ? r.ended : r.snapshot;
  r.bin_s = std::max(end - r.t0, 1e-3) / limits.series_bins;
  r.bins.resize(limits.series_bins + 1);
  for (std::size_t i = 0; i < r.bins.size(); ++i) r.bins[i].t = static_cast<double>(i) * r.bin_s;
  const auto last_bin = static_cast<std::int64_t>(r.bins.size()) - 1;
  r.timeline_binned = true;
  r.timeline_bin_s = r.bin_s;
  Statement a(db,
              "SELECT pool_id, coalesce(pool, ''), coalesce(node, ''), process, "
              "CAST((start - ?2) / ?3 AS INTEGER) AS b, count(*), sum(status = 'RUN_DONE'), "
              "min(start), max(start + elapsed_s), total(elapsed_s), total(run_s), "
              "total(cpu_s), sum(" FANOUT_MEASURED "), min(CASE WHEN " FANOUT_MEASURED
              " THEN run_s END), "
              "max(CASE WHEN " FANOUT_MEASURED " THEN run_s END), total(CASE WHEN " FANOUT_MEASURED
              " THEN run_s END), "
              "min(CASE WHEN " FANOUT_MEASURED
              " THEN elapsed_s - run_s END), "
              "max(CASE WHEN " FANOUT_MEASURED
              " THEN elapsed_s - run_s END), "
              "total(CASE WHEN " FANOUT_MEASURED
              " THEN elapsed_s - run_s END), "
              "total(CASE WHEN " FANOUT_MEASURED
              " THEN cpu_s END), total(CASE WHEN " FANOUT_MEASURED
              " THEN elapsed_s END) "
              "FROM attempts WHERE job_id = ?1 AND start IS NOT NULL AND "
              "coalesce(process, '') != '' GROUP BY pool_id, process, b "
              "ORDER BY pool, pool_id, process, b");
  a.bind(1, job_id).bind(2, r.t0).bind(3, r.bin_s);
  // Per worker, the busy seconds of each bin it started attempts in.
  std::vector<std::vector<std::pair<std::int64_t, double>>> busy;
  std::vector<std::vector<std::uint64_t>> failed_in;
  while (a.step()) {
    if (r.workers.empty() || r.workers.back().pool_id != a.column_uint64(0) ||
        r.workers.back().process != a.column_text(3)) {
      ReportData::Worker x;
      x.pool_id = a.column_uint64(0);
      x.pool = a.column_text(1);
      x.node = a.column_text(2);
      x.process = a.column_text(3);
      x.first_start = a.column_double(7);
      r.workers.push_back(std::move(x));
    }
    auto& x = r.workers.back();
    const auto n = a.column_uint64(5);
    const auto ok = a.column_uint64(6);
    x.attempts += n;
    x.succeeded += ok;
    x.first_start = std::min(x.first_start, a.column_double(7));
    x.last_end = std::max(x.last_end, a.column_double(8));
    x.elapsed_s += a.column_double(9);
    x.run_s += a.column_double(10);
    x.cpu_s += a.column_double(11);
    r.worker_attempts += n;
    if (const auto m = a.column_uint64(12); m > 0) {
      auto merge = [&](ReportData::Histogram& h, int col) {
        h.min = h.n == 0 ? a.column_double(col) : std::min(h.min, a.column_double(col));
        h.max = h.n == 0 ? a.column_double(col + 1) : std::max(h.max, a.column_double(col + 1));
        h.mean += a.column_double(col + 2);  // a sum until the end
        h.n += m;
      };
      merge(r.run_hist, 13);
      merge(r.overhead_hist, 16);
      r.run_cpu_s += a.column_double(19);
      r.run_elapsed_s += a.column_double(20);
    }
    const std::int64_t b = std::clamp<std::int64_t>(a.column_int64(4), 0, last_bin);
    r.bins[static_cast<std::size_t>(b)].started += n;
    r.segments.push_back({.worker = static_cast<std::uint32_t>(r.workers.size() - 1),
                          .t_start = static_cast<double>(b) * r.bin_s,
                          .t_end = a.column_double(9),  // busy seconds, bounded below
                          .status = n > ok ? "FAILED" : "RUN_DONE",
                          .minibatch = 0,
                          .attempts = n});
  }
  for (auto* h : {&r.run_hist, &r.overhead_hist}) {
    if (h->n > 0) h->mean /= static_cast<double>(h->n);
  }
  for (const auto& x : r.workers) {
    r.first_start = r.first_start == 0 ? x.first_start : std::min(r.first_start, x.first_start);
    r.last_end = std::max(r.last_end, x.last_end);
  }
  // Too many bars for the page: merge k neighbouring bins of each worker into one, so that at
  // most workers × ceil(bins / k) bars remain.
  std::size_t k = 1;
  if (r.segments.size() > limits.max_timeline_segments) {
    const std::size_t cells = r.workers.size() * r.bins.size();
    k = (cells + limits.max_timeline_segments - 1) / limits.max_timeline_segments;
  }
  if (k > 1) {
    r.timeline_bin_s = r.bin_s * static_cast<double>(k);
    std::vector<ReportData::Segment> merged;
    for (auto& seg : r.segments) {
      const auto group = static_cast<std::int64_t>(seg.t_start / r.timeline_bin_s + 1e-9);
      const double t = static_cast<double>(group) * r.timeline_bin_s;
      if (!merged.empty() && merged.back().worker == seg.worker && merged.back().t_start == t) {
        auto& m = merged.back();
        m.t_end += seg.t_end;
        m.attempts += seg.attempts;
        if (seg.status != "RUN_DONE") m.status = seg.status;
      } else {
        seg.t_start = t;
        merged.push_back(std::move(seg));
      }
    }
    r.segments = std::move(merged);
  }
  // Busy time is counted in the bin the attempt started in; an attempt longer than a bin fills
  // it.
  for (auto& seg : r.segments) seg.t_end = seg.t_start + std::min(seg.t_end, r.timeline_bin_s);
}

// Statistics of run() time and overhead over the successful attempts (the per-attempt path;
// read_workers_binned() gathers them in its own scan).
void read_run_stats(Db& db, std::uint64_t job_id, ReportData& r) {
  Statement s(
      db,
      "SELECT count(*), min(run_s), max(run_s), avg(run_s), "
      "min(elapsed_s - run_s), max(elapsed_s - run_s), avg(elapsed_s - run_s), "
      "total(cpu_s), total(elapsed_s) FROM attempts WHERE job_id = ?1 AND " FANOUT_MEASURED);
  s.bind(1, job_id);
  if (!s.step() || s.column_int64(0) == 0) return;
  auto init = [&](ReportData::Histogram& h, int col) {
    h.n = s.column_uint64(0);
    h.min = s.column_double(col);
    h.max = s.column_double(col + 1);
    h.mean = s.column_double(col + 2);
  };
  init(r.run_hist, 1);
  init(r.overhead_hist, 4);
  r.run_cpu_s = s.column_double(7);
  r.run_elapsed_s = s.column_double(8);
}

// Equal bins from the minimum to the maximum (one bin when they are equal).
void shape_histogram(ReportData::Histogram& h, std::uint32_t nbins) {
  if (h.n == 0) return;
  h.lo = h.min;
  h.width = h.max > h.min ? (h.max - h.min) / nbins : 0;
  h.counts.assign(h.width > 0 ? nbins : 1, 0);
}

// Sizes the time bins of the series from t0 to the job's end (the per-attempt path).
void size_bins(std::uint32_t nbins, ReportData& r) {
  const double end = std::max(r.last_end, r.ended > 0 ? r.ended : r.snapshot);
  r.bin_s = std::max(end - r.t0, 1e-3) / nbins;
  // Bins are floor((time − t0) / bin_s); the end itself falls into one more bin.
  r.bins.resize(nbins + 1);
  for (std::size_t i = 0; i < r.bins.size(); ++i) r.bins[i].t = static_cast<double>(i) * r.bin_s;
}

// One scan grouped by the bin an attempt ended in and its run() and overhead bins gives the
// series' ends and both histograms (each GROUP BY of a million rows is a sort of them).
void read_ends_and_histograms(Db& db, std::uint64_t job_id, std::uint32_t hist_bins,
                              ReportData& r) {
  if (r.worker_attempts == 0 && r.run_hist.n == 0) return;
  std::int64_t max_retries = 3;
  try {
    max_retries = std::stoll(r.setting("max_retries", "3"));
  } catch (const std::exception&) {
    max_retries = 3;
  }
  const auto last = static_cast<std::int64_t>(r.bins.size()) - 1;
  Statement q(db,
              "SELECT CAST((start + elapsed_s - ?2) / ?3 AS INTEGER) AS b, "
              "CASE WHEN NOT " FANOUT_MEASURED
              " THEN -1 WHEN ?5 > 0 THEN "
              "min(CAST((run_s - ?4) / ?5 AS INTEGER), ?8) ELSE 0 END AS rb, "
              "CASE WHEN NOT " FANOUT_MEASURED
              " THEN -1 WHEN ?7 > 0 THEN "
              "min(CAST((elapsed_s - run_s - ?6) / ?7 AS INTEGER), ?8) ELSE 0 END AS ob, "
              "count(*), sum(status = 'RUN_DONE'), "
              "total(CASE WHEN status = 'RUN_DONE' THEN items END), sum(status != 'RUN_DONE'), "
              "sum(status = 'RUN_DONE' OR attempt > ?9) FROM attempts "
              "WHERE job_id = ?1 AND start IS NOT NULL GROUP BY b, rb, ob");
  q.bind(1, job_id)
      .bind(2, r.t0)
      .bind(3, r.bin_s)
      .bind(4, r.run_hist.lo)
      .bind(5, r.run_hist.width)
      .bind(6, r.overhead_hist.lo)
      .bind(7, r.overhead_hist.width)
      .bind(8, static_cast<std::int64_t>(hist_bins) - 1)
      .bind(9, max_retries);
  while (q.step()) {
    const auto n = q.column_uint64(3);
    auto& b =
        r.bins[static_cast<std::size_t>(std::clamp<std::int64_t>(q.column_int64(0), 0, last))];
    b.ended += n;
    b.succeeded += q.column_uint64(4);
    b.items += static_cast<std::uint64_t>(q.column_double(5));
    b.failed += q.column_uint64(6);
    b.finished += q.column_uint64(7);
    auto add = [n](ReportData::Histogram& x, std::int64_t i) {
      if (i < 0 || x.counts.empty()) return;
      i = std::min<std::int64_t>(i, static_cast<std::int64_t>(x.counts.size()) - 1);
      x.counts[static_cast<std::size_t>(i)] += n;
    };
    add(r.run_hist, q.column_int64(1));
    add(r.overhead_hist, q.column_int64(2));
  }
}

// Attempts started per bin (the per-attempt path), then running and queued at each bin's start.
void finish_series(Db& db, std::uint64_t job_id, bool count_starts, ReportData& r) {
  if (r.worker_attempts == 0) return;
  const auto last = static_cast<std::int64_t>(r.bins.size()) - 1;
  if (count_starts) {
    Statement starts(db,
                     "SELECT CAST((start - ?2) / ?3 AS INTEGER) AS b, count(*) FROM attempts "
                     "WHERE job_id = ?1 AND start IS NOT NULL GROUP BY b");
    starts.bind(1, job_id).bind(2, r.t0).bind(3, r.bin_s);
    while (starts.step()) {
      r.bins[static_cast<std::size_t>(std::clamp<std::int64_t>(starts.column_int64(0), 0, last))]
          .started += starts.column_uint64(1);
    }
  }
  // At a bin's start: running = started before it − ended before it.
  const auto total = static_cast<std::int64_t>(r.total_known ? r.total : r.submitted);
  std::int64_t started = 0, ended = 0, finished = 0;
  for (auto& b : r.bins) {
    b.running = started - ended;
    b.queued = std::max<std::int64_t>(0, total - finished - b.running);
    started += static_cast<std::int64_t>(b.started);
    ended += static_cast<std::int64_t>(b.ended);
    finished += static_cast<std::int64_t>(b.finished);
  }
}

// One bar per attempt, or per worker and time bin when there are too many attempts.
void read_timeline(Db& db, std::uint64_t job_id, const ReportLimits& limits, ReportData& r) {
  if (r.workers.empty()) return;
  std::map<std::pair<std::uint64_t, std::string>, std::uint32_t> index;
  for (std::uint32_t i = 0; i < r.workers.size(); ++i) {
    index[{r.workers[i].pool_id, r.workers[i].process}] = i;
  }
  if (r.worker_attempts <= limits.max_timeline_attempts) {
    Statement a(db,
                "SELECT pool_id, process, start, coalesce(elapsed_s, 0), status, minibatch_id "
                "FROM attempts WHERE job_id = ?1 AND start IS NOT NULL AND "
                "coalesce(process, '') != '' ORDER BY start, id");
    a.bind(1, job_id);
    while (a.step()) {
      auto it = index.find({a.column_uint64(0), std::string(a.column_text(1))});
      if (it == index.end()) continue;
      const double s = a.column_double(2) - r.t0;
      r.segments.push_back({.worker = it->second,
                            .t_start = s,
                            .t_end = s + a.column_double(3),
                            .status = std::string(a.column_text(4)),
                            .minibatch = a.column_uint64(5),
                            .attempts = 1});
    }
    return;
  }
  r.timeline_binned = true;
  const auto nbins = std::clamp<std::uint64_t>(
      limits.max_timeline_segments / std::max<std::size_t>(r.workers.size(), 1), 10, 400);
  const double span = std::max(r.last_end - r.t0, 1e-3);
  r.timeline_bin_s = span / static_cast<double>(nbins);
  Statement a(db,
              "SELECT pool_id, process, CAST((start - ?2) / ?3 AS INTEGER) AS b, "
              "total(elapsed_s), sum(status != 'RUN_DONE'), count(*) FROM attempts "
              "WHERE job_id = ?1 AND start IS NOT NULL AND coalesce(process, '') != '' "
              "GROUP BY pool_id, process, b");
  a.bind(1, job_id).bind(2, r.t0).bind(3, r.timeline_bin_s);
  while (a.step()) {
    auto it = index.find({a.column_uint64(0), std::string(a.column_text(1))});
    if (it == index.end()) continue;
    const double t = static_cast<double>(a.column_int64(2)) * r.timeline_bin_s;
    // Busy time is counted in the bin the attempt started in; an attempt longer than a bin
    // fills it.
    const double busy = std::min(a.column_double(3), r.timeline_bin_s);
    r.segments.push_back({.worker = it->second,
                          .t_start = t,
                          .t_end = t + busy,
                          .status = a.column_int64(4) > 0 ? "FAILED" : "RUN_DONE",
                          .minibatch = 0,
                          .attempts = a.column_uint64(5)});
  }
}

void read_failures(Db& db, std::uint64_t job_id, const ReportLimits& limits, ReportData& r) {
  if (r.attempts_failed == 0) return;
  Statement s(db,
              "SELECT status, count(*) FROM attempts WHERE job_id = ?1 AND status != 'RUN_DONE' "
              "GROUP BY status ORDER BY 2 DESC, 1");
  s.bind(1, job_id);
  while (s.step()) r.by_status.emplace_back(std::string(s.column_text(0)), s.column_uint64(1));
  Statement c(db,
              "SELECT coalesce(error_category, ''), count(*) FROM attempts WHERE job_id = ?1 AND "
              "status != 'RUN_DONE' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 50");
  c.bind(1, job_id);
  while (c.step()) r.by_category.emplace_back(std::string(c.column_text(0)), c.column_uint64(1));

  // The first messages of each (status, category), in one pass over the failed attempts.
  Statement g(db,
              "SELECT status, cat, n, minibatch_id, attempt, process, error_message FROM ("
              "SELECT status, coalesce(error_category, '') AS cat, minibatch_id, attempt, "
              "coalesce(process, '') AS process, coalesce(error_message, '') AS error_message, "
              "row_number() OVER (PARTITION BY status, coalesce(error_category, '') "
              "ORDER BY start, id) AS rn, count(*) OVER (PARTITION BY status, "
              "coalesce(error_category, '')) AS n "
              "FROM attempts WHERE job_id = ?1 AND status != 'RUN_DONE') WHERE rn <= ?2 "
              "ORDER BY n DESC, status, cat, rn");
  g.bind(1, job_id).bind(2, static_cast<std::int64_t>(limits.messages_per_failure));
  while (g.step()) {
    if (r.failures.empty() || r.failures.back().status != g.column_text(0) ||
        r.failures.back().category != g.column_text(1)) {
      if (r.failures.size() >= 20) break;
      r.failures.push_back({.status = std::string(g.column_text(0)),
                            .category = std::string(g.column_text(1)),
                            .count = g.column_uint64(2),
                            .first = {}});
    }
    r.failures.back().first.push_back(
        fmt::format("mini-batch {} try {} on {}: {}", g.column_int64(3), g.column_int64(4),
                    g.column_text(5).empty() ? std::string_view("-") : g.column_text(5),
                    first_line(g.column_text(6))));
  }

  Statement n(db, "SELECT count(*) FROM minibatches WHERE job_id = ?1 AND state = 'failed'");
  n.bind(1, job_id);
  if (n.step()) r.exhausted_count = n.column_uint64(0);
  Statement e(db,
              "SELECT m.id, m.tries, m.items, (SELECT a.status || ': ' || "
              "coalesce(a.error_message, '') FROM attempts a WHERE a.job_id = m.job_id AND "
              "a.minibatch_id = m.id ORDER BY a.attempt DESC LIMIT 1) FROM minibatches m "
              "WHERE m.job_id = ?1 AND m.state = 'failed' ORDER BY m.id LIMIT ?2");
  e.bind(1, job_id).bind(2, static_cast<std::int64_t>(limits.max_exhausted));
  while (e.step()) {
    r.exhausted.push_back({.minibatch = e.column_uint64(0),
                           .tries = e.column_uint64(1),
                           .items = e.column_uint64(2),
                           .last = first_line(e.column_text(3))});
  }
}

// Resource samples averaged into time bins, one series per node and per worker process.
void read_resources(Db& db, std::uint64_t job_id, std::uint32_t nbins, ReportData& r) {
  Statement range(db,
                  "SELECT min(time), max(time), count(*) FROM node_resource_samples "
                  "WHERE job_id = ?1");
  range.bind(1, job_id);
  if (!range.step() || range.column_int64(2) == 0) return;
  const double lo = std::min(range.column_double(0), r.t0);
  const double w = std::max(range.column_double(1) - lo, 1e-3) / nbins;
  Statement node(db,
                 "SELECT node, CAST((time - ?2) / ?3 AS INTEGER) AS b, avg(cpu_percent), "
                 "avg(mem_used_mb), max(mem_total_mb) FROM node_resource_samples "
                 "WHERE job_id = ?1 GROUP BY node, b ORDER BY node, b");
  node.bind(1, job_id).bind(2, lo).bind(3, w);
  while (node.step()) {
    if (r.node_series.empty() || r.node_series.back().node != node.column_text(0)) {
      r.node_series.push_back({});
      r.node_series.back().node = node.column_text(0);
    }
    auto& s = r.node_series.back();
    s.t.push_back(lo - r.t0 + (static_cast<double>(node.column_int64(1)) + 0.5) * w);
    s.cpu.push_back(node.column_double(2));
    s.mem.push_back(node.column_double(3));
    s.mem_total = std::max(s.mem_total, node.column_double(4));
  }
  Statement proc(db,
                 "SELECT node, coalesce(pool, ''), process, CAST((time - ?2) / ?3 AS INTEGER) "
                 "AS b, avg(cpu_percent), avg(rss_mb) FROM process_resource_samples "
                 "WHERE job_id = ?1 GROUP BY node, pool, process, b ORDER BY node, pool, "
                 "process, b");
  proc.bind(1, job_id).bind(2, lo).bind(3, w);
  while (proc.step()) {
    if (r.process_series.empty() || r.process_series.back().node != proc.column_text(0) ||
        r.process_series.back().pool != proc.column_text(1) ||
        r.process_series.back().process != proc.column_text(2)) {
      if (r.process_series.size() >= 64) break;  // enough lines for one chart
      r.process_series.push_back({});
      r.process_series.back().node = proc.column_text(0);
      r.process_series.back().pool = proc.column_text(1);
      r.process_series.back().process = proc.column_text(2);
    }
    auto& s = r.process_series.back();
    s.t.push_back(lo - r.t0 + (static_cast<double>(proc.column_int64(3)) + 0.5) * w);
    s.cpu.push_back(proc.column_double(4));
    s.mem.push_back(proc.column_double(5));
  }
}

#undef FANOUT_MEASURED

}  // namespace

std::string ReportData::setting(const std::string& key, const std::string& fallback) const {
  for (const auto& [k, v] : settings) {
    if (k == key) return v;
  }
  return fallback;
}

Expected<ReportData> read_report_data(const std::string& db_path, std::uint64_t job_id,
                                      const ReportLimits& limits) {
  try {
    std::error_code ec;
    if (!std::filesystem::exists(db_path, ec)) {
      return make_error(ErrorCode::NotFound, db_path + ": no such store");
    }
    Db db(db_path, Db::Mode::ReadOnly);
    db.exec("PRAGMA busy_timeout = 5000", "set busy_timeout");
    const auto version = db.query_int("PRAGMA user_version");
    if (version != kSchemaVersion) {
      return make_error(ErrorCode::Version,
                        fmt::format("{}: store schema version {}; this fanout reads version {}",
                                    db_path, version, kSchemaVersion));
    }
    // One read transaction: every figure is of the same moment, even while the job runs.
    db.exec("BEGIN", "begin the report's read transaction");
    ReportData r;
    r.snapshot = now_unix();
    read_job(db, job_id, r);
    if (r.attempts > limits.max_timeline_attempts && r.started > 0) {
      r.t0 = r.started;
      read_workers_binned(db, job_id, limits, r);
    } else {
      read_workers(db, job_id, r);
      r.t0 = r.started > 0 ? r.started : r.first_start;
      if (r.first_start > 0) r.t0 = std::min(r.t0, r.first_start);
    }
    read_pools(db, r);
    const bool binned = r.timeline_binned;  // stats, bins and starts already read
    if (!binned) {
      read_run_stats(db, job_id, r);
      size_bins(limits.series_bins, r);
    }
    shape_histogram(r.run_hist, limits.histogram_bins);
    shape_histogram(r.overhead_hist, limits.histogram_bins);
    read_ends_and_histograms(db, job_id, limits.histogram_bins, r);
    finish_series(db, job_id, !binned, r);
    if (!binned) read_timeline(db, job_id, limits, r);
    read_failures(db, job_id, limits, r);
    read_resources(db, job_id, limits.resource_bins, r);
    db.exec("COMMIT", "end the report's read transaction");
    return r;
  } catch (const Failure& f) {
    return make_error(f.error().code, f.error().message);
  }
}

}  // namespace fanout::store
