// The client's session with the interchange about one job, used by `fanout run`, `wait`,
// `cancel`, `resume` and `perf`: submit the job (or attach to it by id), send its mini-batches
// within the window, follow its progress, reattach after an interchange restart, and end with
// the job's end or the reason there is none. SessionPolicy decides without doing I/O (its unit
// tests read as the specification); Session does the I/O around it. See docs/architecture.md,
// "Interchange crash and resume".
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "fanout/net/security.hpp"
#include "fanout/net/socket.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/protocol/messages.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/log.hpp"

namespace fanout::client {

class Embedded;
class ProgressPrinter;

// After this long without a frame from the interchange the session probes it with Attach, and
// probes again at this period while it stays silent.
inline constexpr auto kProbeAfter = std::chrono::seconds(2);
// How long a submitted job may wait for JobAccepted.
inline constexpr auto kAcceptWithin = std::chrono::seconds(30);
// After an interrupt asked to cancel the job, the silence of the interchange past which the
// session ends (NoAnswer) instead of waiting for an interchange that is gone.
inline constexpr auto kInterruptNoAnswer = std::chrono::seconds(5);

// Why a session is over.
enum class SessionEnd : std::uint8_t {
  Open,             // not over
  Ended,            // the interchange sent JobEnded
  EndedInStore,     // the store holds the job as ended, and no interchange said so
  Rejected,         // the interchange refused the job or does not know it
  NotAccepted,      // no JobAccepted within kAcceptWithin
  NoAnswer,         // the interchange was silent for longer than SessionRules::give_up_after
  ChildDied,        // the embedded interchange, or every embedded pool, exited
  InterchangeGone,  // the followed job's interchange is known dead (its pid, on this host)
  LeftRunning,      // interrupted twice: the job goes on without the client
  Failed,           // the client cannot go on (its input could not be listed)
};

struct SessionRules {
  // The session submitted the job (run, perf), or follows a job by id (wait, cancel, resume).
  bool submits = true;
  // Silence after which the session gives up; nullopt: it probes for as long as it runs.
  std::optional<Clock::duration> give_up_after{};
  // The first interrupt asks to cancel the job (run), or ends the session leaving the job as it
  // is (wait, cancel, resume: they stop following; resume stops its private interchange).
  bool interrupt_cancels = true;
  // A `partial` job exits 0 (ParallelRunStep's success) instead of kExitPartial.
  bool allow_partial = false;
};

// The exit statuses of `fanout` are declared once, with the other programs':
// protocol/exit_codes.hpp.
using proto::kExitFailed;
using proto::kExitInfra;
using proto::kExitOk;
using proto::kExitPartial;
using proto::kExitUsage;

// The exit status of a job that ended in `state` (proto::JobState's spelling): 0 succeeded,
// kExitPartial partial (0 with `allow_partial`), kExitFailed failed, cancelled or unknown.
[[nodiscard]] int exit_status(std::string_view state, bool allow_partial);

// The decisions of a session, from what arrived and the time: whether to probe, whether a
// Reject ends the session, from where to resubmit after an interchange restart, how much the
// window lets the client send, and the exit code. No I/O. Not thread-safe.
class SessionPolicy final {
 public:
  SessionPolicy(SessionRules rules, Clock::time_point now);

  // ---- what arrived ----
  // Any frame: the interchange is alive.
  void heard(Clock::time_point now);
  // The first JobAccepted names the job and its window (at least 1); later ones are ignored.
  // Returns true for the first.
  bool on_accepted(const proto::JobAccepted& m);
  struct ProgressSeen {
    bool ours = false;       // about this session's job (others are ignored)
    bool restarted = false;  // from another interchange process than the previous one
    bool probe_answered = false;
    std::uint64_t unanswered_before = 0;  // probes unanswered before this answer
    bool resubmit = false;                // the interchange lost submitted work: see resubmit_from
  };
  // A JobProgress. The answer to a probe that reports fewer mini-batches than were sent, or no
  // total after SubmitEnd, means the interchange restarted without them: the submission must
  // restart from the count it knows.
  ProgressSeen on_progress(const proto::JobProgress& m);
  // JobEnded of this job ends the session, whatever else happened. Returns true when ours.
  bool on_ended(const proto::JobEnded& m);
  // A Reject ends the session when the job is not known (its SubmitJob refused, an Attach
  // refused, or anything refused about a job the session only follows). Otherwise a submission
  // reached an interchange that restarted without the job's frames: probe at once.
  void on_reject(const proto::Reject& m, Clock::time_point now);
  // Whether on_reject(m) would end the session.
  [[nodiscard]] bool reject_ends(const proto::Reject& m) const;
  // How many times the user interrupted (Ctrl-C, SIGTERM). The first asks to cancel the job;
  // the second leaves it running and ends the session. Without rules.interrupt_cancels the first
  // ends the session (LeftRunning, "interrupted").
  enum class Interrupt : std::uint8_t { None, Cancel, Leave };
  Interrupt on_interrupts(int count);

