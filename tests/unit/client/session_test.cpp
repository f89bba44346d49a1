// The session policy of the client (client/session/session.hpp), read as its specification: when
// the client probes the interchange, when it gives up, what a Reject means, from where it resubmits
// after an interchange restart, how far the window lets it run ahead, and which exit code a
// session ends with. No processes and no sockets: time is passed in.
#include "client/session/session.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <string>

using fanout::Clock;
using fanout::client::kProbeAfter;
using fanout::client::SessionEnd;
using fanout::client::SessionPolicy;
using fanout::client::SessionRules;
namespace proto = fanout::proto;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

const Clock::time_point t0 = Clock::now();

// A session that submitted a job and got id 7 with `window`.
SessionPolicy submitted(std::uint32_t window = 100) {
  SessionPolicy p(SessionRules{.submits = true}, t0);
  p.heard(t0);
  REQUIRE(p.on_accepted(proto::JobAccepted{7, window}));
  return p;
}

// A session following job 7 by id, which sent its first Attach at t0.
SessionPolicy following(std::optional<Clock::duration> give_up = std::nullopt) {
  SessionPolicy p(SessionRules{.submits = false, .give_up_after = give_up}, t0);
  p.follow(7);
  p.probe_sent(t0);
  return p;
}

proto::JobProgress progress(std::uint64_t submitted, std::uint64_t done, std::uint64_t total = 0,
                            std::uint64_t instance = 1) {
  proto::JobProgress m;
  m.job_id = 7;
  m.submitted = submitted;
  m.succeeded = done;
  m.total = total;
  m.instance = instance;
  return m;
}

proto::JobEnded ended(const std::string& state) {
  proto::JobEnded e;
  e.job_id = 7;
  e.state = state;
  return e;
}

}  // namespace

// ---- acceptance and the window ----

TEST_CASE("client.session.the_first_acceptance_names_the_job_and_a_window_of_at_least_one") {
  SessionPolicy p(SessionRules{}, t0);
  CHECK(p.credit() == 0);  // nothing may be sent before the job has an id
  CHECK(p.on_accepted(proto::JobAccepted{7, 0}));
  CHECK(p.job_id() == 7);
  CHECK(p.credit() == 1);
  CHECK_FALSE(p.on_accepted(proto::JobAccepted{8, 50}));
  CHECK(p.job_id() == 7);
  CHECK(p.credit() == 1);
}

TEST_CASE("client.session.the_window_bounds_mini_batches_sent_beyond_those_finished") {
  SessionPolicy p = submitted(10);
  CHECK(p.credit() == 10);
  p.sent_tasks(7);
  CHECK(p.credit() == 3);
  p.sent_tasks(3);
  CHECK(p.credit() == 0);
  CHECK_FALSE(p.room_for(1));
  auto m = progress(10, 2);
  m.failed = 1;  // failed mini-batches are finished too
  (void)p.on_progress(m);
  CHECK(p.credit() == 3);
  CHECK(p.room_for(1));
}

TEST_CASE("client.session.a_frame_waits_for_its_credit_or_for_half_the_window_free") {
  SessionPolicy p = submitted(2000);
  p.sent_tasks(1500);  // 500 of credit: not a whole frame of 1024, and less than half free
  CHECK_FALSE(p.room_for(1024));
  (void)p.on_progress(progress(1500, 499));  // 999 of credit, still not half free
  CHECK_FALSE(p.room_for(1024));
  (void)p.on_progress(progress(1500, 501));  // 999 in flight: more than half the window free
  CHECK(p.room_for(1024));
  (void)p.on_progress(progress(1500, 524));  // a whole frame of credit
  CHECK(p.room_for(1024));
}

// ---- probing ----

TEST_CASE("client.session.no_probe_before_the_job_has_an_id") {
  SessionPolicy p(SessionRules{}, t0);
  CHECK_FALSE(p.probe_due(t0 + seconds(60)));
}

TEST_CASE("client.session.probes_after_kProbeAfter_of_silence_then_every_kProbeAfter") {
  SessionPolicy p = submitted();
  CHECK_FALSE(p.probe_due(t0 + kProbeAfter - milliseconds(1)));
  CHECK(p.probe_due(t0 + kProbeAfter));
  CHECK_FALSE(p.probe_due(t0 + kProbeAfter + milliseconds(1)));  // just probed
  CHECK(p.probe_due(t0 + 2 * kProbeAfter));
}

