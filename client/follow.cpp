// fanout wait, cancel and resume. See follow.hpp.
#include "client/follow.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "client/embedded.hpp"
#include "client/progress.hpp"
#include "client/run_settings.hpp"
#include "client/session.hpp"
#include "fanout/protocol/job_state.hpp"
#include "fanout/store/job_settings.hpp"
#include "fanout/store/job_status.hpp"
#include "fanout/store/reader.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

// How long `wait` keeps trying an interchange that does not answer before it gives up.
constexpr auto kNoAnswerLimit = std::chrono::seconds(60);

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

int report_from_store(const store::JobSummary& j, const std::string& db, bool allow_partial) {
  return report_ended(ended_from_store(j), j.output_path, j.log_dir, db, allow_partial);
}

// `cancel`'s exit status once the job ended: 0 if it ended cancelled by this command.
int cancel_status(const proto::JobEnded& ended) {
  return proto::parse_job_state(ended.state) == proto::JobState::Cancelled ? 0 : kExitFailed;
}

// The client endpoint recorded in the job's run folder (the parent of its logs/ folder).
std::string endpoint_from_run_dir(const std::string& log_dir) {
  if (log_dir.empty()) return {};
  const std::string ready = fs::path(log_dir).parent_path().string() + "/interchange.ready";
  auto text = read_file(ready);
  return text ? ready_value(*text, "client") : std::string();
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
      const int rc = report_ended(*state.ended(), in_store->output_path, in_store->log_dir, opts.db,
                                  opts.allow_partial);
      // Ended before this cancel reached it (a cancelled state there is someone else's).
      return opts.cancel ? kExitFailed : rc;
    }
    case SessionEnd::Rejected:
      printer.finish();
      std::fprintf(stderr, "error: interchange at %s: %s\n", endpoint.c_str(),
                   state.detail().c_str());
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
      return state.exit_code();
  }
}

// Attaches to (or cancels) job_id at `endpoint` and follows it to its end, reattaching when the
// interchange restarts. `emb`, when set, is the private interchange of `fanout resume`.
int follow_on(const std::string& endpoint, std::uint64_t job_id, const FollowOptions& opts,
              Embedded* emb, const Logger& log) {
  ProgressPrinter printer(opts.quiet ? ProgressMode::Quiet : ProgressMode::Human);
  std::optional<store::JobSummary> in_store;  // the job as the store holds it once ended
  std::optional<Session> connected;
  try {
    connected.emplace(endpoint,
                      Session::Options{.rules = SessionRules{.submits = false,
                                                             .give_up_after = kNoAnswerLimit,
                                                             .allow_partial = opts.allow_partial},
                                       .embedded = emb,
                                       .security = opts.security,
                                       .printer = &printer,
                                       .ended_in_store = [&]() -> std::optional<proto::JobEnded> {
                                         std::string err;
                                         auto j = job_in_store(opts.db, job_id, err);
                                         if (!j || !is_ended(j->state)) return std::nullopt;
                                         in_store = std::move(j);
                                         return ended_from_store(*in_store);
                                       }},
                      log);
  } catch (const Failure& f) {  // a key missing or open to others, --insecure off loopback
    std::fprintf(stderr, "error: %s\n", f.what());
    return 3;
  }
  Session& session = *connected;
  session.attach(job_id, opts.cancel ? "cancelled by fanout cancel" : "");
  std::string output_path, log_dir, store_error;
  if (auto j = job_in_store(opts.db, job_id, store_error)) {
    output_path = j->output_path;
    log_dir = j->log_dir;
  }
  session.follow();
  const int rc =
      report_session(session, printer, endpoint, opts, in_store, output_path, log_dir, log);
  if (emb != nullptr) {
    // Other jobs the private interchange resumed stay unfinished in the store for a later resume.
    session.shutdown("fanout resume done", emb->shutdown_token());
    emb->stop();
  }
  return rc;
}

}  // namespace

void write_job_pointer(const std::string& run_dir, const std::string& endpoint,
                       std::uint64_t job_id) {
  const std::string path = run_dir + "/interchange.ready";
  if (fs::exists(path)) return;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "client=" << endpoint << "\njob=" << job_id << "\n";
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
}

