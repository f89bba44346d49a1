// fanout wait, cancel and resume. See follow.hpp.
#include "client/commands/follow.hpp"

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "client/commands/client.hpp"
#include "client/input/input_drift.hpp"
#include "client/input/inputs.hpp"
#include "client/launch/embedded.hpp"
#include "client/launch/recorded_jobs.hpp"
#include "client/launch/run_settings.hpp"
#include "client/launch/slurm_launcher.hpp"
#include "client/output/job_outputs.hpp"
#include "client/session/end_summary.hpp"
#include "client/session/liveness.hpp"
#include "client/session/progress.hpp"
#include "client/session/session.hpp"
#include "client/session/submission.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/protocol/job_state.hpp"
#include "fanout/protocol/ready_file.hpp"
#include "fanout/report/html_report.hpp"
#include "fanout/report/job_report.hpp"
#include "fanout/report/report_data.hpp"
#include "fanout/store/job_settings.hpp"
#include "fanout/store/job_status.hpp"
#include "fanout/store/offline_cancel.hpp"
#include "fanout/store/owner_lock.hpp"
#include "fanout/store/reader.hpp"
#include "fanout/store/submitted_inputs.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

// How long `wait` keeps trying an interchange that does not answer before it gives up.
constexpr auto kNoAnswerLimit = std::chrono::seconds(60);

// Ctrl-C and SIGTERM: the session ends, and `resume` stops its private interchange and pools
// (they are in their own process groups, so nothing else would).
std::atomic<int> g_interrupts{0};
void on_interrupt(int) { g_interrupts.fetch_add(1, std::memory_order_relaxed); }
void catch_interrupts() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

std::string run_dir_of(const std::string& log_dir) {
  return log_dir.empty() ? std::string() : fs::path(log_dir).parent_path().string();
}

// Printed when the job's interchange is known dead and the job did not end.
void print_gone(std::uint64_t job_id, const std::string& what, const std::string& db) {
  std::fprintf(stderr,
               "error: job %llu: %s; the job is unfinished: finish it with: fanout resume %llu "
               "--db %s\n",
               static_cast<unsigned long long>(job_id), what.c_str(),
               static_cast<unsigned long long>(job_id), db.c_str());
}

// True when the store holds the job in a state it never leaves.
bool is_ended(const std::string& state) {
  auto st = proto::parse_job_state(state);
  return st && proto::is_ended(*st);
}

std::optional<store::JobSummary> job_in_store(const std::string& db, std::uint64_t job_id,
                                              std::string& error) {
  try {
    store::StoreReader reader(db);
    auto j = reader.job(job_id);
    if (!j) error = fmt::format("{}: no job {}", db, job_id);
    return j;
  } catch (const Failure& f) {
    error = f.what();
    return std::nullopt;
  }
}

// The end of a job the store holds as ended, as JobEnded would have told it.
proto::JobEnded ended_from_store(const store::JobSummary& j) {
  proto::JobEnded e;
  e.job_id = j.id;
  e.state = j.state;
  e.reason = j.reason;
  e.progress.job_id = j.id;
  e.progress.total = j.total;
  e.progress.submitted = j.total;
  e.progress.succeeded = j.succeeded;
  e.progress.failed = j.failed;
  e.progress.items_succeeded = j.items_succeeded;
  e.progress.items_failed = j.items_failed;
  e.progress.attempts_failed = j.attempts_failed;
  return e;
}

// The output the summary names (summary_output), from the job's row and settings in the store.
// Settings that cannot be read leave the append_row file alone, as before they were recorded.
std::string output_in_store(const std::string& db, const store::JobSummary& j) {
  store::JobSettings recorded;
  try {
    if (auto s = store::read_job_settings(db, j.id)) recorded = *s;
  } catch (const Failure&) {
  }
  return summary_output(j.output_path, recorded);
}

int report_from_store(const store::JobSummary& j, const std::string& db, bool allow_partial) {
  return report_ended(ended_from_store(j), output_in_store(db, j), j.log_dir, db, allow_partial);
}

