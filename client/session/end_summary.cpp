// The console's summary of an ended job. See end_summary.hpp.
#include "client/session/end_summary.hpp"

#include <fmt/format.h>

namespace fanout::client {

std::string grouped(std::uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string end_summary(const proto::JobEnded& ended) {
  const auto& p = ended.progress;
  std::string items;
  if (p.items_failed > 0 && p.failed == 0) {
    // Every mini-batch succeeded: the "failed" items are results run() did not return.
    items = fmt::format(
        "run() returned {} results for {} items ({} counted as failed items, as ParallelRunStep "
        "counts them)",
        grouped(p.items_succeeded), grouped(p.items_succeeded + p.items_failed),
        grouped(p.items_failed));
  } else {
    items =
        fmt::format("{} succeeded, {} failed", grouped(p.items_succeeded), grouped(p.items_failed));
  }
  // One count of attempts everywhere (docs/store.md, job_counts): each succeeded mini-batch has
  // exactly one RUN_DONE attempt, every other attempt (failed, lost, cancelled) is a failed one.
  return fmt::format(
      "fanout: job {} {}: {}\n  mini-batches: {} succeeded, {} failed of {}; items: {}; "
      "attempts: {} ({} failed)\n",
      ended.job_id, ended.state, ended.reason, grouped(p.succeeded), grouped(p.failed),
      grouped(p.submitted), items, grouped(p.succeeded + p.attempts_failed),
      grouped(p.attempts_failed));
}

}  // namespace fanout::client