int report_ended(const proto::JobEnded& ended, const std::string& output_path,
                 const std::string& log_dir, const std::string& db, bool allow_partial) {
  const auto& p = ended.progress;
  // One count of attempts everywhere (docs/store.md, job_counts): each succeeded mini-batch has
  // exactly one RUN_DONE attempt, every other attempt (failed, lost, cancelled) is a failed one.
  std::fprintf(stderr,
               "fanout: job %llu %s: %s\n  mini-batches: %llu succeeded, %llu failed of %llu; "
               "items: %llu succeeded, %llu failed; attempts: %llu (%llu failed)\n",
               static_cast<unsigned long long>(ended.job_id), ended.state.c_str(),
               ended.reason.c_str(), static_cast<unsigned long long>(p.succeeded),
               static_cast<unsigned long long>(p.failed),
               static_cast<unsigned long long>(p.submitted),
               static_cast<unsigned long long>(p.items_succeeded),
               static_cast<unsigned long long>(p.items_failed),
               static_cast<unsigned long long>(p.succeeded + p.attempts_failed),
               static_cast<unsigned long long>(p.attempts_failed));
  if (p.attempts_failed > 0 && ended.state != "succeeded" && !db.empty() && fs::exists(db)) {
    if (auto st = store::read_job_status(db, ended.job_id); st && st->first_error) {
      const auto& e = *st->first_error;
      std::fprintf(
          stderr, "  first error: mini-batch %llu try %llu on %s: %s: %s\n",
          static_cast<unsigned long long>(e.minibatch), static_cast<unsigned long long>(e.attempt),
          e.process.empty() ? "-" : e.process.c_str(), e.status.c_str(), e.message.c_str());
    }
  }
  if (!output_path.empty()) std::fprintf(stderr, "  output: %s\n", output_path.c_str());
  if (!log_dir.empty()) std::fprintf(stderr, "  logs: %s\n", log_dir.c_str());
  return exit_status(ended.state, allow_partial);
}

int follow_job(std::uint64_t job_id, const FollowOptions& opts, Logger log) {
  std::string error;
  auto job = job_in_store(opts.db, job_id, error);
  if (job && is_ended(job->state)) {
    const int rc = report_from_store(*job, opts.db, opts.allow_partial);
    if (!opts.cancel) return rc;
    std::fprintf(stderr, "fanout: job %llu had already ended; nothing cancelled\n",
                 static_cast<unsigned long long>(job_id));
    return kExitFailed;
  }
  std::string endpoint = opts.interchange;
  if (endpoint.empty()) {
    if (!job) {
      std::fprintf(stderr, "error: %s\n", error.c_str());
      return 2;
    }
    endpoint = endpoint_from_run_dir(job->log_dir);
    if (endpoint.empty()) {
      std::fprintf(stderr,
                   "error: job %llu: no interchange.ready beside %s; pass --interchange, or "
                   "resume the job with: fanout resume %llu --db %s\n",
                   static_cast<unsigned long long>(job_id), job->log_dir.c_str(),
                   static_cast<unsigned long long>(job_id), opts.db.c_str());
      return 3;
    }
  }
  return follow_on(endpoint, job_id, opts, nullptr, log);
}

int resume_job(std::uint64_t job_id, const ResumeOptions& opts, Logger log) {
  std::string error;
  auto job = job_in_store(opts.db, job_id, error);
  if (!job) {
    std::fprintf(stderr, "error: %s\n", error.c_str());
    return 2;
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
      return 2;
    }
    log->warn("{}; resuming with the default settings", f.what());
  }
  RunSettings rs = resumed_settings(recorded, opts.workers, opts.pools, opts.python);
  if (opts.failed) rs.reopen_failed = job_id;
  const std::string run_dir = fs::path(job->log_dir).parent_path().string();
  if (!opts.quiet) {
    std::fprintf(stderr, "fanout: resuming job %llu (%s) on %s, %u pool(s) x %u workers\n",
                 static_cast<unsigned long long>(job_id), job->name.c_str(), opts.db.c_str(),
                 rs.pools, rs.workers);
  }
  std::optional<Embedded> emb;
  try {
    emb.emplace(rs, opts.db, run_dir, log);
  } catch (const Failure& f) {
    std::fprintf(stderr, "error: %s\n", f.what());
    return 3;
  }
  FollowOptions fo;
  fo.db = opts.db;
  fo.quiet = opts.quiet;
  fo.allow_partial = opts.allow_partial;
  return follow_on(emb->client_endpoint(), job_id, fo, &*emb, log);
}

}  // namespace fanout::client