TEST_CASE("client.session.any_frame_postpones_the_probe") {
  SessionPolicy p = submitted();
  p.heard(t0 + seconds(1));
  CHECK_FALSE(p.probe_due(t0 + kProbeAfter));
  CHECK(p.probe_due(t0 + seconds(1) + kProbeAfter));
}

TEST_CASE("client.session.a_followed_job_is_probed_on_the_same_cadence_from_its_first_attach") {
  SessionPolicy p = following();
  CHECK_FALSE(p.probe_due(t0 + kProbeAfter - milliseconds(1)));
  CHECK(p.probe_due(t0 + kProbeAfter));
}

TEST_CASE("client.session.no_probe_once_the_job_ended") {
  SessionPolicy p = submitted();
  CHECK(p.on_ended(ended("succeeded")));
  CHECK_FALSE(p.probe_due(t0 + seconds(60)));
}

TEST_CASE("client.session.unanswered_probes_are_counted_until_an_answer") {
  SessionPolicy p = submitted();
  CHECK(p.probe_due(t0 + kProbeAfter));
  CHECK(p.probe_due(t0 + 2 * kProbeAfter));
  CHECK(p.probe_due(t0 + 3 * kProbeAfter));
  auto seen = p.on_progress(progress(0, 0));
  CHECK(seen.probe_answered);
  CHECK(seen.unanswered_before == 2);
  CHECK(p.probe_due(t0 + 4 * kProbeAfter));
  seen = p.on_progress(progress(0, 0));
  CHECK(seen.unanswered_before == 0);
}

// ---- giving up ----

TEST_CASE("client.session.gives_up_after_the_silence_limit_only_when_the_rules_set_one") {
  SUBCASE("wait and cancel: after the limit") {
    SessionPolicy p = following(seconds(60));
    CHECK_FALSE(p.give_up_if_silent(t0 + seconds(60)));
    CHECK(p.keep_going());
    CHECK(p.give_up_if_silent(t0 + seconds(61)));
    CHECK(p.end() == SessionEnd::NoAnswer);
    CHECK(p.exit_code() == 3);
  }
  SUBCASE("a frame restarts the count") {
    SessionPolicy p = following(seconds(60));
    p.heard(t0 + seconds(30));
    CHECK_FALSE(p.give_up_if_silent(t0 + seconds(61)));
  }
  SUBCASE("run: never, it probes for as long as it runs") {
    SessionPolicy p = submitted();
    CHECK_FALSE(p.give_up_if_silent(t0 + std::chrono::hours(24)));
    CHECK(p.keep_going());
  }
}

// ---- reattaching and resubmitting after an interchange restart ----

TEST_CASE("client.session.a_probe_answer_knowing_fewer_mini_batches_resubmits_from_its_count") {
  SessionPolicy p = submitted();
  p.sent_tasks(50);
  (void)p.on_progress(progress(50, 10));
  REQUIRE(p.probe_due(t0 + kProbeAfter));
  auto seen = p.on_progress(progress(20, 10, 0, 2));
  CHECK(seen.resubmit);
  CHECK_FALSE(p.keep_going());  // the submission must restart
  auto from = p.take_resubmit();
  REQUIRE(from);
  CHECK(*from == 20);
  CHECK(p.submitted() == 20);  // counting restarts there
  CHECK(p.keep_going());
  CHECK_FALSE(p.take_resubmit());  // once
}

TEST_CASE("client.session.a_probe_answer_without_a_total_after_submit_end_resubmits") {
  SessionPolicy p = submitted();
  p.sent_tasks(50);
  p.sent_end();
  REQUIRE(p.probe_due(t0 + kProbeAfter));
  CHECK(p.on_progress(progress(50, 10, 0)).resubmit);
  CHECK(*p.take_resubmit() == 50);
  // After the restart SubmitEnd is due again: a later answer with a total is fine.
  p.sent_end();
  REQUIRE(p.probe_due(t0 + 2 * kProbeAfter));
  CHECK_FALSE(p.on_progress(progress(50, 10, 50)).resubmit);
}

