// The client's session with the interchange. See session.hpp.
#include "client/session/session.hpp"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "client/launch/embedded.hpp"
#include "client/session/progress.hpp"
#include "fanout/protocol/codec.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/protocol/job_state.hpp"

namespace fanout::client {

// ---- SessionPolicy ----

SessionPolicy::SessionPolicy(SessionRules rules, Clock::time_point now)
    : rules_(rules), last_heard_(now) {}

void SessionPolicy::heard(Clock::time_point now) { last_heard_ = now; }

bool SessionPolicy::on_accepted(const proto::JobAccepted& m) {
  if (job_id_ != 0) return false;
  job_id_ = m.job_id;
  accepted_ = m;
  window_ = std::max<std::uint32_t>(m.window, 1);
  return true;
}

SessionPolicy::ProgressSeen SessionPolicy::on_progress(const proto::JobProgress& m) {
  ProgressSeen seen;
  if (job_id_ == 0 || m.job_id != job_id_) return seen;
  seen.ours = true;
  progress_ = m;
  // Each interchange process has its own instance number: a new one means a restart.
  if (m.instance != 0 && instance_ != 0 && m.instance != instance_) {
    seen.restarted = true;
    ++restarts_;
  }
  if (m.instance != 0) instance_ = m.instance;
  if (!probe_pending_) return seen;
  probe_pending_ = false;
  seen.probe_answered = true;
  seen.unanswered_before = unanswered_probes_;
  unanswered_probes_ = 0;
  // The answer to a probe comes after every frame sent before it, so a count below what was sent
  // (or no total after SubmitEnd) means a new interchange that knows only what it recorded. A
  // false alarm only resends mini-batches, which the interchange drops.
  const bool lost_tasks = m.submitted < submitted_;
  const bool lost_end = submit_ended_ && m.total == 0;
  if (lost_tasks || lost_end) {
    resubmit_from_ = m.submitted;
    seen.resubmit = true;
  }
  return seen;
}

bool SessionPolicy::on_ended(const proto::JobEnded& m) {
  if (job_id_ == 0 || m.job_id != job_id_) return false;
  ended_ = m;
  progress_ = m.progress;
  end_ = SessionEnd::Ended;  // the job's own end stands over anything seen before it
  detail_.clear();
  return true;
}

bool SessionPolicy::reject_ends(const proto::Reject& m) const {
  // The job's SubmitJob was refused, or an interchange does not know the job at all: nothing
  // can follow it.
  return job_id_ == 0 || !rules_.submits || proto::reject_code(m) == proto::RejectCode::UnknownJob;
}

void SessionPolicy::on_reject(const proto::Reject& m, Clock::time_point now) {
  if (end_ != SessionEnd::Open) return;
  if (reject_ends(m)) {
    reject_code_ = proto::reject_code(m);
    finish(SessionEnd::Rejected, m.reason);
    return;
  }
  // A SubmitTasks reached an interchange that restarted without the job: reattach now.
  last_probe_ = Clock::time_point{};
  last_heard_ = now - kProbeAfter;
}

SessionPolicy::Interrupt SessionPolicy::on_interrupts(int count) {
  Interrupt what = Interrupt::None;
  if (count > 0 && !rules_.interrupt_cancels) {
    if (end_ == SessionEnd::Open) {
      finish(SessionEnd::LeftRunning, "interrupted");
      return Interrupt::Leave;
    }
    return Interrupt::None;
  }
  if (count > 0 && job_id_ != 0 && !interrupt_cancelled_) {
    interrupt_cancelled_ = true;
    interrupted_at_ = Clock::now();
    cancel_reason_ = "cancelled by the user (signal)";
    what = Interrupt::Cancel;
  }
  if (count > 1 && end_ == SessionEnd::Open) {
    finish(SessionEnd::LeftRunning, "interrupted");
    what = Interrupt::Leave;
  }
  return what;
}

void SessionPolicy::not_accepted() { finish(SessionEnd::NotAccepted, {}); }
void SessionPolicy::child_died(std::string what) { finish(SessionEnd::ChildDied, std::move(what)); }
void SessionPolicy::interchange_gone(std::string what) {
  finish(SessionEnd::InterchangeGone, std::move(what));
}
void SessionPolicy::ended_in_store(proto::JobEnded e) {
  if (end_ != SessionEnd::Open) return;
  ended_ = std::move(e);
  progress_ = ended_->progress;
  end_ = SessionEnd::EndedInStore;
}
void SessionPolicy::fail(std::string what) { finish(SessionEnd::Failed, std::move(what)); }

void SessionPolicy::finish(SessionEnd why, std::string detail) {
  if (end_ != SessionEnd::Open) return;  // the first reason stands
  end_ = why;
  detail_ = std::move(detail);
}

bool SessionPolicy::probe_due(Clock::time_point now) {
  // Before the job has an id there is nothing to attach to; once it ended, nothing to ask.
  if (job_id_ == 0 || end_ != SessionEnd::Open) return false;
  if (now - last_heard_ < kProbeAfter || now - last_probe_ < kProbeAfter) return false;
  if (probe_pending_) ++unanswered_probes_;
  probe_sent(now);
  return true;
}

void SessionPolicy::probe_sent(Clock::time_point now) {
  probe_pending_ = true;
  last_probe_ = now;
}

bool SessionPolicy::give_up_if_silent(Clock::time_point now) {
  if (end_ != SessionEnd::Open) return false;
  if (interrupt_cancelled_ && now - interrupted_at_ > kInterruptNoAnswer &&
      now - last_heard_ > kInterruptNoAnswer) {
    // The user wants to stop, and no interchange has answered since: it is gone (killed, its
    // host down), and waiting for it to carry out the cancel could last forever.
    finish(SessionEnd::NoAnswer,
           fmt::format("interrupted, and the interchange did not answer for {} s: job {} was not "
                       "cancelled",
                       std::chrono::duration_cast<std::chrono::seconds>(now - last_heard_).count(),
                       job_id_));
    return true;
  }
  if (!rules_.give_up_after) return false;
  if (now - last_heard_ <= *rules_.give_up_after) return false;
  finish(SessionEnd::NoAnswer, {});
  return true;
}

std::uint64_t SessionPolicy::credit() const {
  const std::uint64_t limit = progress_.succeeded + progress_.failed + window_;
  return submitted_ >= limit ? 0 : limit - submitted_;
}

bool SessionPolicy::room_for(std::uint64_t want) const {
  const std::uint64_t done = progress_.succeeded + progress_.failed;
  return credit() >= want || submitted_ < done + window_ / 2;
}

std::optional<std::uint64_t> SessionPolicy::take_resubmit() {
  auto from = resubmit_from_;
  if (!from) return from;
  resubmit_from_.reset();
  submitted_ = *from;
  submit_ended_ = false;
  return from;
}

int exit_status(std::string_view state, bool allow_partial) {
  const auto st = proto::parse_job_state(state);
  if (st == proto::JobState::Succeeded) return 0;
  if (st == proto::JobState::Partial) return allow_partial ? 0 : kExitPartial;
  return kExitFailed;
}

int SessionPolicy::exit_code() const {
  switch (end_) {
    case SessionEnd::Ended:
    case SessionEnd::EndedInStore:
      return exit_status(ended_->state, rules_.allow_partial);
    case SessionEnd::Rejected:
      // A job this client submitted and lost is an infrastructure failure; a job id the user
      // gave that no interchange knows, or a submission refused for one of its fields (e.g.
      // its output file is another running job's), is a bad argument.
      if (rules_.submits && job_id_ == 0 && reject_code_ == proto::RejectCode::JobRefused) {
        return proto::kExitUsage;
      }
      return rules_.submits ? kExitInfra : kExitUsage;
    default:
      return proto::kExitInfra;
  }
}

bool attach_again(const SessionPolicy& s, const AttachOutcome& o) {
  // Accepted: the job is the owner's, and its end (or a resume) says what became of it.
  if (s.job_id() != 0) return false;
  // Refused, interrupted, input unreadable: a new interchange would not change that.
  if (s.end() != SessionEnd::ChildDied && s.end() != SessionEnd::NotAccepted) return false;
  // A private interchange of this run's own that died is a failure, not a race.
  if (!o.guest || !o.owner_gone) return false;
  // The owner recorded the job before it went (killed, not idle): its resume finishes it.
  if (o.job_in_store) return false;
  return o.tries < kAttachTries;
}

// ---- Session ----

Session::Session(std::string endpoint, Options opts, Logger log)
    : endpoint_(std::move(endpoint)),
      opts_(std::move(opts)),
      log_(std::move(log)),
      policy_(opts_.rules, Clock::now()) {
  connect();
}

void Session::connect() {
  sock_.emplace(ctx_, net::Socket::Kind::Dealer);
  net::connect_secure(*sock_, endpoint_,
                      opts_.embedded != nullptr ? opts_.embedded->security() : opts_.security,
                      net::Role::Client);
  poller_.add(*sock_);
}

bool Session::submit(const proto::JobSpec& spec) {
  job_name_ = spec.name;
  log_dir_ = spec.log_dir;
  (void)sock_->send(proto::encode(proto::SubmitJob{spec}), false);
  const auto deadline = Clock::now() + kAcceptWithin;
  while (policy_.job_id() == 0 && pump(std::chrono::milliseconds(50))) {
    if (Clock::now() > deadline) policy_.not_accepted();
  }
  return policy_.keep_going();
}

void Session::attach(std::uint64_t id, std::string cancel_reason) {
  policy_.follow(id);
  if (!cancel_reason.empty()) policy_.request_cancel(std::move(cancel_reason));
  send_probe(false);
  policy_.probe_sent(Clock::now());
}

void Session::reopen(std::uint64_t id) {
  (void)sock_->send(proto::encode(proto::ReopenJob{id}), false);
}

void Session::send_probe(bool dont_wait) {
  const std::uint64_t id = policy_.job_id();
  if (!policy_.cancel_reason().empty()) {
    (void)sock_->send(proto::encode(proto::CancelJob{id, policy_.cancel_reason()}), dont_wait);
  }
  (void)sock_->send(proto::encode(proto::Attach{id}), dont_wait);
}

void Session::handle(const std::string& frame, Clock::time_point now) {
  auto h = proto::read_header(frame);
  if (!h) return;
  switch (h->type) {
    case proto::MsgType::JobAccepted:
      if (auto m = proto::decode<proto::JobAccepted>(frame); m && policy_.on_accepted(*m)) {
        if (opts_.printer != nullptr) {
          opts_.printer->accepted(m->job_id, job_name_, m->log_dir.empty() ? log_dir_ : m->log_dir);
        }
      }
      return;
    case proto::MsgType::JobProgress: {
      auto m = proto::decode<proto::JobProgress>(frame);
      if (!m) return;
      const auto seen = policy_.on_progress(*m);
      if (!seen.ours) return;
      if (opts_.embedded != nullptr) opts_.embedded->observe(*m);  // elastic pool jobs
      if (opts_.printer != nullptr) opts_.printer->update(policy_.progress());
      const std::uint64_t id = policy_.job_id();
      if (seen.restarted) log_->warn("job {}: the interchange restarted; reattached", id);
      if (seen.unanswered_before > 0) {
        log_->warn("job {}: the interchange answers again after {} unanswered probes", id,
                   seen.unanswered_before);
      }
      if (seen.resubmit) {
        log_->warn(
            "job {}: the interchange knows {} of {} mini-batches submitted; resubmitting from "
            "there",
            id, m->submitted, policy_.submitted());
      }
      return;
    }
    case proto::MsgType::JobEnded:
      if (auto m = proto::decode<proto::JobEnded>(frame)) (void)policy_.on_ended(*m);
      return;
    case proto::MsgType::Reject:
      if (auto m = proto::decode<proto::Reject>(frame)) {
        // Not known to this interchange: the job may have ended under another one.
        // A refused reopen is said as such, not as the job's old end the store still holds.
        std::optional<proto::JobEnded> in_store;
        if (policy_.reject_ends(*m) && opts_.ended_in_store &&
            proto::reject_code(*m) != proto::RejectCode::ReopenRefused) {
          in_store = opts_.ended_in_store();
        }
        if (in_store) {
          policy_.ended_in_store(std::move(*in_store));
        } else {
          policy_.on_reject(*m, now);
        }
      }
      return;
    default:
      return;
  }
}

bool Session::pump(std::chrono::milliseconds wait) {
  poller_.wait(wait);
  while (sock_->recv(msg_)) {
    const auto now = Clock::now();
    policy_.heard(now);
    handle(msg_.frame, now);
  }
  if (policy_.end() != SessionEnd::Open) return false;
  if (opts_.embedded != nullptr) {
    if (auto dead = opts_.embedded->dead_child(); !dead.empty()) {
      // Killed after the job's end was committed, before JobEnded left: the job did end.
      if (auto in_store = opts_.ended_in_store ? opts_.ended_in_store() : std::nullopt) {
        policy_.ended_in_store(std::move(*in_store));
      } else {
        policy_.child_died(std::move(dead));
      }
      return false;
    }
  }
  const auto now = Clock::now();
  if (policy_.probe_due(now)) {
    // The job may have ended while no interchange was there to tell us (an embedded one exits
    // once idle): the store has the final word.
    if (auto in_store = opts_.ended_in_store ? opts_.ended_in_store() : std::nullopt) {
      policy_.ended_in_store(std::move(*in_store));
      return false;
    }
    if (auto gone = opts_.interchange_gone ? opts_.interchange_gone() : std::string();
        !gone.empty()) {
      // It may have committed the job's end just before it exited: the store, once more.
      if (auto in_store = opts_.ended_in_store ? opts_.ended_in_store() : std::nullopt) {
        policy_.ended_in_store(std::move(*in_store));
      } else {
        policy_.interchange_gone(std::move(gone));
      }
      return false;
    }
    send_probe(true);
    if (opts_.printer != nullptr && policy_.unanswered_probes() > 0) {
      const double silent_s = std::chrono::duration<double>(now - policy_.last_heard()).count();
      opts_.printer->unreachable(unix_now() - silent_s);
    }
  }
  policy_.give_up_if_silent(now);
  if (opts_.halt && !halt_sent_ && policy_.job_id() != 0) {
    if (std::string why = opts_.halt(); !why.empty()) {
      halt_sent_ = true;
      policy_.request_cancel(why);
      (void)sock_->send(proto::encode(proto::CancelJob{policy_.job_id(), why}));
    }
  }
  if (opts_.interrupts != nullptr) {
    switch (policy_.on_interrupts(opts_.interrupts->load(std::memory_order_relaxed))) {
      case SessionPolicy::Interrupt::Cancel:
        std::fprintf(stderr, "\nfanout: cancelling job %llu (Ctrl-C again to leave it running)\n",
                     static_cast<unsigned long long>(policy_.job_id()));
        (void)sock_->send(
            proto::encode(proto::CancelJob{policy_.job_id(), policy_.cancel_reason()}));
        break;
      default:
        break;
    }
  }
  return policy_.keep_going();
}

bool Session::wait_for_room(std::uint64_t want) {
  while (policy_.keep_going() && !policy_.room_for(want)) pump(std::chrono::milliseconds(20));
  return policy_.keep_going();
}

void Session::follow() {
  while (policy_.keep_going() && pump(std::chrono::milliseconds(200))) {
  }
}

void Session::send_tasks(const proto::SubmitTasks& frame, std::size_t reserve) {
  policy_.sent_tasks(frame.batches.size());
  (void)sock_->send(proto::encode(frame, reserve), false);
}

void Session::send_end() {
  (void)sock_->send(proto::encode(proto::SubmitEnd{policy_.job_id(), policy_.submitted()}), false);
  policy_.sent_end();
}

void Session::cancel(std::string reason) {
  policy_.request_cancel(reason);
  (void)sock_->send(proto::encode(proto::CancelJob{policy_.job_id(), std::move(reason)}));
}

bool Session::shutdown(const std::string& reason, const std::string& token) {
  (void)sock_->send(proto::encode(proto::Shutdown{reason, token}));
  if (opts_.embedded == nullptr) return false;
  // It stops at once, unless jobs of other clients run there: then it says so and goes on.
  // Its exit is looked for every 5 ms: the command returns as soon after it as it can.
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline && !opts_.embedded->interchange_exited()) {
    poller_.wait(std::chrono::milliseconds(5));
    while (sock_->recv(msg_)) {
      auto h = proto::read_header(msg_.frame);
      if (!h || h->type != proto::MsgType::Reject) continue;
      if (auto m = proto::decode<proto::Reject>(msg_.frame);
          m && proto::reject_code(*m) == proto::RejectCode::ShutdownDeferred) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace fanout::client
