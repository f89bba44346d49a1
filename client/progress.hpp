// Progress display of `fanout run` (and any command that follows a job): on a terminal, one line
// rewritten in place (carriage return) with mini-batches done/total, items/s, failures and ETA;
// otherwise a plain line at a modest interval; with --json, one JSON object per line on stdout
// (docs/reports.md describes the events). Not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "fanout/protocol/messages.hpp"
#include "fanout/util/clock.hpp"

namespace fanout::client {

enum class ProgressMode : std::uint8_t {
  Quiet,  // nothing
  Human,  // a line on `out` (stderr): updated in place on a terminal, else every few seconds
  Json,   // events on stdout, one JSON object per line
};

// The text of the human progress line (no carriage return or newline), for tests as well.
// `elapsed_s` is the time since the job was accepted.
std::string progress_line(const proto::JobProgress& p, double elapsed_s);

class ProgressPrinter final {
 public:
  // `out` receives the human line (stderr by default); `tty` says whether it is a terminal
  // (default: isatty on its descriptor).
  explicit ProgressPrinter(ProgressMode mode, std::FILE* out = stderr, int tty = -1);

  // The interchange accepted the job.
  void accepted(std::uint64_t job_id, const std::string& name, const std::string& log_dir);
  // New counters. Printed at most every 200 ms on a terminal, every 5 s otherwise, every 1 s
  // as JSON; `force` prints now.
  void update(const proto::JobProgress& p, bool force = false);
  // Ends the updating line (a newline on a terminal). Call once, before the final summary.
  void finish();
  // The job's end (JSON only: the human summary is printed by the caller).
  void ended(const proto::JobEnded& e);

 private:
  void emit_json(const std::string& line);

  ProgressMode mode_;
  std::FILE* out_;
  bool tty_;
  bool shown_ = false;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
};

}  // namespace fanout::client
