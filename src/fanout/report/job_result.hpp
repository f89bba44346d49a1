// job_result.txt: a finished job as "key: value" lines, then its first failed attempts.
// docs/store.md, section 8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fanout/store/report_source.hpp"

namespace fanout::report {

// How many failed attempts job_result.txt lists.
inline constexpr std::size_t kFirstErrors = 10;

// The text of job_result.txt for job `job_id`: `job` as key: value lines, then "first_errors:"
// and one line per attempt of `errors` (the first line of its message, at most 300 bytes), or
// " none".
[[nodiscard]] std::string format_job_result(std::uint64_t job_id, const store::JobResultRow& job,
                                            const std::vector<store::FailedAttemptRow>& errors);

}  // namespace fanout::report