// `cancel`'s exit status once the job ended: 0 if it ended cancelled by this command.
int cancel_status(const proto::JobEnded& ended) {
  return proto::parse_job_state(ended.state) == proto::JobState::Cancelled
             ? proto::kExitOk
             : proto::kExitNotCancelled;
}

// The client endpoint recorded in the job's run folder (the parent of its logs/ folder).
std::string endpoint_from_run_dir(const std::string& log_dir) {
  if (log_dir.empty()) return {};
  const std::string ready = fs::path(log_dir).parent_path().string() + "/interchange.ready";
  auto text = read_file(ready);
  if (!text) return {};
  auto r = proto::parse_ready(*text, ready);
  return r ? r->client : std::string();
}

// Prints how a followed job's session ended and returns the exit code.
int report_session(const Session& session, ProgressPrinter& printer, const std::string& endpoint,
                   const FollowOptions& opts, const std::optional<store::JobSummary>& in_store,
                   const std::string& output_path, const std::string& log_dir, const Logger& log) {
  const SessionPolicy& state = session.policy();
  const std::uint64_t job_id = state.job_id();
  switch (state.end()) {
    case SessionEnd::Ended: {
      printer.update(state.ended()->progress, true);
      printer.finish();
      log->debug("job {} ended: {}", job_id, state.ended()->state);
      const int rc =
          report_ended(*state.ended(), output_path, log_dir, opts.db, opts.allow_partial);
      return opts.cancel ? cancel_status(*state.ended()) : rc;
    }
    case SessionEnd::EndedInStore: {
      printer.finish();
      write_missing_reports(opts.db, job_id, in_store->log_dir);
      const int rc = report_ended(*state.ended(), output_in_store(opts.db, *in_store),
                                  in_store->log_dir, opts.db, opts.allow_partial);
      // Ended before this cancel reached it (a cancelled state there is someone else's).
      return opts.cancel ? proto::kExitNotCancelled : rc;
    }
    case SessionEnd::Rejected:
      printer.finish();
      std::fprintf(stderr, "error: interchange at %s: %s\n", endpoint.c_str(),
                   state.detail().c_str());
      return state.exit_code();
    case SessionEnd::InterchangeGone:
      printer.finish();
      print_gone(job_id, state.detail(), opts.db);
      return state.exit_code();
    case SessionEnd::LeftRunning:
      printer.finish();
      if (opts.resumed) {
        std::fprintf(stderr,
                     "fanout: interrupted; stopping the private interchange and pools. Job %llu is "
                     "unfinished: continue it with: fanout resume %llu --db %s\n",
                     static_cast<unsigned long long>(job_id),
                     static_cast<unsigned long long>(job_id), opts.db.c_str());
      } else {
        std::fprintf(stderr,
                     "fanout: interrupted; job %llu goes on without this client: follow it with: "
                     "fanout wait %llu --db %s\n",
                     static_cast<unsigned long long>(job_id),
                     static_cast<unsigned long long>(job_id), opts.db.c_str());
      }
      return state.exit_code();
    case SessionEnd::NoAnswer:
      printer.finish();
      std::fprintf(stderr,
                   "error: no answer from the interchange at %s for %lld s; if it is gone, "
                   "resume the job with: fanout resume %llu --db %s\n",
                   endpoint.c_str(), static_cast<long long>(kNoAnswerLimit.count()),
                   static_cast<unsigned long long>(job_id), opts.db.c_str());
      return state.exit_code();
    default:
      printer.finish();
      std::fprintf(stderr, "error: %s\n", state.detail().c_str());
      if (opts.resumed && state.end() == SessionEnd::ChildDied) {
        // The interchange it resumed on died (the store's owner it attached to was exiting, or
        // its own): the job is unfinished in the store, and a new resume takes it from there.
        std::fprintf(
            stderr,
            "fanout: job %llu is unfinished: continue it with: fanout resume %llu%s --db %s\n",
            static_cast<unsigned long long>(job_id), static_cast<unsigned long long>(job_id),
            opts.reopen ? " --failed" : "", opts.db.c_str());
      }
      return state.exit_code();
  }
}

