// Progress display of `fanout run`: one updating line on a terminal, a plain line every few
// seconds otherwise. Not thread-safe.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "fanout/protocol/messages.hpp"
#include "fanout/util/clock.hpp"

namespace fanout::client {

class ProgressPrinter final {
 public:
  explicit ProgressPrinter(bool quiet) : quiet_(quiet), tty_(::isatty(2) != 0) {}
  void update(const proto::JobProgress& p, bool force = false) {
    if (quiet_) return;
    auto now = Clock::now();
    auto every = tty_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(5000);
    if (!force && now - last_ < every) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const std::uint64_t done = p.succeeded + p.failed;
    std::string total = p.total ? std::to_string(p.total) : fmt::format("{}+", p.submitted);
    std::string line = fmt::format(
        "mini-batches {}/{}  failed {}  items {}  {:.0f} items/s  {:.1f}s", done, total, p.failed,
        p.items_succeeded, secs > 0 ? static_cast<double>(p.items_succeeded) / secs : 0.0, secs);
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    shown_ = true;
  }
  void finish() {
    if (!quiet_ && tty_ && shown_) std::fprintf(stderr, "\n");
  }

 private:
  bool quiet_;
  bool tty_;
  bool shown_ = false;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
};

}  // namespace fanout::client
