// The store's side of report.html, `fanout compare` and `fanout tune`: plain SELECTs that hand
// the report the rows of one job through ReportSource's read transaction (the attempts come from
// ReportSource::each_attempt, one at a time). What the report makes of them is in
// src/fanout/report/report_data.hpp. Only the resource samples are averaged in SQL (into time
// bins), since a job may hold millions of them. The tables: docs/store.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fanout/store/report_source.hpp"

namespace fanout::store {

// The job's row (jobs) and its settings. Times are Unix seconds.
struct ReportJobRow {
  std::string name{}, state{}, reason{}, spec_path{}, runtime{}, entry{}, output_path{}, log_dir{};
  bool total_known = false;  // submit_done
  std::uint64_t total = 0;
  double started = 0;                // jobs.started, else jobs.created, else 0
  double ended = 0;                  // 0 while the job runs
  double job_started = 0;            // jobs.started itself, 0 when not set
  std::string settings_json = "{}";  // jobs.settings; '{}' when NULL
  std::vector<std::pair<std::string, std::string>> settings{};  // view job_settings, by key
};

// Job `job_id`'s row. Throws Failure{NotFound} naming the store and the job, Failure{Database}.
[[nodiscard]] ReportJobRow read_report_job(ReportSource& src, std::uint64_t job_id);

// The job's mini-batches counted as view job_counts counts them: one scan of its mini-batches.
struct MinibatchCounts {
  std::uint64_t submitted = 0, succeeded = 0, failed = 0, pending = 0, running = 0;
  std::uint64_t items_succeeded = 0;  // of succeeded mini-batches
  std::uint64_t items_failed = 0;     // failed items of succeeded ones, all items of failed ones
};

// Throws Failure{Database}.
[[nodiscard]] MinibatchCounts read_minibatch_counts(ReportSource& src, std::uint64_t job_id);

// What the report shows of a pools row.
struct PoolRow {
  std::string state{};
  std::uint64_t workers = 0, prefetch = 0;  // 0 when not recorded
};

// Pool `pool_id`'s row, nullopt when there is none. Throws Failure{Database}.
[[nodiscard]] std::optional<PoolRow> read_pool_row(ReportSource& src, std::uint64_t pool_id);

// A mini-batch that exhausted its tries.
struct ExhaustedRow {
  std::uint64_t minibatch = 0, tries = 0, items = 0;
  std::string last{};    // its last attempt's "STATUS: error message", whole
  std::string status{};  // its last attempt's status alone (e.g. RUN_TIMEOUT)
};

// The first `limit` failed mini-batches of the job, by id. Throws Failure{Database}.
[[nodiscard]] std::vector<ExhaustedRow> read_exhausted(ReportSource& src, std::uint64_t job_id,
                                                       std::uint32_t limit);

// A resource series: one node, one worker process, or one accelerator (gpu_samples: `process`
// is "GPU <index>" and its name, `cpu` its utilisation %, `mem` its memory used).
struct ResourceSeries {
  std::string node{}, pool{}, process{};
  std::vector<double> t{}, cpu{}, mem{};  // cpu %, memory used (node) or RSS (process), MB
  double mem_total = 0;                   // node and accelerator: the largest total seen
  double mean_cpu = 0;                    // accelerator: its mean utilisation over the samples
};

struct ResourceSeriesRows {
  std::vector<ResourceSeries> nodes{};      // by node
  std::vector<ResourceSeries> processes{};  // by node, pool, process
  std::vector<ResourceSeries> gpus{};       // by node, device index
};

// The job's resource samples averaged in SQL into `nbins` equal time bins from the earlier of
// its first sample and `t0` to its last sample; a point's `t` is its bin's middle, in seconds
// since `t0`. At most `max_processes` process series. Throws Failure{Database}.
[[nodiscard]] ResourceSeriesRows read_resource_series(ReportSource& src, std::uint64_t job_id,
                                                      double t0, std::uint32_t nbins,
                                                      std::size_t max_processes);

}  // namespace fanout::store