// The rest of a submission cut short: what `fanout resume` sends from the job file.
struct Unsubmitted {
  config::JobConfig cfg;
  std::uint32_t window = 0;
};

// The window of resume's private interchange when the job recorded none: at most its default.
constexpr std::uint32_t kResumeWindow = 1000;

// nullopt when the job's submission ended; else its job file, loaded and checked as `fanout run`
// did (with the recorded interpreter), or an error saying why the rest cannot be submitted.
Expected<std::optional<Unsubmitted>> unsubmitted(const std::string& db, std::uint64_t job_id,
                                                 const RunSettings& rs,
                                                 const store::JobSettings& recorded) {
  auto data = report::read_report_data(db, job_id);
  if (!data) return Unexpected{data.error()};
  if (data->total_known) return std::optional<Unsubmitted>{};
  const auto why = fmt::format(
      "job {}: its client stopped before submitting every mini-batch, and resume lists the rest "
      "from its job file",
      job_id);
  if (data->spec_path.empty()) {
    return make_error(ErrorCode::InvalidArgument, why + ", which the store does not name");
  }
  auto cfg = config::load_job(data->spec_path);
  if (!cfg) return make_error(ErrorCode::InvalidArgument, why + ": " + cfg.error().message);
  RunOverrides ov;
  ov.python = !rs.python.empty() ? rs.python : recorded.python;
  if (auto r = prepare(*cfg, ov); !r) {
    return make_error(ErrorCode::InvalidArgument, why + ": " + r.error().message);
  }
  return std::optional<Unsubmitted>{Unsubmitted{
      std::move(*cfg), rs.window > 0 ? std::min(rs.window, kResumeWindow) : kResumeWindow}};
}

// Lists the job's input again and compares it with what the store says was submitted. Returns
// 0 to go on (nothing changed, or `accept` and the change recorded in the store), 2 when the
// resume is refused; prints what changed. A job file that cannot be read (gone, or an ad hoc
// job's) cannot be compared: a warning, and the resume goes on.
int check_input_unchanged(const std::string& db, std::uint64_t job_id,
                          const store::JobSettings& recorded, const std::string& python,
                          bool complete, bool accept, const std::string& run_dir) {
  std::string spec_path;
  try {
    if (auto data = report::read_report_data(db, job_id)) spec_path = data->spec_path;
  } catch (const Failure&) {
  }
  auto cfg = spec_path.empty() ? Expected<config::JobConfig>(
                                     make_error(ErrorCode::NotFound, "the store names no job file"))
                               : config::load_job(spec_path);
  RunOverrides ov;
  ov.python = !python.empty() ? python : recorded.python;
  Expected<InputDrift> drift = cfg ? Expected<InputDrift>(InputDrift{}) : Unexpected{cfg.error()};
  if (cfg) {
    if (auto r = prepare(*cfg, ov); !r) drift = Unexpected{r.error()};
  }
  if (drift) {
    try {
      drift = compare_input(*cfg, store::read_submitted_inputs(db, job_id), complete,
                            own_paths(db, run_dir));
    } catch (const Failure& f) {
      drift = Unexpected{f.error()};
    }
  }
  if (!drift) {
    std::fprintf(stderr, "warning: job %llu: cannot check that its input is unchanged: %s\n",
                 static_cast<unsigned long long>(job_id), drift.error().message.c_str());
    return 0;
  }
  if (!drift->any()) return 0;
  const std::string what = drift->describe();
  if (!accept) {
    std::fprintf(stderr,
                 "error: job %llu: its input changed since it was submitted (%s): %s; resume "
                 "would skip or run what the job never listed. Run it as a new job, or resume "
                 "with --accept-changed-input to go on with what was submitted (recorded in the "
                 "store)\n",
                 static_cast<unsigned long long>(job_id), spec_path.c_str(), what.c_str());
    return proto::kExitUsage;
  }
  std::fprintf(stderr,
               "warning: job %llu: its input changed since it was submitted: %s; resuming anyway "
               "(--accept-changed-input), recorded in jobs.settings input_changed_on_resume\n",
               static_cast<unsigned long long>(job_id), what.c_str());
  try {
    store::record_input_change(db, job_id, what);
  } catch (const Failure& f) {
    std::fprintf(stderr, "error: %s\n", f.what());
    return proto::kExitUsage;
  }
  return 0;
}

