// The figures behind report.html, `fanout compare` and `fanout tune` (ReportData): the rows the
// store hands over (store/report_queries.hpp) plus one pass over the job's attempts, which keeps
// a point of about 40 bytes per attempt until the figures are made (report_figures.hpp), so
// their size does not grow with the number of attempts. Spec: docs/tuning.md; the tables:
// docs/store.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fanout/store/report_queries.hpp"
#include "fanout/store/report_source.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::report {

// Everything the report pages and the tuning advice draw from one job. Times are Unix seconds;
// "t" fields are seconds since `t0`. A plain value: no store handle is kept.
struct ReportData {
  // One worker process: a pool's process name (names repeat across pools).
  struct Worker {
    std::uint64_t pool_id = 0;
    std::string pool{}, node{}, process{};
    std::string device{};  // the accelerator(s) it was given (attempts.device); "": none
    std::uint64_t attempts = 0, succeeded = 0;
    double first_start = 0, last_end = 0;        // Unix seconds
    double elapsed_s = 0, run_s = 0, cpu_s = 0;  // summed over its attempts
  };
  // A pool that ran attempts of this job.
  struct Pool {
    std::uint64_t id = 0;
    std::string name{}, node{}, state{};
    std::uint64_t workers = 0, prefetch = 0;
    std::uint64_t attempts = 0;
    double elapsed_s = 0, run_s = 0, cpu_s = 0;
    double first_start = 0, last_end = 0;
  };
  // A bar of the timeline: one attempt, or (binned) a worker's busy share of one time bin,
  // drawn from `t_start` for busy × bin width.
  struct Segment {
    std::uint32_t worker = 0;  // index into `workers`
    double t_start = 0, t_end = 0;
    std::string status{};         // attempt status; binned: RUN_DONE, or "FAILED" when any failed
    std::uint64_t minibatch = 0;  // unbinned only
    std::uint64_t attempts = 1;   // binned: attempts started in the bin
  };
  // One time bin of the job, [t, t + bin_s).
  struct Bin {
    double t = 0;
    std::uint64_t ended = 0;      // attempts that ended in the bin
    std::uint64_t succeeded = 0;  // of them RUN_DONE: mini-batches done
    std::uint64_t items = 0;      // items of those mini-batches
    std::uint64_t failed = 0;     // attempts ended not RUN_DONE
    std::uint64_t finished = 0;   // mini-batches finished: succeeded, or out of tries
    std::uint64_t started = 0;    // attempts started in the bin
    std::int64_t running = 0;     // attempts in a worker at the bin's start
    std::int64_t queued = 0;      // mini-batches neither finished nor running at its start
  };
  // A histogram with equal bins from `lo`: counts[i] covers [lo + i·width, lo + (i+1)·width);
  // the last bin also holds the maximum.
  struct Histogram {
    double lo = 0, width = 0;
    std::vector<std::uint64_t> counts{};
    std::uint64_t n = 0;
    double min = 0, max = 0, mean = 0;
    std::uint64_t clamped = 0;  // values below 0 counted as 0 (overhead: see fill_histograms)
  };
  struct FailureGroup {
    std::string status{}, category{};
    std::uint64_t count = 0;
    std::vector<std::string> first{};  // "mini-batch N try T on P: first line", oldest first
  };
  struct Exhausted {
    std::uint64_t minibatch = 0, tries = 0, items = 0;
    std::string last{};  // the last attempt's status and first message line
  };
  using Series = store::ResourceSeries;  // a resource series: one node, or one worker process

  // The job.
  std::uint64_t job_id = 0;
  std::string name{}, state{}, reason{}, spec_path{}, runtime{}, entry{}, output_path{}, log_dir{};
  std::vector<std::pair<std::string, std::string>> settings{};  // jobs.settings, in key order
  bool total_known = false;
  std::uint64_t total = 0, submitted = 0, succeeded = 0, failed = 0, pending = 0, running = 0;
  std::uint64_t items_succeeded = 0, items_failed = 0, attempts = 0, attempts_failed = 0;
  double started = 0, ended = 0;  // ended 0 while the job runs; started falls back to created
  double job_started = 0;         // jobs.started itself, 0 when not set
  double snapshot = 0;            // when this was read
  double t0 = 0;                  // origin of every "t": the job's start (or first attempt)

