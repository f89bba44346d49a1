// The figures made from a job's rows. See report_figures.hpp and docs/tuning.md.
#include "fanout/report/report_figures.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <tuple>

#include "fanout/util/error.hpp"

namespace fanout::report {

void PointLog::push_back(const AttemptPoint& p) {
  tail_.push_back(p);
  ++size_;
  if (tail_.size() < kChunk || in_memory_) return;
  if (!file_) {
    file_.reset(std::tmpfile());
    if (!file_) {
      in_memory_ = true;  // no temporary file: kept in memory, as before
      return;
    }
  }
  if (std::fseek(file_.get(), 0, SEEK_END) != 0 ||
      std::fwrite(tail_.data(), sizeof(AttemptPoint), tail_.size(), file_.get()) != tail_.size()) {
    // A full disk: what is not written stays in memory, and so do the points after it.
    in_memory_ = true;
    return;
  }
  spilled_ += tail_.size();
  tail_.clear();
}

void PointLog::read_chunk(std::size_t from, std::vector<AttemptPoint>& chunk) const {
  chunk.resize(std::min(kChunk, spilled_ - from));
  if (std::fflush(file_.get()) != 0 ||
      std::fseek(file_.get(), static_cast<long>(from * sizeof(AttemptPoint)), SEEK_SET) != 0 ||
      std::fread(chunk.data(), sizeof(AttemptPoint), chunk.size(), file_.get()) != chunk.size()) {
    throw Failure(ErrorCode::Io, fmt::format("report figures: reading back attempt point {} of "
                                             "{} from their temporary file: {}",
                                             from, spilled_, std::strerror(errno)));
  }
}

std::vector<AttemptPoint> PointLog::to_vector() const {
  std::vector<AttemptPoint> v;
  v.reserve(size_);
  for_each([&](const AttemptPoint& p) { v.push_back(p); });
  return v;
}

std::string first_line(std::string_view s) {
  s = s.substr(0, s.find('\n'));
  if (s.size() > 300) s = s.substr(0, 300);
  return std::string(s);
}

std::uint8_t AttemptTally::status_index(std::string_view s) {
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    if (statuses[i] == s) return static_cast<std::uint8_t>(i);
  }
  if (statuses.size() >= 255) return 254;  // statuses are a handful; never more
  statuses.emplace_back(s);
  return static_cast<std::uint8_t>(statuses.size() - 1);
}

void AttemptTally::add_to_worker(const store::AttemptRow& a, AttemptPoint& p) {
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
  if (w.device.empty()) w.device = a.device;
  ++w.attempts;
  w.succeeded += p.ok ? 1 : 0;
  w.first_start = std::min(w.first_start, a.start);
  if (a.has_elapsed) w.last_end = std::max(w.last_end, a.start + a.elapsed_s);
  w.elapsed_s += a.has_elapsed ? a.elapsed_s : 0;
  w.run_s += a.has_run ? a.run_s : 0;
  w.cpu_s += a.has_cpu ? a.cpu_s : 0;
}

void AttemptTally::add(const store::AttemptRow& a) {
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
  if (!a.has_start) return;  // it never reached a worker: no place in time
  AttemptPoint p;
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
  if (!a.process.empty()) add_to_worker(a, p);
  if (p.measured) {
    run_cpu_s += a.has_cpu ? a.cpu_s : 0;
    run_elapsed_s += a.elapsed_s;
  }
  points.push_back(p);
}

// The median time of the attempts that ran (0 when none did): the element at n / 2 of their
// sorted times, found in two passes over the points by the bits of each float (a positive
// float's bits order as it does), holding 2 × 65,536 counts instead of every time.
double median_elapsed(const PointLog& points) {
  std::vector<std::uint64_t> high(65536, 0);
  std::uint64_t n = 0;
  points.for_each([&](const AttemptPoint& p) {
    if (p.elapsed > 0) {
      ++high[std::bit_cast<std::uint32_t>(p.elapsed) >> 16];
      ++n;
    }
  });
  if (n == 0) return 0;
  std::uint64_t rank = n / 2;  // 0-based rank of the median among the times
  std::uint32_t top = 0;
  while (rank >= high[top]) rank -= high[top++];
  std::vector<std::uint64_t> low(65536, 0);
  points.for_each([&](const AttemptPoint& p) {
    const auto bits = std::bit_cast<std::uint32_t>(p.elapsed);
    if (p.elapsed > 0 && (bits >> 16) == top) ++low[bits & 0xffffU];
  });
  std::uint32_t bottom = 0;
  while (rank >= low[bottom]) rank -= low[bottom++];
  return std::bit_cast<float>((top << 16) | bottom);
}

void order_workers(AttemptTally& tally, ReportData& r) {
  std::vector<std::uint32_t> order(tally.workers.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const auto& x = tally.workers[a];
    const auto& y = tally.workers[b];
    return std::tie(x.pool, x.pool_id, x.process) < std::tie(y.pool, y.pool_id, y.process);
  });
  std::vector<std::uint32_t> renumber(order.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) {
    renumber[order[i]] = i;
    r.workers.push_back(std::move(tally.workers[order[i]]));
  }
  tally.workers.clear();
  tally.points.renumber_workers(std::move(renumber));
  for (const auto& w : r.workers) {
    r.worker_attempts += w.attempts;
    r.first_start = r.first_start == 0 ? w.first_start : std::min(r.first_start, w.first_start);
    r.last_end = std::max(r.last_end, w.last_end);
  }
}