// Waits for the interchange's first word on the job, then, when its submission is still open,
// lists the job file's input again and sends the mini-batches the store does not have, then
// SubmitEnd (again from the count known after an interchange restart).
void finish_submission(Session& session, const Unsubmitted& rest, std::uint64_t job_id, bool quiet,
                       const std::vector<std::string>& own) {
  SessionPolicy& policy = session.policy();
  while (policy.keep_going() && policy.progress().job_id != job_id) {
    session.pump(std::chrono::milliseconds(50));
  }
  if (!policy.keep_going() || policy.progress().total != 0) return;
  std::uint64_t from = policy.progress().submitted;
  if (!quiet) {
    std::fprintf(stderr,
                 "fanout: job %llu: its submission stopped after %llu mini-batches; submitting "
                 "the rest from %s\n",
                 static_cast<unsigned long long>(job_id), static_cast<unsigned long long>(from),
                 rest.cfg.spec_path.c_str());
  }
  policy.resume_submission(from, rest.window);
  while (policy.keep_going()) {
    auto listed = submit_input(rest.cfg, session, from, own);
    if (auto again = policy.take_resubmit()) {
      from = *again;
      continue;
    }
    if (!listed) {
      session.cancel(listed.error().message);
      policy.fail(listed.error().message);
      return;
    }
    if (policy.keep_going()) session.send_end();
    return;
  }
}

// Attaches to (or cancels) job_id at `endpoint` and follows it to its end, reattaching when the
// interchange restarts. `emb`, when set, is the private interchange of `fanout resume`.
// `rest`, when set, is what resume submits first (finish_submission).
int follow_on(const std::string& endpoint, std::uint64_t job_id, const FollowOptions& opts,
              Embedded* emb, const Logger& log, const Unsubmitted* rest = nullptr) {
  ProgressPrinter printer(opts.quiet ? ProgressMode::Quiet : ProgressMode::Human);
  std::optional<store::JobSummary> in_store;  // the job as the store holds it once ended
  std::string output_path, log_dir, store_error;
  if (auto j = job_in_store(opts.db, job_id, store_error)) {
    output_path = output_in_store(opts.db, *j);
    log_dir = j->log_dir;
    // Elapsed time and rate count from the job's start, not from now.
    printer.job_started(j->created);
  }
  const std::string run_dir = run_dir_of(log_dir);
  std::optional<Session> connected;
  catch_interrupts();
  try {
    connected.emplace(endpoint,
                      Session::Options{.rules = SessionRules{.submits = false,
                                                             .give_up_after = kNoAnswerLimit,
                                                             .interrupt_cancels = false,
                                                             .allow_partial = opts.allow_partial},
                                       .embedded = emb,
                                       .security = opts.security,
                                       .printer = &printer,
                                       .interrupts = &g_interrupts,
                                       .ended_in_store = [&]() -> std::optional<proto::JobEnded> {
                                         std::string err;
                                         auto j = job_in_store(opts.db, job_id, err);
                                         if (!j || !is_ended(j->state)) return std::nullopt;
                                         in_store = std::move(j);
                                         return ended_from_store(*in_store);
                                       },
                                       // resume's own interchange is watched as its child instead.
                                       .interchange_gone = [&]() -> std::string {
                                         if (emb != nullptr || run_dir.empty()) return {};
                                         return interchange_liveness_in(run_dir).describe();
                                       }},
                      log);
  } catch (const Failure& f) {  // a key missing or open to others, --insecure off loopback
    std::fprintf(stderr, "error: %s\n", f.what());
    return proto::kExitInfra;
  }
  Session& session = *connected;
  // The owner reopens the job before the Attach that follows finds it (frames arrive in order).
  if (opts.reopen) session.reopen(job_id);
  session.attach(job_id, !opts.cancel          ? std::string()
                         : opts.reason.empty() ? std::string("cancelled by fanout cancel")
                                               : opts.reason);
  if (rest != nullptr) {
    finish_submission(session, *rest, job_id, opts.quiet, own_paths(opts.db, run_dir));
  }
  session.follow();
  const int rc =
      report_session(session, printer, endpoint, opts, in_store, output_path, log_dir, log);
  if (emb != nullptr) {
    // Other jobs the private interchange resumed stay unfinished in the store for a later resume.
    if (!emb->guest() && session.shutdown("fanout resume done", emb->shutdown_token())) {
      emb->detach();
    } else {
      emb->stop();
    }
  }
  return rc;
}

}  // namespace

