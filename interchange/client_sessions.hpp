// The clients of each job: who is attached, when a job's progress (and with it window credit)
// is due, and who is told JobEnded. Decides without doing I/O; the wiring sends the frames.
// See docs/protocol.md (JobProgress, Attach, JobEnded) and docs/architecture.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "fanout/protocol/messages.hpp"
#include "fanout/util/clock.hpp"

namespace fanout::ix {

using ClientSet = std::unordered_set<std::string>;

// A JobEnded and the clients it goes to.
struct Delivery {
  proto::JobEnded ended{};
  ClientSet clients{};
};

// Not thread-safe: owned and used only by the interchange poll loop.
class ClientSessions final {
 public:
  // `window`: mini-batches a client may have queued per job; progress goes out at once when a
  // quarter of it finished since the last one (its credit), else at most every
  // `progress_interval` and only when something finished.
  ClientSessions(std::uint32_t window, std::chrono::milliseconds progress_interval)
      : window_(window), progress_interval_(progress_interval) {}

  // A job went live (accepted or resumed) at `now`, with no client yet.
  void open(std::uint64_t job_id, Clock::time_point now);
  // `peer` follows a live job (it submitted or cancelled it).
  void join(std::uint64_t job_id, const std::string& peer);

  enum class Attached : std::uint8_t {
    Live,       // the job runs: send its progress now
    Reporting,  // its report is being written: JobEnded follows when it is
    Ended,      // it ended here earlier: send `ended` again
    Unknown,    // not known here: reject
  };
  struct AttachReply {
    Attached what = Attached::Unknown;
    const proto::JobEnded* ended = nullptr;  // with Ended
  };
  // Attach: `peer` follows the job from now on, wherever it is in its life.
  AttachReply attach(std::uint64_t job_id, const std::string& peer);

  // The clients to send the job's progress to now, or null when none is due. `finished`: its
  // mini-batches finished so far; `force`: due whatever the cadence (an attach, a SubmitEnd that
  // was short). A due progress is recorded as sent.
  const ClientSet* progress_due(std::uint64_t job_id, std::uint64_t finished, Clock::time_point now,
                                bool force);

  // The job ended. Without a report to wait for, returns its JobEnded to deliver now; else it
  // waits for report_written().
  std::optional<Delivery> close(proto::JobEnded ended, bool wait_for_report);
  // The job's report was written in `wall_s` and `cpu_s`: its JobEnded to deliver now.
  std::optional<Delivery> report_written(std::uint64_t job_id, double wall_s, double cpu_s);
  // A JobEnded went out: later attaches get it again.
  void delivered(const proto::JobEnded& ended) { ended_[ended.job_id] = ended; }

  [[nodiscard]] bool reporting() const noexcept { return !reporting_.empty(); }
  // Whether a client other than `peer` follows a live job (one that attached from another
  // `fanout run` on the same store).
  [[nodiscard]] bool followed_by_others(const std::string& peer) const;

 private:
  struct Session {
    ClientSet clients{};
    Clock::time_point last_progress{};
    std::uint64_t finished_at_last_progress = 0;
  };

  std::uint32_t window_;
  std::chrono::milliseconds progress_interval_;
  std::unordered_map<std::uint64_t, Session> live_{};
  std::map<std::uint64_t, Delivery> reporting_{};     // ended, report being written
  std::map<std::uint64_t, proto::JobEnded> ended_{};  // ended jobs seen by this process
};

}  // namespace fanout::ix
