// Progress overviews. See progress_overview.hpp.
#include "fanout/report/progress_overview.hpp"

#include <fmt/format.h>

#include <cmath>
#include <ctime>

#include "fanout/report/format.hpp"

namespace fanout::report {

ProgressOverview overview_from_store(std::uint64_t job_id, const store::JobProgressRow& row) {
  ProgressOverview p;
  p.job_id = job_id;
  p.name = row.name;
  p.state = row.state;
  p.total_known = row.submit_done;
  p.total = row.total;
  p.succeeded = row.succeeded;
  p.failed = row.failed;
  p.items_succeeded = row.items_succeeded;
  p.items_failed = row.items_failed;
  p.attempts_failed = row.attempts_failed;
  p.started = row.started;
  // A job still running is shown as of its last committed row: regenerating it is then
  // repeatable too (the live file the interchange writes is a separate snapshot).
  p.now = row.ended;
  return p;
}

std::string format_progress_overview(const ProgressOverview& p) {
  const std::uint64_t done = p.succeeded + p.failed;
  const double elapsed = p.now > p.started ? p.now - p.started : 0.0;
  std::string total = p.total_known ? std::to_string(p.total) : fmt::format("{}+", p.total);
  std::string pct = p.total_known && p.total > 0
                        ? fmt::format(" ({:.1f}%)", 100.0 * static_cast<double>(done) /
                                                        static_cast<double>(p.total))
                        : std::string();
  std::string out = fmt::format(
      "job {} ({}): {}\nmini-batches: {} of {} done{}: {} succeeded, {} failed\n"
      "items: {} succeeded, {} failed\nfailed attempts: {}\nstarted: {}\nelapsed_seconds: {:.3f}\n",
      p.job_id, p.name, p.state, done, total, pct, p.succeeded, p.failed, p.items_succeeded,
      p.items_failed, p.attempts_failed, utc_text(p.started), elapsed);
  if (elapsed > 0) {
    out += fmt::format("rate: {:.3f} mini-batches/s, {:.3f} items/s\n",
                       static_cast<double>(done) / elapsed,
                       static_cast<double>(p.items_succeeded + p.items_failed) / elapsed);
  } else {
    out += "rate: -\n";
  }
  if (p.total_known && done > 0 && done < p.total && p.state == "running") {
    out += fmt::format("eta_seconds: {:.1f}\n",
                       static_cast<double>(p.total - done) * elapsed / static_cast<double>(done));
  } else {
    out += "eta_seconds: -\n";
  }
  return out;
}

std::string progress_overview_name(double started) {
  const auto t = static_cast<std::time_t>(std::floor(started));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d%H", &tm);
  return std::string("job_progress_overview.") + buf + ".txt";
}

}  // namespace fanout::report
