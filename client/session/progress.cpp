// Progress display. See progress.hpp.
#include "client/session/progress.hpp"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include "fanout/util/json.hpp"

namespace fanout::client {

namespace {

// "1h02m", "3m05s", "42s".
std::string short_duration(double s) {
  if (s < 0) return "?";
  const auto t = static_cast<std::uint64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

// "19:22:05 UTC".
std::string clock_utc(double unix_s) {
  const auto t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%S UTC", &tm);
  return buf;
}

// Cut to `width` bytes (the line is ASCII).
std::string cut(std::string s, std::size_t width) {
  if (s.size() > width) s.resize(width);
  return s;
}

}  // namespace

ProgressFigures progress_figures(const proto::JobProgress& p, double job_start,
                                 const ProgressBaseline& first, double now) {
  ProgressFigures f;
  const std::uint64_t done = p.succeeded + p.failed;
  const std::uint64_t items = p.items_succeeded + p.items_failed;
  f.elapsed_s = std::max(0.0, now - job_start);
  // Items and mini-batches per second: over what this client saw once it saw long enough (a
  // resumed job's average would include the time it was down), else the job's own average.
  const double seen_s = now - first.at;
  double batches_per_s = 0;
  if (seen_s >= kOwnRateAfterS && done > first.done) {
    f.items_per_s = static_cast<double>(items - std::min(items, first.items)) / seen_s;
    batches_per_s = static_cast<double>(done - first.done) / seen_s;
  } else if (f.elapsed_s > 0) {
    f.items_per_s = static_cast<double>(items) / f.elapsed_s;
    batches_per_s = static_cast<double>(done) / f.elapsed_s;
  }
  if (p.total > 0 && done < p.total && batches_per_s > 0) {
    f.eta_s = static_cast<double>(p.total - done) / batches_per_s;
  }
  return f;
}

std::string progress_line(const proto::JobProgress& p, const ProgressFigures& f,
                          std::size_t width) {
  const std::uint64_t done = p.succeeded + p.failed;
  const std::uint64_t items = p.items_succeeded + p.items_failed;
  const std::string total = p.total > 0 ? std::to_string(p.total) : fmt::format("{}+", p.submitted);
  const std::string pct = p.total > 0
                              ? fmt::format(" ({:.0f}%)", 100.0 * static_cast<double>(done) /
                                                              static_cast<double>(p.total))
                              : std::string();
  // In display order, each with its rank: the lowest rank is kept longest.
  struct Field {
    std::string text;
    int rank;
  };
  const std::array<Field, 6> fields{{
      {fmt::format("mini-batches {}/{}{}", done, total, pct), 0},
      {fmt::format("failed {}", p.failed), 2},
      {fmt::format("items {} ({:.1f}/s)", items, f.items_per_s), 3},
      {fmt::format("failed attempts {}", p.attempts_failed), 5},
      {fmt::format("eta {}", f.eta_s < 0 ? std::string("-") : short_duration(f.eta_s)), 1},
      {fmt::format("elapsed {}", short_duration(f.elapsed_s)), 4},
  }};
  for (int keep = 5; keep >= 0; --keep) {
    std::string line;
    for (const auto& field : fields) {
      if (field.rank > keep) continue;
      if (!line.empty()) line += "  ";
      line += field.text;
    }
    if (line.size() <= width || keep == 0) return cut(std::move(line), width);
  }
  return {};
}

std::size_t terminal_width(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS"); c != nullptr) {
    char* end = nullptr;
    const long n = std::strtol(c, &end, 10);
    if (end != c && *end == '\0' && n > 0) return static_cast<std::size_t>(n);
  }
  return 80;
}

ProgressPrinter::ProgressPrinter(ProgressMode mode, std::FILE* out, int tty)
    : mode_(mode), out_(out), tty_(tty >= 0 ? tty != 0 : ::isatty(::fileno(out)) != 0) {}

double ProgressPrinter::start_unix() const { return job_start_ > 0 ? job_start_ : accepted_at_; }

void ProgressPrinter::emit_json(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void ProgressPrinter::accepted(std::uint64_t job_id, const std::string& name,
                               const std::string& log_dir) {
  accepted_at_ = unix_now();
  if (mode_ != ProgressMode::Json) return;
  emit_json(fmt::format(R"({{"event":"accepted","job_id":{},"name":{},"log_dir":{}}})", job_id,
                        json_quote(name), json_quote(log_dir)));
}

void ProgressPrinter::show(const std::string& line) {
  if (tty_) {
    // Carriage return, the line (never as wide as the terminal, so it never wraps), then erase
    // whatever a longer previous line left.
    const std::size_t width = terminal_width(::fileno(out_));
    std::fprintf(out_, "\r%s\033[K", cut(line, width > 1 ? width - 1 : 1).c_str());
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
  shown_ = true;
}

void ProgressPrinter::update(const proto::JobProgress& p, bool force) {
  if (mode_ == ProgressMode::Quiet) return;
  const double now_unix = unix_now();
  if (!first_) {
    first_ = ProgressBaseline{now_unix, p.items_succeeded + p.items_failed, p.succeeded + p.failed};
  }
  unreachable_shown_ = 0;
  const auto now = Clock::now();
  const auto every = mode_ == ProgressMode::Json ? std::chrono::milliseconds(1000)
                     : tty_                      ? std::chrono::milliseconds(200)
                                                 : std::chrono::milliseconds(5000);
  if (!force && now - last_ < every) return;
  last_ = now;
  const ProgressFigures f = progress_figures(p, start_unix(), *first_, now_unix);
  if (mode_ == ProgressMode::Json) {
    emit_json(fmt::format(
        R"({{"event":"progress","job_id":{},"total":{},"submitted":{},"done":{},"succeeded":{},)"
        R"("failed":{},"items_succeeded":{},"items_failed":{},"attempts_failed":{},"pools":{},)"
        R"("workers":{},"elapsed_s":{:.3f},"items_per_s":{:.3f},"eta_s":{:.1f}}})",
        p.job_id, p.total, p.submitted, p.succeeded + p.failed, p.succeeded, p.failed,
        p.items_succeeded, p.items_failed, p.attempts_failed, p.pools, p.workers, f.elapsed_s,
        f.items_per_s, f.eta_s));
    return;
  }
  const std::size_t width =
      tty_ ? std::max<std::size_t>(terminal_width(::fileno(out_)), 2) - 1 : 1000;
  show(progress_line(p, f, width));
}

void ProgressPrinter::unreachable(double since) {
  // Shown once per silence (its start moves by a few ms between probes).
  if (mode_ != ProgressMode::Human || std::abs(since - unreachable_shown_) < 1.0) return;
  unreachable_shown_ = since;
  last_ = Clock::time_point{};  // the next counts are shown at once
  show(fmt::format("interchange unreachable since {}", clock_utc(since)));
}

void ProgressPrinter::finish() {
  if (mode_ == ProgressMode::Human && tty_ && shown_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
  shown_ = false;
}

void ProgressPrinter::ended(const proto::JobEnded& e) {
  if (mode_ != ProgressMode::Json) return;
  const auto& p = e.progress;
  emit_json(fmt::format(
      R"({{"event":"ended","job_id":{},"state":{},"reason":{},"total":{},"succeeded":{},)"
      R"("failed":{},"items_succeeded":{},"items_failed":{},"attempts_failed":{},)"
      R"("elapsed_s":{:.3f}}})",
      e.job_id, json_quote(e.state), json_quote(e.reason), p.submitted, p.succeeded, p.failed,
      p.items_succeeded, p.items_failed, p.attempts_failed, unix_now() - start_unix()));
}

}  // namespace fanout::client
