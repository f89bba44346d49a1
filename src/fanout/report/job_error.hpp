// ParallelRunStep's error summary: logs/job_error.txt (every kind of error of the job, how often,
// its first occurrence) and logs/user/error/<node>/<process>.txt (the failed attempts each worker
// process ran). docs/reports.md.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fanout/store/error_summary.hpp"

namespace fanout::report {

// The text of job_error.txt: one paragraph per kind of error, real errors before CANCELLED
// attempts, or "no errors".
[[nodiscard]] std::string format_job_error(std::uint64_t job_id, const store::ErrorSummary& s);

// The files of user/error/: {path relative to logs/, text}, one per worker process with failed
// attempts (each attempt: a header line, then its whole message indented).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> process_error_files(
    const store::ErrorSummary& s);

}  // namespace fanout::report
