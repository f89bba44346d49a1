// The figures of report.html, compare and tune made from a job's rows: the tally of one pass over
// its attempts (AttemptTally), then the workers in order, the run() and overhead histograms, the
// time bins of the series, the timeline and the failure ranking, each a pure function of that
// tally and the job's row (no store, no I/O). Definitions: docs/tuning.md.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fanout/report/report_data.hpp"
#include "fanout/store/report_queries.hpp"
#include "fanout/store/report_source.hpp"

namespace fanout::report {

// The first line of a message, at most 300 bytes.
[[nodiscard]] std::string first_line(std::string_view s);

// What the tally keeps of one attempt that has a start time (about 40 bytes: the figures need
// the job's span and the histograms' ranges, known only at the end).
struct AttemptPoint {
  double start = 0;
  float elapsed = 0, run = 0, cpu = 0;
  std::uint32_t worker = 0;  // index into AttemptTally::workers; kNoWorker when it reached none
  std::uint32_t attempt = 0;
  std::uint64_t minibatch = 0;
  std::uint32_t items = 0;  // items of a RUN_DONE attempt
  std::uint8_t status = 0;  // index into AttemptTally::statuses
  bool ok = false;          // RUN_DONE
  bool measured = false;    // RUN_DONE with run() and attempt times
};
inline constexpr std::uint32_t kNoWorker = 0xffffffffU;

// The points of a tally, in the order added. At most kChunk of them are held in memory: each
// full chunk is appended to an unnamed temporary file (std::tmpfile, gone when closed), and the
// points are read back in order only when the figures are made, so a job's report holds a
// bounded amount of memory however many attempts it has (a point per attempt in memory was
// 48 MB at 1,000,000). Where no temporary file can be made, the points stay in memory.
class PointLog final {
 public:
  static constexpr std::size_t kChunk = 8192;

  PointLog() = default;
  PointLog(PointLog&&) noexcept = default;
  PointLog& operator=(PointLog&&) noexcept = default;
  PointLog(const PointLog&) = delete;
  PointLog& operator=(const PointLog&) = delete;
  ~PointLog() = default;

  void push_back(const AttemptPoint& p);
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  // From now on each point's worker (other than kNoWorker) reads as `renumber[worker]`.
  void renumber_workers(std::vector<std::uint32_t> renumber) { renumber_ = std::move(renumber); }
  // Calls fn(const AttemptPoint&) for each point in order. Throws Failure{Io} when the
  // temporary file cannot be read back.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    std::vector<AttemptPoint> chunk;
    for (std::size_t done = 0; done < spilled_; done += chunk.size()) {
      read_chunk(done, chunk);
      for (auto& p : chunk) fn(fixed(p));
    }
    for (auto p : tail_) fn(fixed(p));
  }
  // Every point, in order (for tests and small jobs).
  [[nodiscard]] std::vector<AttemptPoint> to_vector() const;

 private:
  struct Close {
    void operator()(std::FILE* f) const noexcept { (void)std::fclose(f); }
  };
  [[nodiscard]] AttemptPoint& fixed(AttemptPoint& p) const noexcept {
    if (!renumber_.empty() && p.worker != kNoWorker) p.worker = renumber_[p.worker];
    return p;
  }
  void read_chunk(std::size_t from, std::vector<AttemptPoint>& chunk) const;

  std::vector<AttemptPoint> tail_{};  // not yet in the file
  std::unique_ptr<std::FILE, Close> file_{};
  std::size_t spilled_ = 0;  // points in the file
  std::size_t size_ = 0;
  bool in_memory_ = false;  // no temporary file could be made
  std::vector<std::uint32_t> renumber_{};
};

// The attempts of one job, tallied one at a time in attempt id order.
struct AttemptTally {
  explicit AttemptTally(std::uint32_t messages_per_failure_ = 3)
      : messages_per_failure(messages_per_failure_) {}
  void add(const store::AttemptRow& a);

  PointLog points{};                          // bounded memory: see PointLog
  std::vector<ReportData::Worker> workers{};  // in order of first attempt
  std::map<std::pair<std::uint64_t, std::string>, std::uint32_t> worker_index{};
  std::vector<std::string> statuses{};
  std::map<std::string, std::uint64_t> by_status{}, by_category{};  // failed attempts
  std::map<std::pair<std::string, std::string>, ReportData::FailureGroup> groups{};
  std::uint32_t messages_per_failure = 3;
  std::uint64_t attempts = 0, attempts_failed = 0;
  std::uint64_t done_items_ok = 0, done_items_failed = 0;  // of RUN_DONE attempts
  double run_cpu_s = 0, run_elapsed_s = 0;                 // of measured attempts

 private:
  std::uint8_t status_index(std::string_view s);
  void add_to_worker(const store::AttemptRow& a, AttemptPoint& p);
};

// Moves the tally's workers into `r.workers` by pool, pool id and process, renumbers the
// points to match, and sets r.worker_attempts, r.first_start and r.last_end.
void order_workers(AttemptTally& tally, ReportData& r);

// The median time of the attempts that ran (0 when none did): the element at n / 2 of their
// sorted times, as std::nth_element finds it. Two passes over the points.
[[nodiscard]] double median_elapsed(const PointLog& points);

// The run() and overhead histograms of the measured points, `nbins` equal bins from the
// minimum to the maximum (one bin when they are equal). An overhead below 0 (run() timed by the
// worker longer than the attempt timed by the pool) counts as 0 and in overhead.clamped.
void fill_histograms(const PointLog& points, std::uint32_t nbins, ReportData::Histogram& run,
                     ReportData::Histogram& overhead);

// r.t0 and the series' time bins (r.bin_s, r.bins) from t0 to the job's end (or r.snapshot):
// at most `nbins` + 1, each as wide as the median attempt at least (a narrower bin holds 0 or 1
// completions and draws a comb of spikes), the width rounded up to 1, 2 or 5 × 10^k s; from
// r.started, r.ended, r.first_start, r.last_end and r.total/r.submitted. A mini-batch counts as
// finished by an attempt that succeeded or whose try is above `max_retries` (the job's retry
// policy, store::JobSettings::max_retries).
void fill_series_bins(const PointLog& points, std::uint32_t nbins, std::uint32_t max_retries,
                      ReportData& r);

// The timeline (r.segments): one bar per attempt that reached a worker, or, above
// `limits.max_timeline_attempts` of them, one per worker and time bin (r.timeline_binned).
// Needs r.workers, r.worker_attempts, r.t0 and r.last_end.
void fill_timeline(const PointLog& points, const std::vector<std::string>& statuses,
                   const ReportLimits& limits, ReportData& r);

// Failed attempts by status and category, and the groups of (status, category), most
// frequent first (ties by name); at most 20 groups and 50 categories.
void rank_failures(AttemptTally& tally, ReportData& r);

// The pools that ran the workers' attempts, by id, with their totals; `rows` holds each pool's
// row where the store has one. A pool row without a worker count (an older pool) counts the
// processes seen instead.
[[nodiscard]] std::vector<ReportData::Pool> pool_totals(
    const std::vector<ReportData::Worker>& workers,
    const std::map<std::uint64_t, store::PoolRow>& rows);

// Everything drawn from the tally: the attempt counts, the workers, the histograms, t0 and the
// series' bins, the timeline and the failures. r's job row and counts must be set.
void finish_tally(AttemptTally& tally, const ReportLimits& limits, std::uint32_t max_retries,
                  ReportData& r);

}  // namespace fanout::report
