// Progress display of `fanout run` (and any command that follows a job): on a terminal, one line
// rewritten in place (carriage return) with mini-batches done/total, items/s, failures and ETA,
// cut to the terminal's width; otherwise a plain line at a modest interval; with --json, one
// JSON object per line on stdout (docs/reports.md describes the events). Not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "fanout/protocol/messages.hpp"
#include "fanout/util/clock.hpp"

namespace fanout::client {

enum class ProgressMode : std::uint8_t {
  Quiet,  // nothing
  Human,  // a line on `out` (stderr): updated in place on a terminal, else every few seconds
  Json,   // events on stdout, one JSON object per line
};

// The first counts a client saw of a job, and when (Unix seconds): a client that attached to a
// running job measures its rate from there, not from counts the job reached before.
struct ProgressBaseline {
  double at = 0;
  std::uint64_t items = 0;  // items finished (succeeded + failed)
  std::uint64_t done = 0;   // mini-batches finished
};

// What the progress line shows besides the counts.
struct ProgressFigures {
  double elapsed_s = 0;    // since the job started
  double items_per_s = 0;  // 0: not known yet
  double eta_s = -1;       // -1: not known
};

// After this long following a job, its rate is measured over what this client saw (the job's
// recent pace); before, it is the job's average since its start.
inline constexpr double kOwnRateAfterS = 5.0;

// The figures of job progress `p` at `now` (Unix seconds), for a job started at `job_start` and
// first seen as `first`. No I/O.
ProgressFigures progress_figures(const proto::JobProgress& p, double job_start,
                                 const ProgressBaseline& first, double now);

// The text of the human progress line (no carriage return or newline), for tests as well, at
// most `width` columns: fields are dropped by priority (failed attempts first; mini-batches
// done/total last) until it fits, and cut if even that does not fit.
std::string progress_line(const proto::JobProgress& p, const ProgressFigures& f,
                          std::size_t width = 1000);

// The width of the terminal on descriptor `fd` (TIOCGWINSZ), else $COLUMNS, else 80.
std::size_t terminal_width(int fd);

class ProgressPrinter final {
 public:
  // `out` receives the human line (stderr by default); `tty` says whether it is a terminal
  // (default: isatty on its descriptor).
  explicit ProgressPrinter(ProgressMode mode, std::FILE* out = stderr, int tty = -1);

  // The job started at `job_start` (Unix seconds; the store's jobs.created): elapsed time and
  // rates count from there, not from when this client attached. Without it, from accepted().
  void job_started(double job_start) { job_start_ = job_start; }
  // The interchange accepted the job.
  void accepted(std::uint64_t job_id, const std::string& name, const std::string& log_dir);
  // New counters. Printed at most every 200 ms on a terminal, every 5 s otherwise, every 1 s
  // as JSON; `force` prints now.
  void update(const proto::JobProgress& p, bool force = false);
  // The interchange has not answered since `since` (Unix seconds): shown instead of the counts
  // (human mode) until the next update().
  void unreachable(double since);
  // Ends the updating line (a newline on a terminal). Call once, before the final summary.
  void finish();
  // The job's end (JSON only: the human summary is printed by the caller).
  void ended(const proto::JobEnded& e);

 private:
  void emit_json(const std::string& line);
  void show(const std::string& line);
  [[nodiscard]] double start_unix() const;

  ProgressMode mode_;
  std::FILE* out_;
  bool tty_;
  bool shown_ = false;
  double job_start_ = 0;  // Unix seconds; 0: from accepted_at_
  double accepted_at_ = unix_now();
  std::optional<ProgressBaseline> first_{};
  double unreachable_shown_ = 0;  // the `since` last shown
  Clock::time_point last_{};
};

}  // namespace fanout::client
