// What `fanout status JOB` prints: a store::JobStatus as text for people or as one JSON object.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fanout/store/job_status.hpp"

namespace fanout::report {

// Indented lines: state, counts, rate and ETA, pools, worker processes, output and logs
// folders, last errors. Ends with a newline.
[[nodiscard]] std::string format_status_text(const store::JobStatus& s);

// The job's interchange as `fanout status` found it (client/session/liveness.*, above this layer),
// for the JSON's "interchange" object.
struct InterchangeStatus {
  std::string state{};   // "alive", "dead" or "unknown"
  std::int64_t pid = 0;  // 0: unknown
  std::string host{};    // "": unknown
  double started = 0;    // Unix seconds it wrote interchange.ready; 0: unknown
};

// One JSON object on one line (the fields of JobStatus, pools and last_errors as arrays),
// ending with a newline. "interchange" is `interchange` (unknown fields null), or null when not
// given (the job is not running: its interchange's liveness tells nothing).
[[nodiscard]] std::string format_status_json(
    const store::JobStatus& s, const std::optional<InterchangeStatus>& interchange = std::nullopt);

}  // namespace fanout::report