namespace {

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

// Bin `k` of `nbins` holding time `t`, clamped into range.
std::size_t bin_index(double t, double t0, double width, std::size_t nbins) {
  return static_cast<std::size_t>(
      std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor((t - t0) / width)), 0,
                               static_cast<std::int64_t>(nbins) - 1));
}

// `w` rounded up to 1, 2 or 5 × 10^k, so that bins read as 0.2 s, 5 s, 10 s.
double nice_width(double w) {
  const double decade = std::pow(10.0, std::floor(std::log10(w)));
  for (double step : {1.0, 2.0, 5.0, 10.0}) {
    if (step * decade >= w * (1 - 1e-6)) return step * decade;  // 1e-6: float timings
  }
  return 10 * decade;
}

// How many time bins the series gets: limits.series_bins at most, and few enough that a bin of
// the stretch where attempts ran (first start to last end) holds about 3 of its `attempts`, a
// rate rather than a comb of 0 and 1; a start-up before the first attempt adds bins, not width.
std::uint32_t series_bin_count(std::size_t attempts, const ReportLimits& limits,
                               const ReportData& r) {
  const double active = std::max(r.last_end - r.first_start, 1e-3);
  const double t0 = r.started > 0 && r.first_start > 0 ? std::min(r.started, r.first_start)
                                                       : std::max(r.started, r.first_start);
  const double whole = std::max(r.last_end, r.ended > 0 ? r.ended : r.snapshot) - t0;
  const double n = static_cast<double>(attempts) / 3 * std::max(whole, active) / active;
  return static_cast<std::uint32_t>(
      std::clamp(n, 1.0, static_cast<double>(std::max<std::uint32_t>(limits.series_bins, 1))));
}

}  // namespace

void fill_histograms(const PointLog& points, std::uint32_t nbins, ReportData::Histogram& rh,
                     ReportData::Histogram& oh) {
  double run_sum = 0, over_sum = 0;
  // run() is timed inside the worker, the attempt by the pool, each rounded when stored: for an
  // attempt with next to no overhead the worker's figure can be the larger. No time is negative.
  auto overhead = [](const AttemptPoint& p) {
    return std::max(0.0, static_cast<double>(p.elapsed) - p.run);
  };
  points.for_each([&](const AttemptPoint& p) {
    if (!p.measured) return;
    const double run = p.run, over = overhead(p);
    oh.clamped += static_cast<double>(p.elapsed) < p.run ? 1 : 0;
    rh.min = rh.n == 0 ? run : std::min(rh.min, run);
    rh.max = rh.n == 0 ? run : std::max(rh.max, run);
    oh.min = oh.n == 0 ? over : std::min(oh.min, over);
    oh.max = oh.n == 0 ? over : std::max(oh.max, over);
    ++rh.n;
    ++oh.n;
    run_sum += run;
    over_sum += over;
  });
  if (rh.n > 0) {
    rh.mean = run_sum / static_cast<double>(rh.n);
    oh.mean = over_sum / static_cast<double>(oh.n);
  }
  shape_histogram(rh, nbins);
  shape_histogram(oh, nbins);
  points.for_each([&](const AttemptPoint& p) {
    if (!p.measured) return;
    count_in(rh, p.run);
    count_in(oh, overhead(p));
  });
}

