// fanout executor-serve. See executor_serve.hpp.
#include "client/commands/executor_serve.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "client/commands/client.hpp"
#include "client/session/session.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/store/report_queries.hpp"
#include "fanout/store/report_source.hpp"

namespace fanout::client {

namespace {

constexpr std::string_view kEndLine = "=end";  // '=' never starts a base64 line
constexpr auto kEndRefusedAfter = std::chrono::seconds(3);
constexpr std::uint64_t kMaxCallsPerLine = 1u << 20;  // items of one line, at most

void emit(const nlohmann::ordered_json& event) {
  const std::string text =
      event.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// The items of the mini-batch a stdin line becomes: "CALLS ID:BASE64" is the call line "ID:BASE64"
// followed by an empty item for each further call of it, so that the store counts one item per
// call (docs/python.md, section 2), at most kMaxCallsPerLine. A line without the count is one
// item.
std::vector<std::string> items_of(const std::string& line) {
  const auto space = line.find(' ');
  std::uint64_t calls = 0;
  if (space == std::string::npos || space == 0 || space > 9) return {line};
  for (std::size_t i = 0; i < space; ++i) {
    if (line[i] < '0' || line[i] > '9') return {line};
    calls = calls * 10 + static_cast<std::uint64_t>(line[i] - '0');
  }
  std::vector<std::string> items(std::clamp<std::uint64_t>(calls, 1, kMaxCallsPerLine));
  items[0] = line.substr(space + 1);
  return items;
}

// The Executor's side of one job: reads calls from stdin, sends them as mini-batches within the
// window, and reports the mini-batches that ran out of tries. Not thread-safe.
class Feeder final {
 public:
  Feeder(Session& session, std::string db) : s_(session), db_(std::move(db)) {}

  // Returns whether no mini-batch was sent (JobFeeder's contract).
  bool run() {
    // Refused (the reason goes to stderr as for `fanout run`): no "accepted" line.
    if (s_.policy().job_id() == 0) return true;
    const auto& acc = s_.policy().accepted();
    emit({{"event", "accepted"},
          {"job", s_.policy().job_id()},
          {"db", acc.db_path.empty() ? db_ : acc.db_path},
          {"log_dir", acc.log_dir}});
    ::fcntl(STDIN_FILENO, F_SETFL, ::fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);
    for (;;) {
      // A probe found the interchange knowing fewer mini-batches than were sent (it restarted,
      // or a frame is still on its way): send again from there; it drops what it has.
      if (auto from = s_.policy().take_resubmit()) {
        if (!resend_from(*from)) break;
        continue;
      }
      if (!s_.policy().keep_going()) break;
      const bool read_some =
          !done_reading() && lines_.empty() && s_.policy().credit() > 0 && read_stdin();
      send_lines();
      if (stdin_ended_ && !sent_end_) end_submission();
      // Without calls to read, wait on the interchange a little; stdin is polled again then.
      (void)s_.pump(std::chrono::milliseconds(read_some || !lines_.empty() ? 0 : 2));
      forget_known();
      if (end_not_taken() && !resend_from(s_.policy().progress().submitted)) break;
      report_failures(false);
    }
    report_failures(true);
    const auto& ended = s_.policy().ended();
    emit({{"event", "ended"},
          {"state", ended ? ended->state : std::string()},
          {"reason", ended ? ended->reason : s_.policy().detail()}});
    return next_index_ == 0;
  }

 private:
  [[nodiscard]] bool done_reading() const { return stdin_ended_ || cancelled_; }

  // Reads what stdin holds now into whole lines. Returns whether anything was read.
  bool read_stdin() {
    pollfd p{.fd = STDIN_FILENO, .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    char buf[1 << 16];
    bool any = false, eof = false;
    for (;;) {
      const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n > 0) {
        any = true;
        partial_.append(buf, static_cast<std::size_t>(n));
        if (partial_.size() > (8u << 20)) break;  // let the window take some first
        continue;
      }
      if (n == 0) {
        eof = true;
      } else if (errno == EINTR) {
        continue;
      }
      break;
    }
    std::size_t start = 0;
    for (std::size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string line = partial_.substr(start, nl - start);
      if (line == kEndLine) {
        stdin_ended_ = true;
        start = nl + 1;
        break;
      }
      if (!line.empty()) lines_.push_back(std::move(line));
    }
    partial_.erase(0, start);
    if (eof && !stdin_ended_) {  // the Executor's process went away without ending the job
      cancelled_ = true;
      s_.cancel("the Python process of the fanout.Executor went away");
    }
    return any;
  }

  // Drops the copies of the mini-batches the interchange reported as known.
  void forget_known() {
    const std::uint64_t known = s_.policy().progress().submitted;
    while (!sent_.empty() && sent_base_ < known) {
      sent_.pop_front();
      ++sent_base_;
    }
  }

  // True when SubmitEnd was sent and the interchange has said for kEndRefusedAfter that it knows
  // fewer mini-batches than were sent and no total: it refused the end for the missing ones
  // (they were lost on the way) and waits for them.
  bool end_not_taken() {
    const auto& p = s_.policy().progress();
    if (!sent_end_ || p.total != 0 || p.submitted >= s_.policy().submitted()) {
      short_since_.reset();
      return false;
    }
    const auto now = Clock::now();
    if (!short_since_) short_since_ = now;
    if (now - *short_since_ < kEndRefusedAfter) return false;
    short_since_.reset();
    std::fprintf(stderr,
                 "warning: executor: job %llu: the interchange knows %llu of %llu "
                 "mini-batches after the end was sent; sending the rest again\n",
                 static_cast<unsigned long long>(s_.policy().job_id()),
                 static_cast<unsigned long long>(p.submitted),
                 static_cast<unsigned long long>(s_.policy().submitted()));
    s_.policy().resume_submission(p.submitted, s_.policy().accepted().window);
    return true;
  }

  // Queues again the mini-batches from index `from` on. False (the job is cancelled) when their
  // copies were already dropped: calls would be lost.
  bool resend_from(std::uint64_t from) {
    if (from < sent_base_) {
      const std::string why = "executor: the interchange lost mini-batches from " +
                              std::to_string(from) + " on, which were no longer kept";
      s_.cancel(why);
      s_.policy().fail(why);
      return false;
    }
    const auto keep =
        static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(from - sent_base_, sent_.size()));
    lines_.insert(lines_.begin(), std::make_move_iterator(sent_.begin() + keep),
                  std::make_move_iterator(sent_.end()));
    sent_.erase(sent_.begin() + keep, sent_.end());
    next_index_ = from;
    sent_end_ = false;  // take_resubmit() counted the sent ones back to `from`
    return true;
  }

  // Sends the lines read as mini-batches of one item each, as many as the window takes.
  void send_lines() {
    if (lines_.empty()) return;
    const std::uint64_t room = s_.policy().credit();
    proto::SubmitTasks frame{s_.policy().job_id(), {}};
    std::size_t bytes = 64;
    std::size_t taken = 0;
    while (taken < lines_.size() && frame.batches.size() < room && bytes < (4u << 20)) {
      bytes += lines_[taken].size() + 16;
      frame.batches.push_back(
          proto::MiniBatch{.index = next_index_++, .items = items_of(lines_[taken]), .detail = {}});
      // Kept until the interchange is known to have it: a probe that finds it missing sends it
      // again from here (resend_from); without the copy the call would be lost.
      sent_.push_back(std::move(lines_[taken]));
      ++taken;
    }
    lines_.erase(lines_.begin(), lines_.begin() + static_cast<std::ptrdiff_t>(taken));
    if (!frame.batches.empty()) s_.send_tasks(frame, bytes);
  }

  void end_submission() {
    if (!lines_.empty()) return;  // sent first, as the window allows
    s_.send_end();
    sent_end_ = true;
  }

  // Says which mini-batches ran out of tries, once each, when the job's failed count grew (or at
  // the end, `last`). The store holds why.
  void report_failures(bool last) {
    const std::uint64_t failed =
        s_.policy().ended() ? s_.policy().ended()->progress.failed : s_.policy().progress().failed;
    if (failed <= reported_.size() && !(last && failed > 0)) return;
    try {
      store::ReportSource src(db_);
      for (const auto& row : store::read_exhausted(src, s_.policy().job_id(),
                                                   std::numeric_limits<std::uint32_t>::max())) {
        if (!reported_.insert(row.minibatch).second) continue;
        emit({{"event", "failed"},
              {"index", row.minibatch},
              {"tries", row.tries},
              {"status", row.status},
              {"error", row.last}});
      }
    } catch (const Failure& f) {  // not readable here (another host's store): said once
      if (!store_unreadable_) std::fprintf(stderr, "warning: executor: %s\n", f.what());
      store_unreadable_ = true;
    }
  }

  Session& s_;
  std::string db_;
  std::string partial_{};
  std::deque<std::string> lines_{};  // read, not sent yet
  std::deque<std::string> sent_{};   // sent, from index sent_base_, until known to be there
  std::uint64_t sent_base_ = 0;
  std::uint64_t next_index_ = 0;
  std::set<std::uint64_t> reported_{};
  std::optional<Clock::time_point> short_since_{};  // see end_not_taken()
  bool stdin_ended_ = false, sent_end_ = false, cancelled_ = false, store_unreadable_ = false;
};

}  // namespace

int serve_executor(const std::string& job_file, const RunOverrides& ov, const Logger& log) {
  auto cfg = config::load_job(job_file);
  if (!cfg) {
    std::fprintf(stderr, "error: %s\n", cfg.error().message.c_str());
    return proto::kExitUsage;
  }
  if (auto r = prepare(*cfg, ov); !r) {
    std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
    return proto::kExitUsage;
  }
  try {
    return run_job(*cfg, ov, log, [](Session& session, const std::string& db) {
      return Feeder(session, db).run();
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return proto::kExitInfra;
  }
}

}  // namespace fanout::client