TEST_CASE("client.session.progress_that_answers_no_probe_never_resubmits") {
  SessionPolicy p = submitted();
  p.sent_tasks(50);
  // Progress sent while frames are still on their way counts fewer: not a restart.
  CHECK_FALSE(p.on_progress(progress(20, 10)).resubmit);
  CHECK(p.keep_going());
}

TEST_CASE("client.session.a_followed_job_never_resubmits") {
  SessionPolicy p = following();
  CHECK_FALSE(p.on_progress(progress(0, 0)).resubmit);
  CHECK_FALSE(p.take_resubmit());
}

TEST_CASE("client.session.a_new_interchange_instance_is_a_restart") {
  SessionPolicy p = submitted();
  CHECK_FALSE(p.on_progress(progress(0, 0, 0, 11)).restarted);
  CHECK_FALSE(p.on_progress(progress(0, 0, 0, 11)).restarted);
  CHECK_FALSE(p.on_progress(progress(0, 0, 0, 0)).restarted);  // 0: an interchange too old to say
  CHECK(p.on_progress(progress(0, 0, 0, 12)).restarted);
  CHECK(p.restarts() == 1);
}

TEST_CASE("client.session.frames_about_other_jobs_are_ignored") {
  SessionPolicy p = submitted();
  auto m = progress(5, 5);
  m.job_id = 8;
  CHECK_FALSE(p.on_progress(m).ours);
  CHECK(p.progress().succeeded == 0);
  auto e = ended("succeeded");
  e.job_id = 8;
  CHECK_FALSE(p.on_ended(e));
  CHECK(p.keep_going());
}

// ---- Reject ----

TEST_CASE("client.session.a_submission_refused_for_a_field_is_a_bad_argument_exit_code_2") {
  SessionPolicy p(SessionRules{.submits = true}, t0);
  p.on_reject(proto::Reject{"SubmitJob: output_path: /o.txt is the append_row output of running "
                            "job 3 (a)"},
              t0);
  CHECK(p.end() == SessionEnd::Rejected);
  CHECK(p.detail().rfind("SubmitJob: output_path:", 0) == 0);
  CHECK(p.exit_code() == 2);
}

TEST_CASE("client.session.a_refused_submission_for_another_reason_is_an_infrastructure_failure") {
  SessionPolicy p(SessionRules{.submits = true}, t0);
  p.on_reject(proto::Reject{"protocol version 9 is not supported"}, t0);
  CHECK(p.end() == SessionEnd::Rejected);
  CHECK(p.exit_code() == 3);
}

TEST_CASE("client.session.a_refused_attach_ends_the_session") {
  SessionPolicy p = submitted();
  p.on_reject(proto::Reject{"Attach: job 7 is not known here"}, t0);
  CHECK(p.end() == SessionEnd::Rejected);
  CHECK(p.exit_code() == 3);
}

TEST_CASE("client.session.refused_mini_batches_mean_a_restarted_interchange_so_it_probes_now") {
  SessionPolicy p = submitted();
  p.heard(t0 + seconds(10));
  CHECK_FALSE(p.reject_ends(proto::Reject{"SubmitTasks: job 7 is not running"}));
  p.on_reject(proto::Reject{"SubmitTasks: job 7 is not running"}, t0 + seconds(10));
  CHECK(p.keep_going());
  CHECK(p.probe_due(t0 + seconds(10)));
}

TEST_CASE("client.session.any_reject_about_a_followed_job_means_it_is_unknown_exit_code_2") {
  SessionPolicy p = following();
  CHECK(p.reject_ends(proto::Reject{"anything"}));
  p.on_reject(proto::Reject{"Attach: job 7 is not known here"}, t0);
  CHECK(p.end() == SessionEnd::Rejected);
  CHECK(p.exit_code() == 2);
}

TEST_CASE("client.session.steers_on_the_reject_code_not_on_the_reason_text") {
  // The reason is for people: a refused job, an unknown job and a deferred shutdown are told by
  // their code whatever the text says.
  SessionPolicy refused(SessionRules{.submits = true}, t0);
  refused.on_reject(proto::make_reject(proto::RejectCode::JobRefused, "output in use"), t0);
  CHECK(refused.end() == SessionEnd::Rejected);
  CHECK(refused.exit_code() == 2);
  SessionPolicy p = submitted();
  CHECK(p.reject_ends(proto::make_reject(proto::RejectCode::UnknownJob, "no such job")));
  CHECK_FALSE(p.reject_ends(proto::make_reject(proto::RejectCode::JobNotRunning, "Attach: x")));
}