  // Attempts that reached a worker.
  std::uint64_t worker_attempts = 0;
  double first_start = 0, last_end = 0;  // 0 when there is none
  std::vector<Worker> workers{};         // by pool, then process
  std::vector<Pool> pools{};             // by id

  // Successful attempts only: run() time and overhead (attempt time − run() time), seconds.
  Histogram run_hist{}, overhead_hist{};
  double run_cpu_s = 0;      // CPU seconds of successful attempts
  double run_elapsed_s = 0;  // their wall-clock seconds

  bool timeline_binned = false;
  double timeline_bin_s = 0;  // binned only
  std::vector<Segment> segments{};

  double bin_s = 0;  // width of `bins`
  std::vector<Bin> bins{};

  std::vector<std::pair<std::string, std::uint64_t>> by_status{}, by_category{};  // failed only
  std::vector<FailureGroup> failures{};  // most frequent first
  std::uint64_t exhausted_count = 0;
  std::vector<Exhausted> exhausted{};  // the first ones, by mini-batch

  std::vector<Series> node_series{}, process_series{};
  std::vector<Series> gpu_series{};  // one per accelerator with NVML samples

  // The setting `key` as text, or `fallback` when the job did not record it.
  [[nodiscard]] std::string setting(const std::string& key, const std::string& fallback = {}) const;
};

// Limits of what read_report_data() returns, so the pages stay small for any job.
struct ReportLimits {
  std::uint64_t max_timeline_attempts = 4000;   // above this the timeline is time-binned
  std::uint64_t max_timeline_segments = 12000;  // binned: workers × bins at most
  std::uint32_t series_bins = 200;              // bins of the time series
  std::uint32_t histogram_bins = 40;
  std::uint32_t messages_per_failure = 3;
  std::uint32_t max_exhausted = 50;
  std::uint32_t resource_bins = 300;      // resource samples are averaged into this many bins
  std::uint32_t max_process_series = 64;  // enough lines for one chart
};

struct AttemptTally;

// The attempt-driven part of ReportData, gathered one attempt at a time (in id order), while a
// job runs or in one scan after: its attempts' points go to a temporary file in chunks
// (PointLog), so what it keeps in memory is bounded.
class ReportDataPass final {
 public:
  // `limits.messages_per_failure` applies while attempts are added; the rest at finish().
  explicit ReportDataPass(const ReportLimits& limits = {});
  ~ReportDataPass();
  ReportDataPass(const ReportDataPass&) = delete;
  ReportDataPass& operator=(const ReportDataPass&) = delete;

  void add(const store::AttemptRow& a);
  // Reads the job's row, counts, pools and samples through `src` and completes the figures.
  // Throws Failure{NotFound} (no such job), Failure{Database}.
  [[nodiscard]] ReportData finish(store::ReportSource& src, std::uint64_t job_id,
                                  const ReportLimits& limits);

 private:
  std::unique_ptr<AttemptTally> tally_;
};

// Reads job `job_id` through `src`'s read transaction in one pass over its attempts, handing
// each attempt (in id order) to `on_attempt` too, so the report's files and pages come from one
// scan. The pass keeps about 40 bytes per attempt until it returns. Throws Failure{NotFound}
// (no such job), Failure{Database}.
[[nodiscard]] ReportData report_data(
    store::ReportSource& src, std::uint64_t job_id, const ReportLimits& limits,
    const std::function<void(const store::AttemptRow&)>& on_attempt);

// Reads job `job_id` from the store at `db_path` (read-only; a running job gives a snapshot).
// Errors: NotFound (no store, no such job), Version (another schema version), Database.
[[nodiscard]] Expected<ReportData> read_report_data(const std::string& db_path,
                                                    std::uint64_t job_id,
                                                    const ReportLimits& limits = {});

}  // namespace fanout::report
