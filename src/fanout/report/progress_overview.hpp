// job_progress_overview.<yyyymmddhh>.txt: a job's counts, rate and ETA as a few "key: value"
// lines. The interchange rewrites it from its counters while the job runs; the job's report
// writes it from the store at the end. docs/store.md, section 8.
#pragma once

#include <cstdint>
#include <string>

#include "fanout/store/report_source.hpp"

namespace fanout::report {

// The counters of a progress overview.
struct ProgressOverview {
  std::uint64_t job_id = 0;
  std::string name{};
  std::string state{};
  bool total_known = false;  // the client has submitted every mini-batch
  std::uint64_t total = 0;   // mini-batches known
  std::uint64_t succeeded = 0, failed = 0;
  std::uint64_t items_succeeded = 0, items_failed = 0;
  std::uint64_t attempts_failed = 0;
  double started = 0;  // Unix seconds
  double now = 0;      // the job's end, or the time of the snapshot while it runs
};

// The overview of job `job_id` as the store holds it. A job still running is shown as of its
// last committed row (`now` is its end, 0 while unset), so that regenerating it is repeatable.
[[nodiscard]] ProgressOverview overview_from_store(std::uint64_t job_id,
                                                   const store::JobProgressRow& row);

// The text of a progress overview: a few "key: value" lines, ending with a newline.
[[nodiscard]] std::string format_progress_overview(const ProgressOverview& p);

// "job_progress_overview.2026112205.txt" for a job started at `started` (UTC hour).
[[nodiscard]] std::string progress_overview_name(double started);

}  // namespace fanout::report