// ---- the end and the exit code ----

TEST_CASE("client.session.the_exit_code_follows_the_jobs_end") {
  for (auto [state, code] : {std::pair{"succeeded", 0}, {"failed", 1}, {"cancelled", 1}}) {
    CAPTURE(state);
    SessionPolicy p = submitted();
    CHECK(p.on_ended(ended(state)));
    CHECK(p.end() == SessionEnd::Ended);
    CHECK_FALSE(p.keep_going());
    CHECK(p.exit_code() == code);
  }
}

TEST_CASE("client.session.the_jobs_end_stands_over_anything_seen_before_it") {
  SessionPolicy p = submitted();
  p.child_died("the interchange exited");
  CHECK(p.end() == SessionEnd::ChildDied);
  CHECK(p.exit_code() == 3);
  CHECK(p.on_ended(ended("succeeded")));
  CHECK(p.end() == SessionEnd::Ended);
  CHECK(p.exit_code() == 0);
}

TEST_CASE("client.session.the_first_reason_to_stop_stands") {
  SessionPolicy p = submitted();
  p.child_died("every pool exited");
  p.on_reject(proto::Reject{"Attach: job 7 is not known here"}, t0);
  p.fail("listing failed");
  CHECK(p.end() == SessionEnd::ChildDied);
  CHECK(p.detail() == "every pool exited");
}

TEST_CASE("client.session.without_an_end_the_exit_code_is_3") {
  SessionPolicy p = submitted();
  SUBCASE("not accepted") { p.not_accepted(); }
  SUBCASE("a child died") { p.child_died("x"); }
  SUBCASE("the input could not be listed") { p.fail("x"); }
  CHECK_FALSE(p.keep_going());
  CHECK(p.exit_code() == 3);
}

// ---- interrupts ----

TEST_CASE("client.session.the_first_interrupt_cancels_the_job_the_second_leaves_it_running") {
  SessionPolicy p = submitted();
  using I = SessionPolicy::Interrupt;
  CHECK(p.on_interrupts(0) == I::None);
  CHECK(p.on_interrupts(1) == I::Cancel);
  CHECK(p.cancel_reason() == "cancelled by the user (signal)");
  CHECK(p.on_interrupts(1) == I::None);  // once
  CHECK(p.keep_going());
  CHECK(p.on_interrupts(2) == I::Leave);
  CHECK(p.end() == SessionEnd::LeftRunning);
  CHECK(p.exit_code() == 3);
}

TEST_CASE("client.session.an_interrupt_before_the_job_has_an_id_cancels_nothing") {
  SessionPolicy p(SessionRules{}, t0);
  CHECK(p.on_interrupts(1) == SessionPolicy::Interrupt::None);
  CHECK(p.cancel_reason().empty());
}

TEST_CASE("client.session.a_cancel_asked_for_is_repeated_with_each_probe") {
  SessionPolicy p = following();
  p.request_cancel("cancelled by fanout cancel");
  CHECK(p.cancel_reason() == "cancelled by fanout cancel");
  CHECK(p.probe_due(t0 + kProbeAfter));
  CHECK(p.cancel_reason() == "cancelled by fanout cancel");  // Session sends CancelJob first
}

TEST_CASE("client.session.an_end_found_in_the_store_ends_the_session_like_job_ended") {
  for (auto [state, code] : {std::pair{"succeeded", 0}, {"cancelled", 1}}) {
    CAPTURE(state);
    SessionPolicy p = following(seconds(60));
    p.ended_in_store(ended(state));
    CHECK(p.end() == SessionEnd::EndedInStore);
    CHECK_FALSE(p.keep_going());
    CHECK(p.exit_code() == code);
    CHECK_FALSE(p.give_up_if_silent(t0 + seconds(120)));  // over: nothing more to decide
  }
}

