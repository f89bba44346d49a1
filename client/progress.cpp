// Progress display. See progress.hpp.
#include "client/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

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

// Seconds left at the current rate, or -1 when unknown.
double eta_of(const proto::JobProgress& p, double elapsed_s) {
  const std::uint64_t done = p.succeeded + p.failed;
  if (p.total == 0 || done == 0 || done >= p.total || elapsed_s <= 0) return -1;
  return static_cast<double>(p.total - done) * elapsed_s / static_cast<double>(done);
}

}  // namespace

std::string progress_line(const proto::JobProgress& p, double elapsed_s) {
  const std::uint64_t done = p.succeeded + p.failed;
  const std::uint64_t items = p.items_succeeded + p.items_failed;
  const std::string total = p.total > 0 ? std::to_string(p.total) : fmt::format("{}+", p.submitted);
  const std::string pct = p.total > 0
                              ? fmt::format(" ({:.0f}%)", 100.0 * static_cast<double>(done) /
                                                              static_cast<double>(p.total))
                              : std::string();
  const double rate = elapsed_s > 0 ? static_cast<double>(items) / elapsed_s : 0.0;
  const double eta = eta_of(p, elapsed_s);
  return fmt::format(
      "mini-batches {}/{}{}  failed {}  items {} ({:.1f}/s)  failed attempts {}  eta {}  "
      "elapsed {}",
      done, total, pct, p.failed, items, rate, p.attempts_failed,
      eta < 0 ? std::string("-") : short_duration(eta), short_duration(elapsed_s));
}

ProgressPrinter::ProgressPrinter(ProgressMode mode, std::FILE* out, int tty)
    : mode_(mode), out_(out), tty_(tty >= 0 ? tty != 0 : ::isatty(::fileno(out)) != 0) {}

void ProgressPrinter::emit_json(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void ProgressPrinter::accepted(std::uint64_t job_id, const std::string& name,
                               const std::string& log_dir) {
  start_ = Clock::now();
  if (mode_ != ProgressMode::Json) return;
  emit_json(fmt::format(R"({{"event":"accepted","job_id":{},"name":{},"log_dir":{}}})", job_id,
                        json_quote(name), json_quote(log_dir)));
}

void ProgressPrinter::update(const proto::JobProgress& p, bool force) {
  if (mode_ == ProgressMode::Quiet) return;
  const auto now = Clock::now();
  const auto every = mode_ == ProgressMode::Json ? std::chrono::milliseconds(1000)
                     : tty_                      ? std::chrono::milliseconds(200)
                                                 : std::chrono::milliseconds(5000);
  if (!force && now - last_ < every) return;
  last_ = now;
  const double secs = std::chrono::duration<double>(now - start_).count();
  if (mode_ == ProgressMode::Json) {
    const std::uint64_t items = p.items_succeeded + p.items_failed;
    emit_json(fmt::format(
        R"({{"event":"progress","job_id":{},"total":{},"submitted":{},"done":{},"succeeded":{},)"
        R"("failed":{},"items_succeeded":{},"items_failed":{},"attempts_failed":{},"pools":{},)"
        R"("workers":{},"elapsed_s":{:.3f},"items_per_s":{:.3f},"eta_s":{:.1f}}})",
        p.job_id, p.total, p.submitted, p.succeeded + p.failed, p.succeeded, p.failed,
        p.items_succeeded, p.items_failed, p.attempts_failed, p.pools, p.workers, secs,
        secs > 0 ? static_cast<double>(items) / secs : 0.0, eta_of(p, secs)));
    return;
  }
  const std::string line = progress_line(p, secs);
  if (tty_) {
    // Carriage return, the line, then erase whatever a longer previous line left.
    std::fprintf(out_, "\r%s\033[K", line.c_str());
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
  shown_ = true;
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
      p.items_succeeded, p.items_failed, p.attempts_failed,
      std::chrono::duration<double>(Clock::now() - start_).count()));
}

}  // namespace fanout::client