void write_missing_reports(const std::string& db, std::uint64_t job_id,
                           const std::string& log_dir) {
  if (log_dir.empty() || fs::exists(log_dir + "/report.html")) return;
  (void)remove_stale_temporaries(log_dir);
  auto r = report::write_job_report(db, job_id, log_dir);
  if (r) {
    if (auto h = report::write_job_html(db, job_id, log_dir + "/report.html"); !h) {
      r = Unexpected{h.error()};
    }
  }
  if (!r) {
    std::fprintf(stderr,
                 "fanout: job %llu: the reports could not be written into %s: %s; write them "
                 "once there is room with: fanout report %llu --db %s\n",
                 static_cast<unsigned long long>(job_id), log_dir.c_str(),
                 r.error().message.c_str(), static_cast<unsigned long long>(job_id), db.c_str());
  }
}

std::optional<proto::JobEnded> job_ended_in_store(const std::string& db, std::uint64_t job_id) {
  if (job_id == 0) return std::nullopt;
  std::string err;
  auto j = job_in_store(db, job_id, err);
  if (!j || !is_ended(j->state)) return std::nullopt;
  return ended_from_store(*j);
}

void write_job_pointer(const std::string& run_dir, const std::string& endpoint,
                       std::uint64_t job_id) {
  const std::string path = run_dir + "/interchange.ready";
  if (fs::exists(path)) return;
  // Through AtomicFile: a link planted at a fixed temporary name is never written through.
  (void)write_file_atomic(path,
                          proto::format_ready(proto::ReadyFile{.client = endpoint, .job = job_id}));
}

int report_ended(const proto::JobEnded& ended, const std::string& output_path,
                 const std::string& log_dir, const std::string& db, bool allow_partial) {
  const auto& p = ended.progress;
  std::fputs(end_summary(ended).c_str(), stderr);
  if (p.attempts_failed > 0 && ended.state != "succeeded" && !db.empty() && fs::exists(db)) {
    if (auto st = store::read_job_status(db, ended.job_id); st && st->first_error) {
      const auto& e = *st->first_error;
      std::fprintf(
          stderr, "  first error: mini-batch %llu try %llu on %s: %s: %s\n",
          static_cast<unsigned long long>(e.minibatch), static_cast<unsigned long long>(e.attempt),
          e.process.empty() ? "-" : e.process.c_str(), e.status.c_str(), e.message.c_str());
      for (const auto& line : e.tail) std::fprintf(stderr, "    %s\n", line.c_str());
    }
  }
  if (!output_path.empty()) std::fprintf(stderr, "  output: %s\n", output_path.c_str());
  if (!log_dir.empty()) std::fprintf(stderr, "  logs: %s\n", log_dir.c_str());
  // The last line says how to go on: what failed or never ran is run again by resume --failed.
  if (ended.state == "failed" || ended.state == "partial" || ended.state == "cancelled") {
    std::fprintf(stderr, "fanout: continue with: fanout resume %llu --failed%s%s\n",
                 static_cast<unsigned long long>(ended.job_id), db.empty() ? "" : " --db ",
                 db.c_str());
  }
  return exit_status(ended.state, allow_partial);
}