TEST_CASE("wait, cancel and resume: an interrupt ends the session and cancels nothing") {
  SessionPolicy p(SessionRules{.submits = false, .interrupt_cancels = false}, t0);
  p.follow(7);
  CHECK(p.on_interrupts(0) == SessionPolicy::Interrupt::None);
  CHECK(p.on_interrupts(1) == SessionPolicy::Interrupt::Leave);
  CHECK(p.end() == SessionEnd::LeftRunning);
  CHECK(p.cancel_reason().empty());
  CHECK(p.exit_code() == 3);
  CHECK(p.on_interrupts(2) == SessionPolicy::Interrupt::None);
}

TEST_CASE("a dead interchange ends a followed session with its description") {
  auto p = following();
  p.interchange_gone("the interchange (pid 9 on h) is not running");
  CHECK(p.end() == SessionEnd::InterchangeGone);
  CHECK(p.detail() == "the interchange (pid 9 on h) is not running");
  CHECK(p.exit_code() == 3);
}

TEST_CASE("resume finishes a cut submission from the count the interchange has") {
  auto p = following();
  proto::JobProgress m;
  m.job_id = 7;
  m.submitted = 40;  // total 0: the submission is open
  (void)p.on_progress(m);
  p.resume_submission(40, 20);
  CHECK(p.submitted() == 40);
  CHECK(p.credit() == 0);  // 40 submitted, none finished, window 20: full
  m.succeeded = 30;
  (void)p.on_progress(m);
  CHECK(p.credit() == 10);
  p.sent_tasks(10);
  CHECK(p.credit() == 0);
}

TEST_CASE("client.session.exit_status_of_each_job_state") {
  using fanout::client::exit_status;
  CHECK(exit_status("succeeded", false) == 0);
  CHECK(exit_status("partial", false) == fanout::client::kExitPartial);  // not plainly success
  CHECK(fanout::client::kExitPartial == 4);
  CHECK(exit_status("partial", true) == 0);  // --allow-partial: ParallelRunStep's exit 0
  CHECK(exit_status("failed", true) == 1);
  CHECK(exit_status("cancelled", false) == 1);
  CHECK(exit_status("running", false) == 1);
  CHECK(exit_status("bogus", false) == 1);
}

// ---- a run that attached to the store's owner just as it went away ----

TEST_CASE("client.session.an_owner_gone_before_accepting_the_job_is_attached_again") {
  using fanout::client::attach_again;
  using fanout::client::AttachOutcome;
  using fanout::client::kAttachTries;
  const AttachOutcome gone{.guest = true, .owner_gone = true};
  SessionPolicy p(SessionRules{.submits = true}, t0);
  SUBCASE("the owner is seen gone") { p.child_died("the interchange that owned the store exited"); }
  SUBCASE("no answer from it") { p.not_accepted(); }
  CHECK(attach_again(p, gone));
  CHECK(attach_again(p, AttachOutcome{.guest = true, .owner_gone = true, .tries = 2}));
  // Bounded: the last try's failure is the run's.
  CHECK_FALSE(
      attach_again(p, AttachOutcome{.guest = true, .owner_gone = true, .tries = kAttachTries}));
  // The owner recorded the job before it went: starting over would run it twice.
  CHECK_FALSE(
      attach_again(p, AttachOutcome{.guest = true, .owner_gone = true, .job_in_store = true}));
  // This run's own private interchange died, or the owner still holds the store.
  CHECK_FALSE(attach_again(p, AttachOutcome{.guest = false, .owner_gone = true}));
  CHECK_FALSE(attach_again(p, AttachOutcome{.guest = true, .owner_gone = false}));
}

TEST_CASE("client.session.an_accepted_or_refused_job_is_never_attached_again") {
  using fanout::client::attach_again;
  using fanout::client::AttachOutcome;
  const AttachOutcome gone{.guest = true, .owner_gone = true};
  SessionPolicy accepted = submitted();
  accepted.child_died("the interchange that owned the store exited");
  CHECK_FALSE(attach_again(accepted, gone));
  SessionPolicy refused(SessionRules{.submits = true}, t0);
  refused.on_reject(proto::Reject{"SubmitJob: output_path: in use"}, t0);
  CHECK_FALSE(attach_again(refused, gone));
  SessionPolicy failed(SessionRules{.submits = true}, t0);
  failed.fail("the input could not be listed");
  CHECK_FALSE(attach_again(failed, gone));
}