  // ---- what the client did or found ----
  void sent_tasks(std::uint64_t n) { submitted_ += n; }
  void sent_end() { submit_ended_ = true; }
  // Asks to cancel the job: CancelJob now and with every probe until it ends.
  void request_cancel(std::string reason) { cancel_reason_ = std::move(reason); }
  void not_accepted();
  void child_died(std::string what);
  // The job's interchange is known dead (and the store does not hold the job as ended).
  void interchange_gone(std::string what);
  // The store holds the job as ended (`e` built from it): the session ends as if told so.
  void ended_in_store(proto::JobEnded e);
  void fail(std::string what);

  // ---- what to do ----
  // True when a probe (CancelJob if requested, then Attach) is due now; counts it as sent.
  [[nodiscard]] bool probe_due(Clock::time_point now);
  // Counts a probe sent outside probe_due() (the first Attach of a session that follows a job).
  void probe_sent(Clock::time_point now);
  // Ends the session when it has been silent for longer than the rules allow, or for
  // kInterruptNoAnswer since an interrupt asked to cancel the job. Returns true then.
  bool give_up_if_silent(Clock::time_point now);
  // Mini-batches the window lets the client send now (0 when it is full).
  [[nodiscard]] std::uint64_t credit() const;
  // True when `want` mini-batches fit in the window, or half of it is free (a client sending
  // frames of many mini-batches need not wait for a whole frame's credit).
  [[nodiscard]] bool room_for(std::uint64_t want) const;
  // The count to resubmit from after a restart, once: the submission restarts there (nothing
  // sent after it, no SubmitEnd).
  [[nodiscard]] std::optional<std::uint64_t> take_resubmit();
  // The session goes on: not over, and no resubmission due.
  [[nodiscard]] bool keep_going() const { return end_ == SessionEnd::Open && !resubmit_from_; }
  // 0 the job succeeded, 1 it failed or was cancelled, 2 a followed job is not known, 3 no end
  // (no interchange, a child died, left running).
  [[nodiscard]] int exit_code() const;

  [[nodiscard]] SessionEnd end() const { return end_; }
  [[nodiscard]] const std::string& detail() const { return detail_; }  // reject reason, ...
  [[nodiscard]] std::uint64_t job_id() const { return job_id_; }
  // The first JobAccepted (its paths are the interchange's: store and the job's logs folder).
  [[nodiscard]] const proto::JobAccepted& accepted() const { return accepted_; }
  [[nodiscard]] const proto::JobProgress& progress() const { return progress_; }
  [[nodiscard]] const std::optional<proto::JobEnded>& ended() const { return ended_; }
  [[nodiscard]] std::uint64_t submitted() const { return submitted_; }
  [[nodiscard]] std::uint64_t restarts() const { return restarts_; }
  // When a frame last arrived (or the session started), and probes unanswered since, in a row.
  [[nodiscard]] Clock::time_point last_heard() const { return last_heard_; }
  [[nodiscard]] std::uint64_t unanswered_probes() const { return unanswered_probes_; }
  [[nodiscard]] const std::string& cancel_reason() const { return cancel_reason_; }
  // Follow job `id` (submitted elsewhere).
  void follow(std::uint64_t id) { job_id_ = id; }
  // A followed job whose submission was cut short (its client killed): this session sends the
  // rest, from mini-batch `from` on, within `window` (the interchange's).
  void resume_submission(std::uint64_t from, std::uint32_t window) {
    submitted_ = from;
    submit_ended_ = false;
    window_ = std::max<std::uint32_t>(window, 1);
  }

 private:
  void finish(SessionEnd why, std::string detail);