namespace {

// `fanout cancel`: the pool jobs of a scheduler launcher (docs/cluster.md) go too, even when no
// client is left to release them.
void release_recorded_pool_jobs(const std::string& log_dir, bool quiet) {
  const std::string run_dir = fs::path(log_dir).parent_path().string();
  if (auto ids = release_pool_jobs(run_dir); !ids.empty() && !quiet) {
    std::fprintf(stderr, "fanout: cancelled %s\n", ids.c_str());
  }
}

}  // namespace

int follow_job(std::uint64_t job_id, const FollowOptions& opts, Logger log) {
  std::string error;
  auto job = job_in_store(opts.db, job_id, error);
  if (job && is_ended(job->state)) {
    write_missing_reports(opts.db, job_id, job->log_dir);
    const int rc = report_from_store(*job, opts.db, opts.allow_partial);
    if (!opts.cancel) return rc;
    std::fprintf(stderr, "fanout: job %llu had already ended; nothing cancelled\n",
                 static_cast<unsigned long long>(job_id));
    return kExitFailed;
  }
  // An owner file that cannot be trusted is no proof that none runs: then the cancel goes the
  // usual way, and the error of the interchange's session says why.
  const auto unowned = [&] {
    const auto owner = store::find_owner(opts.db);
    return owner && !owner->has_value();
  };
  if (opts.cancel && job && opts.interchange.empty() && unowned()) {
    // No interchange owns the store (none runs, or one cannot start on it): none would answer,
    // so the job is cancelled in the store itself.
    auto r = store::cancel_unowned(
        opts.db, job_id,
        (opts.reason.empty() ? std::string("cancelled by fanout cancel") : opts.reason) +
            " (no interchange owned the store)");
    if (r && *r) {
      std::fprintf(stderr, "fanout: job %llu cancelled in the store %s (no interchange runs)\n",
                   static_cast<unsigned long long>(job_id), opts.db.c_str());
      release_recorded_pool_jobs(job->log_dir, opts.quiet);
      if (auto now = job_in_store(opts.db, job_id, error)) {
        write_missing_reports(opts.db, job_id, now->log_dir);
        (void)report_from_store(*now, opts.db, opts.allow_partial);
      }
      return 0;
    }
    if (r) {
      std::fprintf(stderr, "fanout: job %llu had already ended; nothing cancelled\n",
                   static_cast<unsigned long long>(job_id));
      return kExitFailed;
    }
    if (r.error().code != ErrorCode::State) {
      std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
      return proto::kExitInfra;
    }
    // An interchange took the store meanwhile: the cancel goes through it, below.
  }
  if (job && opts.interchange.empty()) {
    // On the interchange's host a dead one is known at once: nothing would ever answer.
    if (auto l = interchange_liveness_in(run_dir_of(job->log_dir));
        l.state == InterchangeLiveness::State::Dead) {
      print_gone(job_id, l.describe(), opts.db);
      return proto::kExitInfra;
    }
  }
  std::string endpoint = opts.interchange;
  if (endpoint.empty()) {
    if (!job) {
      std::fprintf(stderr, "error: %s\n", error.c_str());
      return proto::kExitUsage;
    }
    endpoint = endpoint_from_run_dir(job->log_dir);
    if (endpoint.empty()) {
      std::fprintf(stderr,
                   "error: job %llu: no interchange.ready beside %s; pass --interchange, or "
                   "resume the job with: fanout resume %llu --db %s\n",
                   static_cast<unsigned long long>(job_id), job->log_dir.c_str(),
                   static_cast<unsigned long long>(job_id), opts.db.c_str());
      return proto::kExitInfra;
    }
  }
  const int rc = follow_on(endpoint, job_id, opts, nullptr, log);
  if (opts.cancel && job) release_recorded_pool_jobs(job->log_dir, opts.quiet);
  return rc;
}

