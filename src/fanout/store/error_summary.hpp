// A job's failed attempts grouped by kind and by worker process, for ParallelRunStep's
// logs/job_error.txt and logs/user/error/ (docs/reports.md). The SQL lives here; the text is the
// report layer's (report/job_error.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fanout/util/expected.hpp"

namespace fanout::store {

// One kind of error (status and category) and its first occurrence.
struct ErrorKind {
  std::string status{}, category{};
  std::uint64_t attempts = 0, minibatches = 0;
  std::uint64_t first_minibatch = 0, first_try = 0;
  std::string first_process{}, first_time{}, first_message{};  // message: the whole text
};

// A failed attempt of one worker process.
struct ProcessError {
  std::uint64_t minibatch = 0, attempt = 0;
  std::string status{}, category{}, time{}, message{};
};

// The failed attempts one worker process ran, oldest first, at most kProcessErrors of them.
struct ProcessErrors {
  std::string node{}, process{};  // process: '<pool>/<worker>'
  std::uint64_t total = 0;        // all of them, also those not listed
  std::vector<ProcessError> errors{};
};

inline constexpr std::uint64_t kProcessErrors = 100;

struct ErrorSummary {
  // Real errors first (by first occurrence), CANCELLED last: it only says the job ended.
  std::vector<ErrorKind> kinds{};
  // Attempts that reached a worker process and failed other than CANCELLED, by node, process.
  std::vector<ProcessErrors> processes{};
};

class ReportSource;

// The same within a report's read transaction. Throws Failure{Database}.
[[nodiscard]] ErrorSummary read_error_summary(ReportSource& src, std::uint64_t job_id);

// Reads job `job_id`'s error summary from the store at `db_path` (read-only, one read
// transaction). Errors: NotFound (no store), Version, Database.
[[nodiscard]] Expected<ErrorSummary> read_error_summary(const std::string& db_path,
                                                        std::uint64_t job_id);

}  // namespace fanout::store