  SessionRules rules_;
  std::uint64_t job_id_ = 0;
  std::uint32_t window_ = 0;
  proto::JobAccepted accepted_{};
  proto::JobProgress progress_{};
  std::optional<proto::JobEnded> ended_{};
  SessionEnd end_ = SessionEnd::Open;
  std::string detail_{};
  proto::RejectCode reject_code_ = proto::RejectCode::Unspecified;  // of the Reject that ended it
  Clock::time_point last_heard_;
  Clock::time_point last_probe_{};
  bool probe_pending_ = false;
  std::uint64_t unanswered_probes_ = 0;  // in a row
  std::uint64_t submitted_ = 0;          // mini-batches sent (or known to the interchange)
  bool submit_ended_ = false;
  std::optional<std::uint64_t> resubmit_from_{};
  std::uint64_t instance_ = 0;  // of the interchange that last sent progress
  std::uint64_t restarts_ = 0;
  std::string cancel_reason_{};
  bool interrupt_cancelled_ = false;
  Clock::time_point interrupted_at_{};  // when the interrupt that asked to cancel came
};

// How many times in all `fanout run` attaches or starts an interchange when the store's owner it
// attached to goes away before accepting its job (attach_again).
inline constexpr int kAttachTries = 3;

// What `fanout run` knows after submit() when the store was owned by another interchange.
struct AttachOutcome {
  bool guest = false;         // this run attached to the store's owner (Embedded::guest())
  bool owner_gone = false;    // that owner no longer holds the store
  bool job_in_store = false;  // the store holds a job of this run (its logs folder)
  int tries = 1;              // attaches so far, this one included
};

// Whether `fanout run` starts over (makes the ownership decision again: its own private
// interchange, or the store's new owner): only when the session ended before JobAccepted
// because the owner it attached to went away (an idle owner exits), the store holds no job of
// this run (so nothing can run twice), and fewer than kAttachTries tries were made. No I/O.
[[nodiscard]] bool attach_again(const SessionPolicy& s, const AttachOutcome& o);

// The I/O of a session: one DEALER socket to the interchange, frames in and out, the embedded
// children's health and the progress display. Owned by one command; not thread-safe.
class Session final {
 public:
  struct Options {
    SessionRules rules{};
    Embedded* embedded = nullptr;  // its children's death ends the session
    // Curve keys for a tcp:// endpoint (docs/security.md); with `embedded`, its own are used.
    net::Security security{};
    ProgressPrinter* printer = nullptr;            // shown acceptance and progress; null: none
    const std::atomic<int>* interrupts = nullptr;  // the Ctrl-C count; null: not interruptible
    // Asked before each probe and on a Reject that ends the session: the job's end when the
    // store holds it as ended (no interchange may be left to say so).
    std::function<std::optional<proto::JobEnded>()> ended_in_store{};
    // Asked before each probe (after ended_in_store): a description when the job's interchange
    // is known dead, "" when alive or unknown.
    std::function<std::string()> interchange_gone{};
    // Asked on each turn once the job is accepted: a reason to end it early that is not the
    // user's (an ad-hoc run's --halt success=N met), "" while there is none. The job is then
    // cancelled once, with that reason, and nothing is said of an interrupt.
    std::function<std::string()> halt{};
  };
  // Connects to the interchange's client endpoint (nothing is sent yet). Throws Failure naming
  // the key file when a Curve key is missing or readable by others, or --insecure is asked for
  // an address that is not loopback.
  Session(std::string endpoint, Options opts, Logger log);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Sends SubmitJob and waits up to kAcceptWithin for JobAccepted. False when the session is
  // over (refused, no answer, a child died, interrupted).
  bool submit(const proto::JobSpec& spec);
  // Follows job `id` submitted elsewhere: CancelJob first when `cancel_reason` is set, then
  // Attach.
  void attach(std::uint64_t id, std::string cancel_reason = {});
  // Asks the interchange to reopen job `id`'s failed mini-batches (ReopenJob), once; call it
  // before attach(). A refusal ends the session as Rejected with its reason.
  void reopen(std::uint64_t id);
  // Handles what arrives within `wait`, then the embedded children, the interrupts, probing and
  // giving up. Returns keep_going().
  bool pump(std::chrono::milliseconds wait);
  // Pumps until room_for(want). Returns keep_going().
  bool wait_for_room(std::uint64_t want);
  // Pumps until the session is over or a resubmission is due.
  void follow();
  // Sends a frame of mini-batches (blocking; `reserve` sizes the encoding) and counts them.
  void send_tasks(const proto::SubmitTasks& frame, std::size_t reserve);
  // Sends SubmitEnd with the count sent.
  void send_end();
  // Asks the interchange to cancel the job now (and with each probe) with `reason`.
  void cancel(std::string reason);
  // Asks the private interchange to stop (it needs the token it was started with) and, with an
  // embedded interchange, waits up to 5 s for it to exit. True when it deferred instead because
  // jobs of other clients run there (`fanout run`s that attached to this store's owner): leave
  // it running then (Embedded::detach()).
  bool shutdown(const std::string& reason, const std::string& token);

  [[nodiscard]] SessionPolicy& policy() { return policy_; }
  [[nodiscard]] const SessionPolicy& policy() const { return policy_; }
  [[nodiscard]] const std::string& endpoint() const { return endpoint_; }

 private:
  // The one place the client creates its socket and connects it to the interchange.
  void connect();
  void handle(const std::string& frame, Clock::time_point now);
  void send_probe(bool dont_wait);

  std::string endpoint_;
  Options opts_;
  Logger log_;
  SessionPolicy policy_;
  std::string job_name_{}, log_dir_{};  // of a submitted job, for the progress display
  bool halt_sent_ = false;              // opts_.halt's cancel went out
  net::Context ctx_;
  std::optional<net::Socket> sock_{};
  net::Poller poller_;
  net::Message msg_;
};

}  // namespace fanout::client
