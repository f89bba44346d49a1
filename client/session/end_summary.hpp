// The console's summary of an ended job (`fanout run`, `wait`, `resume`), as text. Pure.
#pragma once

#include <cstdint>
#include <string>

#include "fanout/protocol/messages.hpp"

namespace fanout::client {

// "1234567" -> "1,234,567".
std::string grouped(std::uint64_t n);

// Two lines: the job, its state and reason; then mini-batches, items and failed attempts. Items
// keep ParallelRunStep's counting (an item without a result from run() is a failed item), but
// when no mini-batch failed, the failed items are said to be what they are: run() returned fewer
// results than items ("run() returned 0 results for 11,979 items"), not errors. Failed attempts
// are every attempt that did not end RUN_DONE, CANCELLED included, as in job_result.txt.
std::string end_summary(const proto::JobEnded& ended);

}  // namespace fanout::client