int resume_job(std::uint64_t job_id, const ResumeOptions& opts, Logger log) {
  std::string error;
  auto job = job_in_store(opts.db, job_id, error);
  if (!job) {
    std::fprintf(stderr, "error: %s\n", error.c_str());
    return proto::kExitUsage;
  }
  // A succeeded job has nothing that failed or never ran.
  if (is_ended(job->state) && (!opts.failed || job->state == "succeeded")) {
    const bool hint = job->state != "succeeded";  // --failed would re-run what failed
    std::fprintf(stderr, "fanout: job %llu already ended %s; nothing to resume%s\n",
                 static_cast<unsigned long long>(job_id), job->state.c_str(),
                 hint ? " (--failed re-runs its failed mini-batches)" : "");
    return report_from_store(*job, opts.db, opts.allow_partial);
  }
  // The settings the job was submitted with say how to run its pools.
  store::JobSettings recorded;
  try {
    if (auto s = store::read_job_settings(opts.db, job_id)) recorded = *s;
  } catch (const Failure& f) {
    if (f.error().code != ErrorCode::InvalidArgument) {
      std::fprintf(stderr, "error: %s\n", f.what());
      return proto::kExitUsage;
    }
    log->warn("{}; resuming with the default settings", f.what());
  }
  RunSettings rs = resumed_settings(recorded, opts.workers, opts.pools, opts.python);
  if (opts.failed) rs.reopen_failed = job_id;
  // A client killed while submitting left the job without all its mini-batches: the job file
  // gives them again (its listing is deterministic), or the job cannot finish.
  std::optional<Unsubmitted> rest;
  if (auto cut = unsubmitted(opts.db, job_id, rs, recorded); !cut) {
    std::fprintf(stderr, "error: %s\n", cut.error().message.c_str());
    return proto::kExitUsage;
  } else if (*cut) {
    rest.emplace(std::move(**cut));
  }
  // Resuming over an input that changed since the job was submitted would skip the files added
  // and fail (or run stale ranges of) the ones changed, with nothing said: refused unless asked.
  const std::string run_dir = fs::path(job->log_dir).parent_path().string();
  if (int rc = check_input_unchanged(opts.db, job_id, recorded, rs.python, !rest.has_value(),
                                     opts.accept_changed_input, run_dir);
      rc != 0) {
    return rc;
  }
  if (!opts.quiet) {
    std::fprintf(stderr, "fanout: resuming job %llu (%s) on %s, %u pool(s) x %u workers\n",
                 static_cast<unsigned long long>(job_id), job->name.c_str(), opts.db.c_str(),
                 rs.pools, rs.workers);
  }
  std::optional<Embedded> emb;
  catch_interrupts();  // from here on, a signal stops the children started below
  try {
    emb.emplace(rs, opts.db, run_dir, log);
  } catch (const Failure& f) {
    std::fprintf(stderr, "error: %s\n", f.what());
    return proto::kExitInfra;
  }
  if (emb->guest() && opts.failed) {
    // The store's owner (a shared interchange, another run) did not start with --reopen-failed:
    // it is asked to do the same now, and the job is followed there.
    std::fprintf(stderr,
                 "fanout: asking the running interchange pid %d on %s to reopen job %llu's "
                 "failed mini-batches; following it there\n",
                 static_cast<int>(emb->owner_pid()), opts.db.c_str(),
                 static_cast<unsigned long long>(job_id));
  } else if (emb->guest()) {
    // Another `fanout resume` (or run) on this store started its owner first, which resumed
    // every unfinished job at its start: this one follows the job there, with its pools.
    std::fprintf(stderr,
                 "fanout: job %llu is being resumed by the running interchange pid %d on %s; "
                 "following it there\n",
                 static_cast<unsigned long long>(job_id), static_cast<int>(emb->owner_pid()),
                 opts.db.c_str());
  }
  FollowOptions fo;
  fo.reopen = emb->guest() && opts.failed;
  fo.db = opts.db;
  fo.quiet = opts.quiet;
  fo.resumed = true;
  fo.allow_partial = opts.allow_partial;
  return follow_on(emb->client_endpoint(), job_id, fo, &*emb, log, rest ? &*rest : nullptr);
}

}  // namespace fanout::client
