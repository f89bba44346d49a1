// What `fanout status JOB` prints: a store::JobStatus as text for people or as one JSON object.
#pragma once

#include <string>

#include "fanout/store/job_status.hpp"

namespace fanout::report {

// Indented lines: state, counts, rate and ETA, pools, worker processes, output and logs
// folders, last errors. Ends with a newline.
[[nodiscard]] std::string format_status_text(const store::JobStatus& s);

// One JSON object on one line (the fields of JobStatus, pools and last_errors as arrays),
// ending with a newline.
[[nodiscard]] std::string format_status_json(const store::JobStatus& s);

}  // namespace fanout::report