void fill_series_bins(const PointLog& points, std::uint32_t nbins, std::uint32_t max_retries,
                      ReportData& r) {
  r.t0 = r.started > 0 ? r.started : r.first_start;
  if (r.first_start > 0) r.t0 = std::min(r.t0, r.first_start);
  const double end = std::max(r.last_end, r.ended > 0 ? r.ended : r.snapshot);
  const double span = std::max(end - r.t0, 1e-3);
  r.bin_s = nice_width(std::max(span / nbins, median_elapsed(points)));
  // The end itself falls into one more bin.
  r.bins.resize(static_cast<std::size_t>(std::ceil(span / r.bin_s - 1e-6)) + 1);
  for (std::size_t i = 0; i < r.bins.size(); ++i) r.bins[i].t = static_cast<double>(i) * r.bin_s;
  points.for_each([&](const AttemptPoint& p) {
    ++r.bins[bin_index(p.start, r.t0, r.bin_s, r.bins.size())].started;
    auto& e = r.bins[bin_index(p.start + p.elapsed, r.t0, r.bin_s, r.bins.size())];
    ++e.ended;
    e.succeeded += p.ok ? 1 : 0;
    e.items += p.items;
    e.failed += p.ok ? 0 : 1;
    e.finished += (p.ok || p.attempt > max_retries) ? 1 : 0;
  });
  if (r.worker_attempts == 0 && points.empty()) return;
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

void fill_timeline(const PointLog& points, const std::vector<std::string>& statuses,
                   const ReportLimits& limits, ReportData& r) {
  if (r.workers.empty()) return;
  if (r.worker_attempts <= limits.max_timeline_attempts) {
    points.for_each([&](const AttemptPoint& p) {
      if (p.worker == kNoWorker) return;
      r.segments.push_back({.worker = p.worker,
                            .t_start = p.start - r.t0,
                            .t_end = p.start - r.t0 + p.elapsed,
                            .status = statuses[p.status],
                            .minibatch = p.minibatch,
                            .attempts = 1});
    });
    std::stable_sort(r.segments.begin(), r.segments.end(),
                     [](const auto& a, const auto& b) { return a.t_start < b.t_start; });
    return;
  }
  r.timeline_binned = true;
  const std::uint64_t nbins =
      std::clamp<std::uint64_t>(limits.max_timeline_segments / r.workers.size(), 10, 400);
  r.timeline_bin_s = std::max(r.last_end - r.t0, 1e-3) / static_cast<double>(nbins);
  std::vector<double> busy(r.workers.size() * nbins, 0);  // worker × bin busy seconds
  std::vector<std::uint64_t> n(busy.size(), 0), failed(busy.size(), 0);
  points.for_each([&](const AttemptPoint& p) {
    if (p.worker == kNoWorker) return;
    const std::size_t k = p.worker * nbins + bin_index(p.start, r.t0, r.timeline_bin_s, nbins);
    busy[k] += p.elapsed;
    ++n[k];
    failed[k] += p.ok ? 0 : 1;
  });
  for (std::size_t k = 0; k < n.size(); ++k) {
    if (n[k] == 0) continue;
    const double t = static_cast<double>(k % nbins) * r.timeline_bin_s;
    // Busy time counts in the bin the attempt started in; an attempt longer than a bin fills it.
    r.segments.push_back({.worker = static_cast<std::uint32_t>(k / nbins),
                          .t_start = t,
                          .t_end = t + std::min(busy[k], r.timeline_bin_s),
                          .status = failed[k] > 0 ? "FAILED" : "RUN_DONE",
                          .minibatch = 0,
                          .attempts = n[k]});
  }
}

void rank_failures(AttemptTally& tally, ReportData& r) {
  auto by_count = [](std::map<std::string, std::uint64_t>& m, std::size_t limit) {
    std::vector<std::pair<std::string, std::uint64_t>> v(m.begin(), m.end());
    std::stable_sort(v.begin(), v.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    if (v.size() > limit) v.resize(limit);
    return v;
  };
  r.by_status = by_count(tally.by_status, 1000);
  r.by_category = by_count(tally.by_category, 50);
  for (auto& [key, g] : tally.groups) {
    g.status = key.first;
    g.category = key.second;
    r.failures.push_back(std::move(g));
  }
  std::stable_sort(r.failures.begin(), r.failures.end(),
                   [](const auto& a, const auto& b) { return a.count > b.count; });
  if (r.failures.size() > 20) r.failures.resize(20);
}

std::vector<ReportData::Pool> pool_totals(const std::vector<ReportData::Worker>& workers,
                                          const std::map<std::uint64_t, store::PoolRow>& rows) {
  std::map<std::uint64_t, ReportData::Pool> pools;
  for (const auto& x : workers) {
    auto [it, fresh] = pools.try_emplace(x.pool_id);
    auto& pool = it->second;
    if (fresh) {
      pool.id = x.pool_id;
      pool.name = x.pool;
      pool.node = x.node;
      if (auto row = rows.find(x.pool_id); row != rows.end()) {
        pool.state = row->second.state;
        pool.workers = row->second.workers;
        pool.prefetch = row->second.prefetch;
      }
      pool.first_start = x.first_start;
    }
    pool.attempts += x.attempts;
    pool.elapsed_s += x.elapsed_s;
    pool.run_s += x.run_s;
    pool.cpu_s += x.cpu_s;
    pool.first_start = std::min(pool.first_start, x.first_start);
    pool.last_end = std::max(pool.last_end, x.last_end);
  }
  std::vector<ReportData::Pool> out;
  for (auto& [id, pool] : pools) {
    if (pool.workers == 0) {
      pool.workers = static_cast<std::uint64_t>(std::count_if(
          workers.begin(), workers.end(), [&](const auto& x) { return x.pool_id == id; }));
    }
    out.push_back(std::move(pool));
  }
  return out;
}

void finish_tally(AttemptTally& tally, const ReportLimits& limits, std::uint32_t max_retries,
                  ReportData& r) {
  r.attempts = tally.attempts;
  r.attempts_failed = tally.attempts_failed;
  r.run_cpu_s = tally.run_cpu_s;
  r.run_elapsed_s = tally.run_elapsed_s;
  order_workers(tally, r);
  fill_histograms(tally.points, limits.histogram_bins, r.run_hist, r.overhead_hist);
  fill_series_bins(tally.points, series_bin_count(tally.points.size(), limits, r), max_retries, r);
  fill_timeline(tally.points, tally.statuses, limits, r);
  rank_failures(tally, r);
}

}  // namespace fanout::report
