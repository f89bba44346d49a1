// The figures behind report.html, compare and tune. See report_queries.hpp and docs/tuning.md.
#include "fanout/store/report_queries.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>

#include <tuple>

#include "fanout/store/db.hpp"
#include "fanout/store/report_source.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store {

namespace {

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The first line of a message, at most 300 bytes.
std::string first_line(std::string_view s) {
  s = s.substr(0, s.find('\n'));
  if (s.size() > 300) s = s.substr(0, 300);
  return std::string(s);
}

// The job's row and settings.
void read_job(Db& db, std::uint64_t job_id, ReportData& r) {
  Statement job(db,
                "SELECT j.name, j.state, j.reason, coalesce(j.spec_path, ''), "
                "coalesce(j.runtime, ''), coalesce(j.entry_script, ''), "
                "coalesce(j.output_path, ''), coalesce(j.log_dir, ''), j.submit_done, "
                "coalesce(j.started, j.created, 0), coalesce(j.ended, 0), j.total, "
                "coalesce(j.started, 0) FROM jobs j WHERE j.id = ?1");
  job.bind(1, job_id);
  if (!job.step()) {
    throw Failure(ErrorCode::NotFound,
                  fmt::format("{}: no job {} in this store", db.path(), job_id));
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
  r.job_started = job.column_double(12);

  Statement settings(db, "SELECT key, value FROM job_settings WHERE job_id = ?1 ORDER BY key");
  settings.bind(1, job_id);
  while (settings.step()) {
    r.settings.emplace_back(std::string(settings.column_text(0)),
                            std::string(settings.column_text(1)));
  }
}

// The mini-batch counts of view job_counts: one scan of the job's mini-batches.
void read_counts(Db& db, std::uint64_t job_id, ReportData& r) {
  Statement c(db,
              "SELECT count(*), coalesce(sum(state = 'succeeded'), 0), "
              "coalesce(sum(state = 'failed'), 0), coalesce(sum(state = 'pending'), 0), "
              "coalesce(sum(state = 'running'), 0), "
              "coalesce(sum(CASE WHEN state = 'succeeded' THEN succeeded ELSE 0 END), 0), "
              "coalesce(sum(CASE state WHEN 'succeeded' THEN failed "
              "WHEN 'failed' THEN items ELSE 0 END), 0) FROM minibatches WHERE job_id = ?1");
  c.bind(1, job_id);
  if (!c.step()) return;
  r.submitted = c.column_uint64(0);
  r.total = std::max(r.total, r.submitted);
  r.succeeded = c.column_uint64(1);
  r.failed = c.column_uint64(2);
  r.pending = c.column_uint64(3);
  r.running = c.column_uint64(4);
  r.items_succeeded = c.column_uint64(5);
  r.items_failed = c.column_uint64(6);
}

// What the pass keeps of one attempt that reached a worker (about 40 bytes; the figures need
// the job's span and the histograms' ranges, known only at the end).
struct Point {
  double start = 0;
  float elapsed = 0, run = 0, cpu = 0;
  std::uint32_t worker = 0;  // index into Pass::workers; kNoWorker when it never reached one
  std::uint32_t attempt = 0;
  std::uint64_t minibatch = 0;
  std::uint32_t items = 0;  // items of a RUN_DONE attempt
  std::uint8_t status = 0;  // index into Pass::statuses
  bool ok = false, measured = false;
};
constexpr std::uint32_t kNoWorker = 0xffffffffU;

struct Pass {
  std::deque<Point> points{};  // no doubling copies: a million points is 48 MB
  std::vector<ReportData::Worker> workers{};
  std::map<std::pair<std::uint64_t, std::string>, std::uint32_t> worker_index{};
  std::vector<std::string> statuses{};
  std::map<std::string, std::uint64_t> by_status{}, by_category{};
  std::map<std::pair<std::string, std::string>, ReportData::FailureGroup> groups{};
  std::uint32_t messages_per_failure = 3;

  std::uint8_t status_index(std::string_view s) {
    for (std::size_t i = 0; i < statuses.size(); ++i) {
      if (statuses[i] == s) return static_cast<std::uint8_t>(i);
    }
    if (statuses.size() >= 255) return 254;  // statuses are a handful; never more
    statuses.emplace_back(s);
    return static_cast<std::uint8_t>(statuses.size() - 1);
  }

  std::uint64_t attempts = 0, attempts_failed = 0;
  std::uint64_t done_items_ok = 0, done_items_failed = 0;  // of RUN_DONE attempts
  double run_cpu_s = 0, run_elapsed_s = 0;

  void add(const AttemptRow& a) {
    ++attempts;
    const bool ok = a.status == "RUN_DONE";
    if (ok) {
      done_items_ok += a.has_succeeded ? static_cast<std::uint64_t>(a.succeeded) : 0;
      done_items_failed += a.has_failed ? static_cast<std::uint64_t>(a.failed) : 0;
    } else {
      ++attempts_failed;
      ++by_status[std::string(a.status)];
      ++by_category[std::string(a.error_category)];
      auto& g = groups[{std::string(a.status), std::string(a.error_category)}];
      ++g.count;
      if (g.first.size() < messages_per_failure) {
        g.first.push_back(fmt::format("mini-batch {} try {} on {}: {}", a.minibatch_id, a.attempt,
                                      a.process.empty() ? std::string_view("-") : a.process,
                                      first_line(a.error_message)));
      }
    }
    if (!a.has_start) return;
    Point p;
    p.start = a.start;
    p.elapsed = a.has_elapsed ? static_cast<float>(a.elapsed_s) : 0.0F;
    p.run = static_cast<float>(a.run_s);
    p.cpu = static_cast<float>(a.cpu_s);
    p.attempt = static_cast<std::uint32_t>(a.attempt);
    p.minibatch = a.minibatch_id;
    p.items = ok && a.has_items ? static_cast<std::uint32_t>(a.items) : 0;
    p.status = status_index(a.status);
    p.ok = ok;
    p.measured = ok && a.has_run && a.has_elapsed;
    p.worker = kNoWorker;
    if (!a.process.empty()) {
      auto [it, fresh] = worker_index.try_emplace({a.pool_id, std::string(a.process)},
                                                  static_cast<std::uint32_t>(workers.size()));
      if (fresh) {
        ReportData::Worker w;
        w.pool_id = a.pool_id;
        w.pool = a.pool;
        w.node = a.node;
        w.process = a.process;
        w.first_start = a.start;
        workers.push_back(std::move(w));
      }
      p.worker = it->second;
      auto& w = workers[p.worker];
      ++w.attempts;
      w.succeeded += ok ? 1 : 0;
      w.first_start = std::min(w.first_start, a.start);
      if (a.has_elapsed) w.last_end = std::max(w.last_end, a.start + a.elapsed_s);
      w.elapsed_s += a.has_elapsed ? a.elapsed_s : 0;
      w.run_s += a.has_run ? a.run_s : 0;
      w.cpu_s += a.has_cpu ? a.cpu_s : 0;
    }
    if (p.measured) {
      run_cpu_s += a.has_cpu ? a.cpu_s : 0;
      run_elapsed_s += a.elapsed_s;
    }
    points.push_back(p);
  }
};

// Equal bins from the minimum to the maximum (one bin when they are equal).
void shape_histogram(ReportData::Histogram& h, std::uint32_t nbins) {
  if (h.n == 0) return;
  h.lo = h.min;
  h.width = h.max > h.min ? (h.max - h.min) / nbins : 0;
  h.counts.assign(h.width > 0 ? nbins : 1, 0);
}

void count_in(ReportData::Histogram& h, double v) {
  if (h.counts.empty()) return;
  std::int64_t i = h.width > 0 ? static_cast<std::int64_t>((v - h.lo) / h.width) : 0;
  i = std::clamp<std::int64_t>(i, 0, static_cast<std::int64_t>(h.counts.size()) - 1);
  ++h.counts[static_cast<std::size_t>(i)];
}

// Everything drawn from the pass's points: workers in order, t0 and the series' bins, the
// histograms, the timeline and the failures.
void finish_pass(Pass& pass, const ReportLimits& limits, ReportData& r) {
  r.attempts = pass.attempts;
  r.attempts_failed = pass.attempts_failed;
  r.run_cpu_s = pass.run_cpu_s;
  r.run_elapsed_s = pass.run_elapsed_s;
  // Workers by pool, pool id, process; points renumbered to match.
  std::vector<std::uint32_t> order(pass.workers.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const auto& x = pass.workers[a];
    const auto& y = pass.workers[b];
    return std::tie(x.pool, x.pool_id, x.process) < std::tie(y.pool, y.pool_id, y.process);
  });
  std::vector<std::uint32_t> renumber(order.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) {
    renumber[order[i]] = i;
    r.workers.push_back(std::move(pass.workers[order[i]]));
  }
  for (const auto& w : r.workers) {
    r.worker_attempts += w.attempts;
    r.first_start = r.first_start == 0 ? w.first_start : std::min(r.first_start, w.first_start);
    r.last_end = std::max(r.last_end, w.last_end);
  }

  // run() and overhead statistics over the measured attempts.
  auto& rh = r.run_hist;
  auto& oh = r.overhead_hist;
  double run_sum = 0, over_sum = 0;
  for (auto& p : pass.points) {
    if (p.worker != kNoWorker) p.worker = renumber[p.worker];
    if (!p.measured) continue;
    const double run = p.run, over = static_cast<double>(p.elapsed) - p.run;
    rh.min = rh.n == 0 ? run : std::min(rh.min, run);
    rh.max = rh.n == 0 ? run : std::max(rh.max, run);
    oh.min = oh.n == 0 ? over : std::min(oh.min, over);
    oh.max = oh.n == 0 ? over : std::max(oh.max, over);
    ++rh.n;
    ++oh.n;
    run_sum += run;
    over_sum += over;
  }
  if (rh.n > 0) {
    rh.mean = run_sum / static_cast<double>(rh.n);
    oh.mean = over_sum / static_cast<double>(oh.n);
  }
  shape_histogram(rh, limits.histogram_bins);
  shape_histogram(oh, limits.histogram_bins);

  // The series' time bins, from t0 to the job's end (or the snapshot).
  r.t0 = r.started > 0 ? r.started : r.first_start;
  if (r.first_start > 0) r.t0 = std::min(r.t0, r.first_start);
  const double end = std::max(r.last_end, r.ended > 0 ? r.ended : r.snapshot);
  const std::uint32_t nbins = limits.series_bins;
  r.bin_s = std::max(end - r.t0, 1e-3) / nbins;
  r.bins.resize(nbins + 1);  // the end itself falls into one more bin
  for (std::size_t i = 0; i < r.bins.size(); ++i) r.bins[i].t = static_cast<double>(i) * r.bin_s;
  const auto last = static_cast<std::int64_t>(r.bins.size()) - 1;
  auto bin_of = [&](double t) {
    return static_cast<std::size_t>(std::clamp<std::int64_t>(
        static_cast<std::int64_t>(std::floor((t - r.t0) / r.bin_s)), 0, last));
  };
  std::int64_t max_retries = 3;
  try {
    max_retries = std::stoll(r.setting("max_retries", "3"));
  } catch (const std::exception&) {
    max_retries = 3;
  }

  // The timeline: one bar per attempt, or per worker and time bin when there are many.
  const bool binned = r.worker_attempts > limits.max_timeline_attempts;
  std::uint64_t tl_bins = 0;
  std::vector<double> busy;               // binned: worker × bin busy seconds
  std::vector<std::uint64_t> tl_n, tl_f;  // binned: attempts, failed ones
  if (binned && !r.workers.empty()) {
    r.timeline_binned = true;
    tl_bins = std::clamp<std::uint64_t>(limits.max_timeline_segments / r.workers.size(), 10, 400);
    r.timeline_bin_s = std::max(r.last_end - r.t0, 1e-3) / static_cast<double>(tl_bins);
    busy.assign(r.workers.size() * tl_bins, 0);
    tl_n.assign(busy.size(), 0);
    tl_f.assign(busy.size(), 0);
  }
  for (const auto& p : pass.points) {
    auto& s = r.bins[bin_of(p.start)];
    ++s.started;
    auto& e = r.bins[bin_of(p.start + p.elapsed)];
    ++e.ended;
    e.succeeded += p.ok ? 1 : 0;
    e.items += p.items;
    e.failed += p.ok ? 0 : 1;
    e.finished += (p.ok || p.attempt > max_retries) ? 1 : 0;
    if (p.measured) {
      count_in(rh, p.run);
      count_in(oh, static_cast<double>(p.elapsed) - p.run);
    }
    if (p.worker == kNoWorker || r.workers.empty()) continue;
    if (!binned) {
      r.segments.push_back({.worker = p.worker,
                            .t_start = p.start - r.t0,
                            .t_end = p.start - r.t0 + p.elapsed,
                            .status = pass.statuses[p.status],
                            .minibatch = p.minibatch,
                            .attempts = 1});
      continue;
    }
    const auto b = static_cast<std::uint64_t>(std::clamp<std::int64_t>(
        static_cast<std::int64_t>(std::floor((p.start - r.t0) / r.timeline_bin_s)), 0,
        static_cast<std::int64_t>(tl_bins) - 1));
    const std::size_t k = p.worker * tl_bins + b;
    busy[k] += p.elapsed;
    ++tl_n[k];
    tl_f[k] += p.ok ? 0 : 1;
  }
  if (!binned) {
    std::stable_sort(r.segments.begin(), r.segments.end(),
                     [](const auto& a, const auto& b) { return a.t_start < b.t_start; });
  } else {
    for (std::size_t k = 0; k < tl_n.size(); ++k) {
      if (tl_n[k] == 0) continue;
      const double t = static_cast<double>(k % tl_bins) * r.timeline_bin_s;
      // Busy time counts in the bin the attempt started in; an attempt longer than a bin fills it.
      r.segments.push_back({.worker = static_cast<std::uint32_t>(k / tl_bins),
                            .t_start = t,
                            .t_end = t + std::min(busy[k], r.timeline_bin_s),
                            .status = tl_f[k] > 0 ? "FAILED" : "RUN_DONE",
                            .minibatch = 0,
                            .attempts = tl_n[k]});
    }
  }

  // At a bin's start: running = started before it − ended before it.
  if (r.worker_attempts > 0 || !pass.points.empty()) {
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

  // Failures: most frequent first, then by name.
  auto by_count = [](std::map<std::string, std::uint64_t>& m, std::size_t limit) {
    std::vector<std::pair<std::string, std::uint64_t>> v(m.begin(), m.end());
    std::stable_sort(v.begin(), v.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    if (v.size() > limit) v.resize(limit);
    return v;
  };
  r.by_status = by_count(pass.by_status, 1000);
  r.by_category = by_count(pass.by_category, 50);
  for (auto& [key, g] : pass.groups) {
    g.status = key.first;
    g.category = key.second;
    r.failures.push_back(std::move(g));
  }
  std::stable_sort(r.failures.begin(), r.failures.end(),
                   [](const auto& a, const auto& b) { return a.count > b.count; });
  if (r.failures.size() > 20) r.failures.resize(20);
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

// The mini-batches that exhausted their tries (counted by read_job()): the first ones.
void read_exhausted(Db& db, std::uint64_t job_id, const ReportLimits& limits, ReportData& r) {
  r.exhausted_count = r.failed;
  if (r.failed == 0) return;
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

}  // namespace

std::string ReportData::setting(const std::string& key, const std::string& fallback) const {
  for (const auto& [k, v] : settings) {
    if (k == key) return v;
  }
  return fallback;
}

struct ReportDataPass::State {
  Pass pass;
};

ReportDataPass::ReportDataPass(const ReportLimits& limits) : s_(std::make_unique<State>()) {
  s_->pass.messages_per_failure = limits.messages_per_failure;
}
ReportDataPass::~ReportDataPass() = default;

void ReportDataPass::add(const AttemptRow& a) { s_->pass.add(a); }

ReportData ReportDataPass::finish(ReportSource& src, std::uint64_t job_id,
                                  const ReportLimits& limits) {
  ReportData r;
  r.snapshot = now_unix();
  read_job(src.db(), job_id, r);
  const Pass& p = s_->pass;
  if (r.ended > 0 && r.state == "succeeded" && r.total_known && p.attempts_failed == 0 &&
      p.attempts == r.total) {
    // Every attempt succeeded and there is one per mini-batch: each mini-batch's row holds its
    // attempt's counts (the writer records both from the one result), so the counts follow
    // from the pass without a scan of the mini-batches.
    r.submitted = r.succeeded = r.total;
    r.items_succeeded = p.done_items_ok;
    r.items_failed = p.done_items_failed;
  } else {
    read_counts(src.db(), job_id, r);
  }
  finish_pass(s_->pass, limits, r);
  read_pools(src.db(), r);
  read_exhausted(src.db(), job_id, limits, r);
  read_resources(src.db(), job_id, limits.resource_bins, r);
  s_ = std::make_unique<State>();  // the points are no longer needed
  return r;
}

ReportData report_data(ReportSource& src, std::uint64_t job_id, const ReportLimits& limits,
                       const std::function<void(const AttemptRow&)>& on_attempt) {
  ReportDataPass pass(limits);
  src.each_attempt(job_id, [&](const AttemptRow& a) {
    if (on_attempt) on_attempt(a);
    pass.add(a);
  });
  return pass.finish(src, job_id, limits);
}

Expected<ReportData> read_report_data(const std::string& db_path, std::uint64_t job_id,
                                      const ReportLimits& limits) {
  try {
    // One read transaction: every figure is of the same moment, even while the job runs.
    ReportSource src(db_path);
    ReportData r = report_data(src, job_id, limits, {});
    src.finish();
    return r;
  } catch (const Failure& f) {
    return make_error(f.error().code, f.error().message);
  }
}

}  // namespace fanout::store
