// The interchange poll loop and its wiring: frames in, the parts' decisions turned into frames
// out and store writes. The policies live in pool_table, job_ledger, dispatcher,
// client_sessions and job_checks. See interchange.hpp and docs/architecture.md.
#include "interchange/interchange.hpp"

#include <fcntl.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>

#include "fanout/protocol/codec.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/protocol/ready_file.hpp"
#include "fanout/protocol/run_folder.hpp"
#include "fanout/report/progress_overview.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/fd.hpp"
#include "fanout/util/fs.hpp"
#include "fanout/util/test_hooks.hpp"
#include "interchange/job_checks.hpp"

namespace fanout::ix {

namespace {

using proto::AttemptStatus;
using proto::JobState;

std::string state_string(JobState s) { return std::string(proto::to_string(s)); }

}  // namespace

Interchange::Interchange(Options opts, Logger log)
    : opts_(std::move(opts)),
      log_(std::move(log)),
      client_sock_(ctx_, net::Socket::Kind::Router),
      pool_sock_(ctx_, net::Socket::Kind::Router),
      eps_(open_sockets()),
      store_(std::make_unique<store::TaskStore>(opts_.db_path, log_)),
      reports_(std::make_unique<ReportWriter>(opts_.db_path)),
      // Pool ids are never reused within a store, across restarts too.
      pools_(store_->max_pool_id() + 1),
      ledger_(store_->max_job_id() + 1, store_->max_attempt_id() + 1),
      sessions_(opts_.window, opts_.progress_interval) {
  std::random_device rd;
  instance_ =
      (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ static_cast<std::uint64_t>(::getpid());
  if (instance_ == 0) instance_ = 1;
  // Resolved once: a link the operator later moves does not widen what clients may write.
  std::vector<std::string> roots = opts_.write_roots;
  if (roots.empty()) {
    roots.push_back(std::filesystem::absolute(opts_.db_path).parent_path().string());
  }
  for (const auto& root : roots) {
    auto real = resolve_for_write(std::filesystem::absolute(root).string());
    if (!real) throw Failure(ErrorCode::InvalidArgument, "--write-root: " + real.error().message);
    write_roots_.push_back(*real);
  }
  log_->info("clients may make this interchange write under: {}", fmt::join(write_roots_, ", "));
  // The report thread builds running jobs' reports from what the store commits.
  store_->on_attempts_committed(
      [r = reports_.get()](std::vector<store::CommittedAttempt>& batch) { r->committed(batch); });
  recover();
  if (!opts_.metrics_listen.empty()) {
    metrics_ = std::make_unique<MetricsExporter>(opts_.metrics_listen);
    log_->info("metrics: http://{}/metrics", metrics_->address());
  }
  log_->info("interchange {} listening: clients {} pools {} store {}", FANOUT_VERSION, eps_.client,
             eps_.pool, opts_.db_path);
}

Interchange::~Interchange() {
  // reports_ goes first (see the members); the store's writer must not call it after.
  if (store_) store_->on_attempts_committed(nullptr);
}

namespace {

// Each connection costs a descriptor, and the default soft limit (1,024) is far below what
// pools, clients and idle unauthenticated peers may need together: the soft limit goes up to the
// hard one. An accept that still fails is logged (net::ConnectionGuard).
void raise_open_files_limit(const Logger& log) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) return;
  const rlim_t was = rl.rlim_cur;
  rl.rlim_cur = rl.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    log->warn("open files limit stays at {}: setrlimit to the hard limit {} failed", was,
              rl.rlim_max);
    return;
  }
  SPDLOG_LOGGER_DEBUG(log, "open files limit raised from {} to {}", was, rl.rlim_max);
}

}  // namespace

Interchange::Endpoints Interchange::open_sockets() {
  Endpoints eps;
  raise_open_files_limit(log_);
  // Without a ZAP handler in the context, libzmq admits every Curve key: it starts first.
  zap_ = net::make_zap_handler(ctx_, {opts_.client_endpoint, opts_.pool_endpoint}, opts_.security,
                               log_);
  for (auto* s : {&client_sock_, &pool_sock_}) {
    // An idle unauthenticated connection holds a descriptor this long at most, and a dead peer's
    // connection (and a pool's routing id) is freed after the pools' heartbeat threshold.
    s->set_handshake_timeout(net::kHandshakeTimeout);
    s->set_peer_liveness(opts_.heartbeat_period, opts_.heartbeat_threshold);
  }
  // What a Curve peer sends before it is admitted is bounded (connection_guard.hpp).
  if (auto c = net::wants_curve(opts_.client_endpoint, opts_.security); c && *c) {
    client_guard_ = std::make_unique<net::ConnectionGuard>(ctx_, client_sock_, "client", log_);
  }
  if (auto c = net::wants_curve(opts_.pool_endpoint, opts_.security); c && *c) {
    pool_guard_ = std::make_unique<net::ConnectionGuard>(ctx_, pool_sock_, "pool", log_);
  }
  eps.client =
      net::bind_secure(client_sock_, opts_.client_endpoint, opts_.security, net::Role::Client);
  eps.pool = net::bind_secure(pool_sock_, opts_.pool_endpoint, opts_.security, net::Role::Pool);
  return eps;
}

void Interchange::recover() {
  const auto now = Clock::now();
  std::vector<std::uint64_t> ids;
  for (auto id : opts_.reopen_failed) {
    const auto n = store_->reopen_failed(id);
    log_->info("job {}: {} failed mini-batches reopened (resume --failed)", id, n);
  }
  for (auto& u : store_->recover()) {
    Job& job = ledger_.resume(std::move(u), now);
    sessions_.open(job.id, now);
    log_->info("resuming job {} ({}): {} of {} mini-batches left", job.id, job.spec.name,
               job.ready.size(), job.total);
    ids.push_back(job.id);
  }
  // A resumed job whose last mini-batch committed just before the crash ends now.
  for (auto id : ids) {
    if (Job* job = ledger_.find(id)) settle(*job);
  }
  // A job that ended just before the crash, before its reports were written, gets them now;
  // the temporary files of the killed writer go.
  for (const auto& [id, log_dir] : store_->unreported_jobs()) {
    const std::size_t stale = remove_stale_temporaries(log_dir);
    log_->info(
        "job {} ended without its reports; writing them into {} ({} stale temporary files "
        "removed)",
        id, log_dir, stale);
    reports_->submit(id, log_dir);
  }
}

void Interchange::write_ready_file() {
  // Both files say the same (protocol/ready_file.hpp): where we listen and how to connect.
  const bool ipc = eps_.client.rfind("ipc://", 0) == 0;
  const proto::ReadyFile ready{
      .client = eps_.client,
      .pool = eps_.pool,
      .pid = ::getpid(),
      .host = host_name(),
      .security = ipc                       ? "ipc"
                  : opts_.security.insecure ? "insecure"
                                            : "curve",
      .keys = opts_.security.keys_dir,
  };
  if (opts_.owner != nullptr) {
    // Another `fanout run` on this store attaches here (client/launch/embedded.cpp).
    auto r = opts_.owner->publish(proto::format_ready(ready));
    if (!r) log_->warn("{}", r.error().message);
  }
  if (opts_.ready_file.empty()) return;
  // Through AtomicFile: its temporary file is always new, never a planted link followed.
  auto r = write_file_atomic(opts_.ready_file, proto::format_ready(ready));
  if (!r) throw Failure(r.error());
}

bool Interchange::submitter_gone() {
  // Embedded only: the client that started us (our parent) is gone when we were re-parented.
  if (!opts_.exit_when_idle || ::getppid() == parent_) return false;
  // A job it had not finished submitting cannot end; one fully submitted runs on without it.
  for (const auto& [id, job] : ledger_.jobs()) {
    if (job.submit_done) continue;
    log_->warn(
        "the client that started this interchange exited before job {} was fully submitted "
        "({} mini-batches); stopping: fanout resume {} submits the rest and finishes it",
        id, job.total, id);
    return true;
  }
  return false;
}

int Interchange::run() {
  parent_ = ::getppid();
  write_ready_file();
  net::Poller poller;
  poller.add(client_sock_);
  poller.add(pool_sock_);
  const std::size_t reports_item = poller.add_fd(reports_->fd());
  const std::size_t committed_item = poller.add_fd(store_->committed_fd());
  auto now = Clock::now();
  auto next_heartbeat = now + opts_.heartbeat_period;
  auto next_overview = now + opts_.overview_interval;
  last_stats_ = now;
  Clock::time_point idle_since{};
  bool idle = false;
  net::Message msg;

  while (!stop_.load(std::memory_order_relaxed)) {
    now = Clock::now();
    auto wake = next_heartbeat;
    if (!ledger_.empty()) wake = std::min(wake, now + opts_.progress_interval);
    auto timeout = std::chrono::duration_cast<Millis>(wake - now) + Millis(1);
    poller.wait(std::max(timeout, Millis(0)));

    // Drain both sockets, a bounded number of messages each, so neither side starves the other.
    for (int i = 0; i < 4096 && client_sock_.recv(msg); ++i) {
      ++stats_.frames_in;
      on_client(msg);
    }
    for (int i = 0; i < 4096 && pool_sock_.recv(msg); ++i) {
      ++stats_.frames_in;
      on_pool(msg);
    }
    dispatch();
    if (poller.readable(committed_item)) finish_committed();
    if (poller.readable(reports_item)) on_reports_done();
    if (metrics_ && Clock::now() >= next_metrics_) publish_metrics(Clock::now());

    now = Clock::now();
    for (auto& [id, verdict] : ledger_.timed_out(now)) end_job(id, verdict);
    for (const auto& [id, job] : ledger_.jobs()) send_progress(job, false);
    if (now >= next_overview) {
      next_overview = now + opts_.overview_interval;
      write_overviews();
    }
    if (now >= next_heartbeat) {
      next_heartbeat = now + opts_.heartbeat_period;
      heartbeat_pools(now);
      log_stats(false);
      if (submitter_gone()) break;
    }
    if (!store_->ok()) {
      // The database itself failed: nothing can be recorded any more, for any job.
      log_->critical("store {} failed; stopping", opts_.db_path);
      return proto::kExitRuntime;
    }
    end_jobs_whose_output_failed();
    if (opts_.exit_when_idle && had_client_ && ledger_.empty() && ended_.empty() &&
        !sessions_.reporting()) {
      // Give the last JobEnded time to leave before the sockets close.
      if (!idle) {
        idle = true;
        idle_since = now;
      }
      if (now - idle_since > std::chrono::seconds(2)) break;
    } else {
      idle = false;
    }
  }
  shut_down();
  return proto::kExitOk;
}

void Interchange::heartbeat_pools(Clock::time_point now) {
  const std::string hb = proto::encode(proto::Heartbeat{});
  std::vector<std::string> peers;
  peers.reserve(pools_.size());
  for (const auto& [peer, pool] : pools_.all()) peers.push_back(peer);
  for (const auto& peer : peers) {
    if (Pool* pool = pools_.find(peer)) send_pool(*pool, hb);
  }
  expire_pools(now);
  record_pools_seen(now);
}

// The store's pools.last_seen follows the heartbeats at a bounded rate: every connected pool in
// one queued write every few seconds, committed with whatever else is queued, so `fanout status`
// and the dashboard show a heartbeat age without a transaction per heartbeat.
void Interchange::record_pools_seen(Clock::time_point now) {
  constexpr auto kPoolsSeenPeriod = std::chrono::seconds(5);
  if (now < next_pools_seen_) return;
  next_pools_seen_ = now + kPoolsSeenPeriod;
  const double now_unix = unix_now();
  std::vector<store::PoolSeen> seen;
  seen.reserve(pools_.size());
  for (const auto& [peer, pool] : pools_.all()) {
    const double age = std::chrono::duration<double>(now - pool.last_seen).count();
    seen.push_back(store::PoolSeen{pool.id, now_unix - std::max(0.0, age)});
  }
  store_->record_pools_seen(std::move(seen));
}

// A job whose output file failed (disk full, I/O error) ends failed; the others go on.
void Interchange::end_jobs_whose_output_failed() {
  for (auto& [id, reason] : store_->take_failed_jobs()) store_failed_[id] = std::move(reason);
  for (auto f = store_failed_.begin(); f != store_failed_.end();) {
    const std::uint64_t id = f->first;
    // An ended job whose end is not committed yet takes its failure then (finish_ended_job).
    if (std::any_of(ended_.begin(), ended_.end(),
                    [id](const EndedJob& e) { return e.job.id == id; })) {
      ++f;
      continue;
    }
    const Verdict failed{JobState::Failed, f->second};
    output_failed_.insert(id);
    f = store_failed_.erase(f);
    if (ledger_.find(id) != nullptr) end_job(id, failed);
  }
}

void Interchange::shut_down() {
  // Jobs ended but not yet told: their end is committed now, and their reports written below.
  if (!ended_.empty() || !accepts_.empty()) {
    store_->flush();
    finish_committed();
  }
  // Reports being written are finished (and recorded), and their clients told, before we go.
  reports_->wait_idle();
  on_reports_done();
  // Tell pools to go; let the frames leave before the sockets close.
  const std::string bye = proto::encode(proto::Shutdown{"interchange stopping"});
  const double now_unix = unix_now();
  for (const auto& [peer, pool] : pools_.all()) {
    (void)pool_sock_.send_to(peer, bye);
    // Told to go: they leave cleanly, which the store calls `gone` (not `lost`).
    store_->upsert_pool(store::PoolRecord{
        pool.id, pool.reg.pool_name, pool.reg.node, pool.reg.workers, pool.reg.prefetch,
        pool.reg.pid, pool.reg.build, "gone", pool.registered, now_unix, pool.key});
  }
  pool_sock_.set_linger(Millis(500));
  client_sock_.set_linger(Millis(500));
  store_->flush();
  log_stats(true);
  log_->info("interchange stopped");
}

void Interchange::bad_frame(const char* side, const std::string& peer, const Error& err) {
  ++stats_.bad_frames;
  // A peer's garbage is logged once in full, then only counted: a flooding peer cannot grow
  // the log.
  if (!warned_bad_) {
    warned_bad_ = true;
    log_->warn("dropped a bad frame from {} peer ({} bytes id): {} (further ones are counted)",
               side, peer.size(), err.message);
  } else {
    SPDLOG_LOGGER_DEBUG(log_, "dropped a bad frame from {}: {}", side, err.message);
  }
}

// ---------------------------------------------------------------- clients

void Interchange::send_client(const std::string& peer, const std::string& frame) {
  // Clients are not flow-controlled beyond their window; a client that stopped reading or left
  // misses progress, never results (those are in the store).
  auto r = client_sock_.send_to(peer, frame);
  if (r == net::SendResult::Sent) {
    ++stats_.frames_out;
  } else if (r == net::SendResult::WouldBlock) {
    ++stats_.would_block;
  }
}

void Interchange::on_client(net::Message& msg) {
  if (!msg.well_formed) {
    bad_frame("client", msg.peer, Error{ErrorCode::Protocol, "unexpected multipart message"});
    return;
  }
  auto h = proto::read_header(msg.frame);
  if (!h) {
    bad_frame("client", msg.peer, h.error());
    if (h.error().code == ErrorCode::Version) {
      send_client(msg.peer,
                  proto::encode(proto::make_reject(proto::RejectCode::Version, h.error().message)));
    }
    return;
  }
  switch (h->type) {
    case proto::MsgType::SubmitJob:
      return on_submit_job(msg.peer, msg.frame);
    case proto::MsgType::SubmitTasks:
      return on_submit_tasks(msg.peer, msg.frame);
    case proto::MsgType::SubmitEnd:
      return on_submit_end(msg.peer, msg.frame);
    case proto::MsgType::Attach:
      return on_attach(msg.peer, msg.frame);
    case proto::MsgType::CancelJob:
      return on_cancel(msg.peer, msg.frame);
    case proto::MsgType::ReopenJob:
      return on_reopen(msg.peer, msg.frame);
    case proto::MsgType::Shutdown:
      return on_shutdown(msg.peer, msg.frame);
    case proto::MsgType::Heartbeat:
      return;
    default:
      bad_frame("client", msg.peer,
                Error{ErrorCode::Protocol,
                      "client sent " + proto::type_name(static_cast<std::uint8_t>(h->type)) +
                          ", which only pools or the interchange send"});
  }
}

void Interchange::on_submit_job(const std::string& peer, const std::string& frame) {
  auto m = proto::decode<proto::SubmitJob>(frame);
  if (!m) return bad_frame("client", peer, m.error());
  // A run folder the interchange makes itself is its own choice, not the client's: only the
  // paths a client names are held to the write roots.
  const bool log_dir_is_clients = !m->spec.log_dir.empty() || !m->spec.interchange_run_dir;
  if (m->spec.log_dir.empty() && m->spec.interchange_run_dir) {
    // The client's paths are not ours: the run folder goes beside our store, named after the
    // job (only characters safe in one path component).
    m->spec.log_dir =
        std::filesystem::absolute(opts_.db_path).parent_path().lexically_normal().string() +
        "/runs/" +
        proto::run_folder_name(m->spec.name, std::time(nullptr), ::getpid(), ++run_dirs_made_) +
        "/logs";
  }
  auto ok = check_job_spec(m->spec);
  if (ok) ok = check_write_roots(m->spec, write_roots_, log_dir_is_clients);
  if (ok) ok = check_output_free(m->spec, ledger_.jobs());
  if (ok) ok = check_output_fresh(m->spec);
  if (ok) ok = prepare_job_files(m->spec);
  if (!ok) {
    send_client(
        peer, proto::encode(proto::make_reject(proto::RejectCode::JobRefused, ok.error().message)));
    return;
  }
  had_client_ = true;
  const auto now = Clock::now();
  Job& job = ledger_.accept(std::move(m->spec), now, unix_now());
  sessions_.open(job.id, now);
  sessions_.join(job.id, peer);
  store_->create_job(job.id, job.spec, job.started);
  // Its report is built as its attempts commit (report_writer.hpp).
  if (!job.spec.log_dir.empty()) {
    reports_->watch(job.id, job.spec.log_dir, ledger_.next_task_id());
  }
  log_->info("job {} ({}) submitted: runtime {}, entry {}", job.id, job.spec.name, job.spec.runtime,
             job.spec.entry_script);
  // Accepted means recorded: a `fanout status N` right after the reply must find the job, so
  // the reply waits for the store to commit it (finish_committed()), off this loop.
  const std::uint64_t ticket = store_->flush_async();
  accepts_.push_back(PendingAccept{
      peer,
      proto::JobAccepted{job.id, opts_.window,
                         std::filesystem::absolute(opts_.db_path).lexically_normal().string(),
                         job.spec.log_dir},
      ticket});
  store_->wake_when_committed(ticket);
}

Expected<void> Interchange::prepare_job_files(const proto::JobSpec& spec) const {
  namespace fs = std::filesystem;
  auto bad = [](const std::string& field, const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "SubmitJob: " + field + ": " + what);
  };
  std::error_code ec;
  if (!fs::is_directory(spec.code_dir, ec)) {
    return bad("code_dir", "expected an existing absolute folder (got '" + spec.code_dir + "')");
  }
  if (!spec.log_dir.empty()) {
    if (auto r = make_dirs(spec.log_dir); !r) return bad("log_dir", r.error().message);
  }
  if (!spec.output_path.empty()) {
    const fs::path out(spec.output_path);
    if (auto r = make_dirs(out.parent_path().string()); !r) {
      return bad("output_path", r.error().message);
    }
    // As the store's writer opens it (store/detail/output_file.cpp): a symbolic link there,
    // dangling or not, is refused before the job starts, never written through.
    UniqueFd probe(::open(spec.output_path.c_str(),
                          O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!probe.valid()) {
      const int err = errno;
      return bad("output_path",
                 spec.output_path + (err == ELOOP ? ": is a symbolic link, which fanout "
                                                    "does not follow: remove it"
                                                  : ": cannot be opened for writing: " +
                                                        std::string(std::strerror(err))));
    }
  }
  return {};
}

void Interchange::on_submit_tasks(const std::string& peer, const std::string& frame) {
  auto m = proto::decode<proto::SubmitTasks>(frame);
  if (!m) return bad_frame("client", peer, m.error());
  Job* job = ledger_.find(m->job_id);
  if (job == nullptr) {
    send_client(peer, proto::encode(proto::make_reject(
                          proto::RejectCode::JobNotRunning,
                          fmt::format("SubmitTasks: job {} is not running", m->job_id))));
    return;
  }
  if (job->submit_done) {
    ++stats_.dropped_submissions;
    return;
  }
  // The window, enforced (peer_bounds.hpp): what a client sends beyond it is refused, so that
  // a client ignoring it cannot fill the interchange's memory.
  const std::size_t refused =
      refuse_beyond_window(m->batches, job->succeeded + job->failed, opts_.window);
  if (refused > 0) {
    stats_.window_refused += refused;
    if (!warned_window_) {
      warned_window_ = true;
      log_->warn(
          "job {}: refused {} mini-batches beyond the client's window of {} (further "
          "ones are counted)",
          job->id, refused, opts_.window);
    }
  }
  stats_.dropped_submissions += ledger_.submit(*job, m->batches, accepted_);
  if (refused > 0) send_progress(*job, true);  // the client learns the count known
  SPDLOG_LOGGER_DEBUG(log_, "job {}: {} mini-batches submitted", job->id, accepted_.size());
  auto refused_inputs = ledger_.refuse_unreadable(*job, accepted_, unix_now());
  if (!accepted_.empty()) store_->add_minibatches(job->id, std::move(accepted_));
  if (refused_inputs.empty()) return;
  // Entries the client could not list as inputs are failed attempts of their own, recorded
  // after their mini-batches, and judged against the thresholds like any other.
  for (auto& a : refused_inputs) {
    log_gave_up(a.result);
    count_attempt(a.result.status);
    store_->record_attempt(store::AttemptRecord{0, {}, std::move(a.result), "failed", false});
  }
  settle(*job);
}

void Interchange::on_submit_end(const std::string& peer, const std::string& frame) {
  auto m = proto::decode<proto::SubmitEnd>(frame);
  if (!m) return bad_frame("client", peer, m.error());
  Job* job = ledger_.find(m->job_id);
  if (job == nullptr) return;
  switch (ledger_.submit_end(*job, m->total)) {
    case JobLedger::InputEnd::Repeated:
      return;
    case JobLedger::InputEnd::Missing:
      // The client learns the count known and resubmits the rest.
      ++stats_.dropped_submissions;
      send_progress(*job, true);
      return;
    case JobLedger::InputEnd::Complete:
      store_->set_submit_done(job->id, job->total);
      log_->info("job {}: all {} mini-batches submitted", job->id, job->total);
      settle(*job);  // allowed_failed_percent is known from now on
      return;
  }
}

void Interchange::on_attach(const std::string& peer, const std::string& frame) {
  auto m = proto::decode<proto::Attach>(frame);
  if (!m) return bad_frame("client", peer, m.error());
  had_client_ = true;
  auto reply = sessions_.attach(m->job_id, peer);
  switch (reply.what) {
    case ClientSessions::Attached::Live:
      if (Job* job = ledger_.find(m->job_id)) send_progress(*job, true);
      return;
    case ClientSessions::Attached::Reporting:
      return;
    case ClientSessions::Attached::Ended:
      send_client(peer, proto::encode(*reply.ended));
      return;
    case ClientSessions::Attached::Unknown:
      send_client(peer, proto::encode(proto::make_reject(
                            proto::RejectCode::UnknownJob,
                            fmt::format("Attach: job {} is not known here", m->job_id))));
      return;
  }
}

void Interchange::on_cancel(const std::string& peer, const std::string& frame) {
  auto m = proto::decode<proto::CancelJob>(frame);
  if (!m) return bad_frame("client", peer, m.error());
  if (ledger_.find(m->job_id) == nullptr) return;
  sessions_.join(m->job_id, peer);
  end_job(m->job_id,
          Verdict{JobState::Cancelled, m->reason.empty() ? "cancelled by a client" : m->reason});
}

// `fanout resume --failed` on our store: what --reopen-failed does at a start, done live. The
// job's end must be committed and its clients told first (its report written), so that the
// store's change is the last word on it and a JobEnded of the old end cannot follow the new run.
void Interchange::on_reopen(const std::string& peer, const std::string& frame) {
  auto m = proto::decode<proto::ReopenJob>(frame);
  if (!m) return bad_frame("client", peer, m.error());
  had_client_ = true;
  const std::uint64_t id = m->job_id;
  if (!ended_.empty() || sessions_.reporting()) {
    store_->flush();
    finish_committed();
    reports_->wait_idle();
    on_reports_done();
  }
  Job* live = ledger_.find(id);
  store::ReopenedJob r;
  try {
    r = store_->reopen_job(id);
  } catch (const Failure& f) {
    log_->warn("job {}: resume --failed refused: {}", id, f.what());
    send_client(peer, proto::encode(proto::make_reject(
                          proto::RejectCode::ReopenRefused,
                          fmt::format("ReopenJob: job {} cannot be reopened: {}", id, f.what()))));
    return;
  }
  const auto now = Clock::now();
  if (live != nullptr) {
    ledger_.reopen(*live, std::move(r.job));
    log_->info("job {}: {} failed mini-batches reopened (resume --failed); it runs on", id,
               r.reopened);
    return;
  }
  Job& job = ledger_.resume(std::move(r.job), now);
  sessions_.open(job.id, now);
  log_->info(
      "job {}: {} failed mini-batches reopened (resume --failed); resuming it: {} of {} "
      "mini-batches left",
      id, r.reopened, job.ready.size(), job.total);
  settle(job);  // nothing left to run (a job that ended with none failed): it ends again now
}

void Interchange::on_shutdown(const std::string& peer, const std::string& frame) {
  auto m = proto::decode<proto::Shutdown>(frame);
  if (!m) return bad_frame("client", peer, m.error());
  if (opts_.shutdown_token.empty() || m->token != opts_.shutdown_token) {
    bad_frame("client", peer, Error{ErrorCode::Protocol, "Shutdown: refused (no or wrong token)"});
    return;
  }
  if (sessions_.followed_by_others(peer)) {
    // Jobs of other clients (`fanout run`s that attached to this store's owner) run here: the
    // interchange goes on and exits when idle; the requester leaves it running (detaches).
    log_->info(
        "shutdown requested by the client that started us; deferred until the jobs of "
        "other clients end");
    send_client(peer, proto::encode(proto::make_reject(
                          proto::RejectCode::ShutdownDeferred,
                          "Shutdown: deferred: jobs of other clients run here")));
    opts_.exit_when_idle = true;
    return;
  }
  log_->info("shutdown requested by the client that started us");
  stop();
}

proto::JobProgress Interchange::progress_of(const Job& job) const {
  proto::JobProgress p;
  p.job_id = job.id;
  p.total = job.submit_done ? job.total : 0;
  p.submitted = job.total;
  p.succeeded = job.succeeded;
  p.failed = job.failed;
  p.items_succeeded = job.items_succeeded;
  p.items_failed = job.items_failed;
  p.attempts_failed = job.attempts_failed;
  p.pools = static_cast<std::uint32_t>(pools_.size());
  p.workers = pools_.workers();
  p.instance = instance_;
  p.in_flight = job.in_flight;
  const auto now = Clock::now();
  for (const auto& [peer, pool] : pools_.all()) {
    // At most 1000, so the frame stays under its element limit (docs/protocol.md).
    if (!pool.tasks.empty() || p.idle_pools.size() >= 1000) continue;
    p.idle_pools.push_back(
        proto::IdlePool{.name = pool.reg.pool_name,
                        .idle_s = std::chrono::duration<double>(now - pool.idle_from).count()});
  }
  return p;
}

void Interchange::send_progress(const Job& job, bool force) {
  const ClientSet* to =
      sessions_.progress_due(job.id, job.succeeded + job.failed, Clock::now(), force);
  if (to == nullptr) return;
  auto frame = proto::encode(progress_of(job));
  for (const auto& c : *to) send_client(c, frame);
}

// ---------------------------------------------------------------- pools

bool Interchange::send_pool(Pool& pool, const std::string& frame) {
  const std::string peer = pool.peer;  // lose_pool below destroys `pool`
  auto r = pool_sock_.send_to(peer, frame);
  if (r == net::SendResult::Sent) {
    ++stats_.frames_out;
    return true;
  }
  if (r == net::SendResult::WouldBlock) {
    ++stats_.would_block;
    return false;
  }
  // Unreachable: the connection is gone. Its tasks go back to the queue now rather than after
  // the heartbeat threshold.
  lose_pool(peer, "connection closed");
  return false;
}

void Interchange::on_pool(net::Message& msg) {
  if (!msg.well_formed) {
    bad_frame("pool", msg.peer, Error{ErrorCode::Protocol, "unexpected multipart message"});
    return;
  }
  auto h = proto::read_header(msg.frame);
  if (!h) {
    bad_frame("pool", msg.peer, h.error());
    // A pool of another version learns why it is ignored (zguide: version in READY).
    if (h.error().code == ErrorCode::Version && msg.frame.size() >= 2 &&
        static_cast<std::uint8_t>(msg.frame[1]) ==
            static_cast<std::uint8_t>(proto::MsgType::Register)) {
      (void)pool_sock_.send_to(msg.peer, proto::encode(proto::make_reject(
                                             proto::RejectCode::Version, h.error().message)));
    }
    return;
  }
  if (h->type == proto::MsgType::Register) return on_pool_register(msg);
  Pool* pool = pools_.find(msg.peer);
  if (pool != nullptr && !key_holds(msg)) {
    // Routing ids are unique among live connections (no ROUTER_HANDOVER), so the registered
    // pool's connection is gone and another key's connection has its id: what was sent there
    // may have reached it. The tasks are requeued with no try used (it is not their failure);
    // the real pool registers again when it reconnects.
    lose_pool(msg.peer, "its routing id was used by another key", false, true);
    return;
  }
  if (pool == nullptr) return on_unknown_pool(msg, h->type);
  pools_.seen(*pool, Clock::now());
  on_pool_message(*pool, msg, h->type);
}

// A Register: the routing id and the pool name must both be free or held by the sender's key.
void Interchange::on_pool_register(const net::Message& msg) {
  auto m = proto::decode<proto::Register>(msg.frame);
  if (!m) return bad_frame("pool", msg.peer, m.error());
  // A routing id and a pool name stay with the key that first registered them: another key
  // can register under neither (it would replace the pool's row and fingerprint).
  if (!key_holds(msg)) {
    (void)pool_sock_.send_to(msg.peer, proto::encode(proto::make_reject(
                                           proto::RejectCode::PoolRefused,
                                           "Register: this routing id belongs to another key")));
    return;
  }
  if (!pools_.name_holds(m->pool_name, msg.user_id)) {
    ++stats_.key_mismatch;
    if (warned_keys_.insert(msg.user_id).second) {
      log_->warn(
          "pool name '{}' is bound to key {}, but key {} registered under it (routing id "
          "'{}'); refused (further attempts of this key are counted)",
          m->pool_name, *pools_.name_key(m->pool_name), msg.user_id, msg.peer);
    }
    (void)pool_sock_.send_to(
        msg.peer, proto::encode(proto::make_reject(
                      proto::RejectCode::PoolRefused,
                      "Register: pool name '" + m->pool_name + "' belongs to another key")));
    return;
  }
  pools_.bind_key(msg.peer, msg.user_id);
  pools_.bind_name(m->pool_name, msg.user_id);
  on_register(msg.peer, *m, msg.user_id);
}

// A frame from a peer that is not (or no longer) a registered pool.
void Interchange::on_unknown_pool(const net::Message& msg, proto::MsgType type) {
  // Unknown peer: after an interchange restart, or a pool declared lost. It must register
  // again; whatever it sends before that is not trusted.
  ++stats_.unknown_pool_frames;
  if (type == proto::MsgType::ResultBatch) {
    // Results of a pool declared lost (or from before a restart): their work was given away.
    if (auto m = proto::decode<proto::ResultBatch>(msg.frame)) {
      stats_.stale_results += m->results.size();
      log_->warn(
          "refused {} stale results from unregistered pool '{}' (declared lost, or "
          "registered before a restart): their tasks were requeued",
          m->results.size(), msg.peer);
    }
  }
  (void)pool_sock_.send_to(msg.peer,
                           proto::encode(proto::make_reject(proto::RejectCode::NotRegistered,
                                                            "not registered: send Register")));
}

// A registered pool's frame, by type.
void Interchange::on_pool_message(Pool& pool, const net::Message& msg, proto::MsgType type) {
  switch (type) {
    case proto::MsgType::Heartbeat: {
      auto m = proto::decode<proto::Heartbeat>(msg.frame);
      if (!m) return bad_frame("pool", msg.peer, m.error());
      pools_.set_capacity(pool, m->capacity);
      if (m->lists_held) {
        auto expired = leases_.heartbeat(pool.id, pool.tasks, m->held, Clock::now(),
                                         opts_.heartbeat_threshold);
        if (!expired.empty()) expire_leases(pool, expired);
      }
      return;
    }
    case proto::MsgType::ResultBatch: {
      auto m = proto::decode<proto::ResultBatch>(msg.frame);
      if (!m) return bad_frame("pool", msg.peer, m.error());
      pools_.set_capacity(pool, m->capacity);
      on_results(pool, *m);
      return;
    }
    case proto::MsgType::ResourceSample: {
      auto m = proto::decode<proto::ResourceSample>(msg.frame);
      if (!m) return bad_frame("pool", msg.peer, m.error());
      on_resource_sample(pool, *m);
      return;
    }
    case proto::MsgType::PoolLeaving: {
      auto m = proto::decode<proto::PoolLeaving>(msg.frame);
      if (!m) return bad_frame("pool", msg.peer, m.error());
      lose_pool(msg.peer, m->reason, true);  // destroys `pool`
      return;
    }
    default:
      bad_frame("pool", msg.peer,
                Error{ErrorCode::Protocol, "pool sent " +
                                               proto::type_name(static_cast<std::uint8_t>(type)) +
                                               ", which pools never send"});
  }
}

bool Interchange::key_holds(const net::Message& msg) {
  if (pools_.key_holds(msg.peer, msg.user_id)) return true;
  ++stats_.key_mismatch;
  if (warned_keys_.insert(msg.user_id).second) {
    log_->warn(
        "pool routing id '{}' is bound to key {}, but key {} used it; refused (further "
        "attempts of this key are counted)",
        msg.peer, *pools_.bound_key(msg.peer), msg.user_id);
  }
  return false;
}

void Interchange::on_register(const std::string& peer, const proto::Register& reg,
                              const std::string& key) {
  const auto d = pools_.on_register(peer, reg);
  const auto registered = [this](const Pool& pool) {
    return proto::encode(proto::Registered{
        pool.id, static_cast<std::uint32_t>(opts_.heartbeat_period.count()),
        static_cast<std::uint32_t>(opts_.heartbeat_threshold.count()), unix_now()});
  };
  if (d.outcome == RegisterDecision::Outcome::Repeat) {
    Pool& known = *pools_.find(peer);
    pools_.seen(known, Clock::now());
    send_pool(known, registered(known));
    return;
  }
  if (d.lose_previous) {
    ++stats_.reregistrations;
    lose_pool(peer, "registered again");
  }
  if (d.outcome == RegisterDecision::Outcome::Reject) {
    (void)pool_sock_.send_to(
        peer, proto::encode(proto::make_reject(proto::RejectCode::PoolRefused, d.reason)));
    return;
  }
  Pool& pool = pools_.add(peer, reg, Clock::now(), unix_now(), key);
  store_->upsert_pool(store::PoolRecord{pool.id, reg.pool_name, reg.node, reg.workers, reg.prefetch,
                                        reg.pid, reg.build, "connected", pool.registered,
                                        pool.registered, pool.key});
  log_->info("pool {} registered: {} on {}, {} workers, prefetch {}", pool.id, reg.pool_name,
             reg.node, reg.workers, reg.prefetch);
  send_pool(pool, registered(pool));
}

void Interchange::dispatch() {
  if (ledger_.empty()) return;
  // From the back: a pool that fills up (or is lost) leaves its slot to one already visited.
  for (std::size_t i = pools_.free_count(); i-- > 0;) {
    if (i >= pools_.free_count()) continue;
    Pool& pool = pools_.free_at(i);
    while (pool.has_room()) {
      const std::size_t room = std::min<std::size_t>(pool.room(), opts_.max_batch);
      dispatcher_.plan(ledger_.jobs(), pool, room, picks_);
      if (picks_.empty()) return;  // nothing ready for anyone
      if (!send_tasks(pool)) break;
    }
  }
}

bool Interchange::send_tasks(Pool& pool) {
  batch_.tasks.clear();
  std::size_t taken = 0;  // picks whose tasks are in the batch
  for (const Pick& pick : picks_) {
    if (pick.needs_info) {
      auto r = pool_sock_.send_to(pool.peer,
                                  proto::encode(proto::JobInfo{pick.job->id, pick.job->spec}, 512));
      if (r != net::SendResult::Sent) break;  // the tasks taken so far still go
      pool.jobs_known.insert(pick.job->id);
    }
    ledger_.take(*pick.job, pick.count, pool.id, batch_.tasks);
    ++taken;
  }
  net::SendResult r = net::SendResult::WouldBlock;
  if (!batch_.tasks.empty()) {
    r = pool_sock_.send_to(pool.peer, proto::encode(batch_, 64 + batch_.tasks.size() * 64));
  }
  if (r != net::SendResult::Sent) {
    // Not queued: back to the queues, so the tasks go to another pool or the next round, with
    // no try used.
    ledger_.untake(batch_.tasks);
    std::vector<std::uint64_t> ids;  // no attempt will carry these ids
    for (const auto& t : batch_.tasks) ids.push_back(t.task_id);
    reports_->skip(ids);
    batch_.tasks.clear();
    ++stats_.would_block;
    if (r == net::SendResult::Unreachable) lose_pool(std::string(pool.peer), "connection closed");
    return false;
  }
  ++stats_.frames_out;
  const auto now = Clock::now();
  for (const auto& t : batch_.tasks) {
    store_->mark_running(t.job_id, t.index, t.attempt);
    pools_.assign(pool, t.task_id);
    leases_.sent(pool.id, t.task_id, now, pool.tasks);
  }
  for (std::size_t k = 0; k < taken; ++k) JobLedger::sent(*picks_[k].job, picks_[k].count);
  stats_.tasks_dispatched += batch_.tasks.size();
  SPDLOG_LOGGER_DEBUG(log_, "sent {} tasks to pool {}", batch_.tasks.size(), pool.id);
  return true;
}

void Interchange::on_results(Pool& pool, proto::ResultBatch& batch) {
  SPDLOG_LOGGER_DEBUG(log_, "pool {} returned {} results", pool.id, batch.results.size());
  const auto now = Clock::now();
  for (auto& r : batch.results) {
    ++stats_.results;
    const Completion c = ledger_.complete(pool.id, r, now);
    if (!c.ours) {
      ++stats_.late_results;
      SPDLOG_LOGGER_TRACE(log_, "late result for task {}", r.task_id);
      continue;
    }
    pools_.release(pool, r.task_id);
    if (c.job == nullptr) {
      ++stats_.late_results;
      continue;
    }
    Job& job = *c.job;
    if (c.gave_up) log_gave_up(r);
    const bool output = c.batch == BatchState::Succeeded && !job.spec.output_path.empty();
    count_attempt(r.status);
    store_->record_attempt(
        store::AttemptRecord{pool.id, pool.reg.pool_name, std::move(r), to_store(c.batch), output});
    settle(job);
  }
}

void Interchange::lose_pool(const std::string& peer, const std::string& why, bool left,
                            bool no_try) {
  auto removed = pools_.remove(peer);
  if (!removed) return;
  const Pool& pool = removed->pool;
  leases_.forget_pool(pool.id);
  const char* what = left ? "left" : "lost";
  ++(left ? stats_.pools_left : stats_.pools_lost);
  log_->log(left ? spdlog::level::info : spdlog::level::warn,
            "pool {} ({} on {}) {}: {}; requeueing {} tasks{}", pool.id, pool.reg.pool_name,
            pool.reg.node, what, why, removed->tasks.size(),
            left || no_try ? " (no try used)" : "");
  store_->upsert_pool(store::PoolRecord{
      pool.id, pool.reg.pool_name, pool.reg.node, pool.reg.workers, pool.reg.prefetch, pool.reg.pid,
      pool.reg.build, left ? "gone" : "lost", pool.registered, unix_now(), pool.key});
  if (left || no_try) {
    // It said goodbye: what it still held never ran, or it stopped it itself. Or it was taken
    // from the pool for a reason that is not the tasks'. No try is used.
    reports_->skip(ledger_.hand_back(removed->tasks));
    return;
  }
  std::vector<std::uint64_t> touched;
  auto lost = ledger_.lose(
      removed->tasks, AttemptStatus::PoolLost,
      fmt::format("pool {} on {} {}: {}", pool.reg.pool_name, pool.reg.node, what, why), unix_now(),
      touched);
  for (auto& a : lost) {
    if (a.gave_up) log_gave_up(a.result);
    count_attempt(a.result.status);
    store_->record_attempt(
        store::AttemptRecord{0, "", std::move(a.result), to_store(a.batch), false});
  }
  for (auto id : touched) {
    if (Job* job = ledger_.find(id)) settle(*job);
  }
}

void Interchange::expire_leases(Pool& pool, const std::vector<std::uint64_t>& tasks) {
  stats_.leases_expired += tasks.size();
  log_->warn(
      "pool {} ({} on {}) heartbeats but does not hold {} of its tasks (not listed for {} "
      "ms); requeueing them",
      pool.id, pool.reg.pool_name, pool.reg.node, tasks.size(), opts_.heartbeat_threshold.count());
  for (const auto id : tasks) pools_.release(pool, id);
  std::vector<std::uint64_t> touched;
  auto lost = ledger_.lose(
      tasks, AttemptStatus::PoolLost,
      fmt::format("pool {} on {} does not hold the task: its heartbeats did "
                  "not list it for {} ms (task lease expired)",
                  pool.reg.pool_name, pool.reg.node, opts_.heartbeat_threshold.count()),
      unix_now(), touched);
  for (auto& a : lost) {
    if (a.gave_up) log_gave_up(a.result);
    count_attempt(a.result.status);
    store_->record_attempt(store::AttemptRecord{pool.id, pool.reg.pool_name, std::move(a.result),
                                                to_store(a.batch), false});
  }
  for (auto id : touched) {
    if (Job* job = ledger_.find(id)) settle(*job);
  }
}

void Interchange::expire_pools(Clock::time_point now) {
  for (const auto& peer : pools_.silent(now, opts_.heartbeat_threshold)) {
    lose_pool(peer, fmt::format("silent for more than {} ms", opts_.heartbeat_threshold.count()));
  }
}

void Interchange::on_resource_sample(const Pool& pool, proto::ResourceSample& sample) {
  ++stats_.resource_samples;
  // Recorded only for jobs still running here: a finished job's report is final, and a sample
  // that arrives after it ended would make `fanout report` differ from the files written at
  // its end.
  std::vector<std::uint64_t> live;
  for (auto id : sample.job_ids) {
    if (ledger_.find(id) != nullptr && std::find(live.begin(), live.end(), id) == live.end()) {
      live.push_back(id);
    }
  }
  SPDLOG_LOGGER_DEBUG(log_, "pool {}: resource sample for {} of {} jobs", pool.id, live.size(),
                      sample.job_ids.size());
  if (live.empty()) return;
  store_->record_resources(store::ResourceRecord{pool.id, pool.reg.pool_name, pool.reg.node,
                                                 std::move(live), std::move(sample)});
}

// ---------------------------------------------------------------- jobs

void Interchange::settle(Job& job) {
  if (auto v = JobLedger::verdict(job)) end_job(job.id, *v);
}

void Interchange::log_gave_up(const proto::TaskResult& r) {
  log_->warn("job {}: mini-batch {} failed after {} tries: {}: {}", r.job_id, r.index, r.attempt,
             proto::to_string(static_cast<AttemptStatus>(r.status)),
             r.error_message.substr(0, 200));
}

void Interchange::end_job(std::uint64_t job_id, const Verdict& verdict) {
  auto ended = ledger_.end(job_id, verdict, unix_now());
  const Job& job = ended.job;
  if (job.id == 0) return;
  const std::string state = state_string(verdict.state);
  // Attempts still in pools were stopped: each is recorded CANCELLED under the task id its pool
  // held, and the pools that know the job are told to drop it; a result that still arrives is
  // discarded as late.
  for (auto& a : ended.stopped) {
    std::uint64_t pool_id = 0;
    std::string pool_name;
    if (Pool* p = pools_.find_id(a.pool_id)) {
      pools_.release(*p, a.result.task_id);
      pool_id = p->id;
      pool_name = p->reg.pool_name;
    }
    count_attempt(a.result.status);
    store_->record_attempt(
        store::AttemptRecord{pool_id, std::move(pool_name), std::move(a.result), "pending", false});
  }
  if (!ended.stopped.empty()) {
    log_->info("job {}: stopped {} running attempts", job.id, ended.stopped.size());
  }
  const std::string drop = proto::encode(proto::DropJob{job.id, state + ": " + verdict.reason});
  for (const auto& peer : pools_.forget_job(job.id)) {
    if (pool_sock_.send_to(peer, drop) == net::SendResult::Sent) ++stats_.frames_out;
  }
  store_->finish_job(job.id, state, verdict.reason, unix_now());
  // The client is told only what is durable, but the final flush (the writer's backlog, up to
  // a second on a busy machine) is not waited for here: this loop serves the other jobs
  // meanwhile, and finish_committed() goes on once the store has committed it.
  const std::uint64_t ticket = store_->flush_async();
  ended_.push_back(EndedJob{std::move(ended.job), state, verdict.reason, ticket});
  store_->wake_when_committed(ended_.front().ticket);
}

void Interchange::finish_committed() {
  std::uint64_t count = 0;
  while (::read(store_->committed_fd(), &count, sizeof count) < 0 && errno == EINTR) {
  }
  // Accepts first: a job's acceptance was queued before anything that can end it.
  while (!accepts_.empty() && store_->committed(accepts_.front().ticket)) {
    PendingAccept a = std::move(accepts_.front());
    accepts_.pop_front();
    send_client(a.peer, proto::encode(a.msg));
  }
  while (!ended_.empty() && store_->committed(ended_.front().ticket)) {
    EndedJob e = std::move(ended_.front());
    ended_.pop_front();
    finish_ended_job(e);
  }
  if (!accepts_.empty()) store_->wake_when_committed(accepts_.front().ticket);
  if (!ended_.empty()) store_->wake_when_committed(ended_.front().ticket);
}

void Interchange::finish_ended_job(EndedJob& e) {
  const Job& job = e.job;
  // The job's output file may have failed in what was just flushed: the store then ended it
  // failed (its rows taken back), whatever the verdict was, and so is the client told.
  for (auto& [id, why] : store_->take_failed_jobs()) store_failed_[id] = std::move(why);
  std::string end_state = std::move(e.state);
  std::string end_reason = std::move(e.reason);
  bool took_back = output_failed_.erase(job.id) > 0;
  if (auto f = store_failed_.find(job.id); f != store_failed_.end()) {
    took_back = true;
    end_state = state_string(JobState::Failed);
    end_reason = std::move(f->second);
    store_failed_.erase(f);
  }
  // Test hook (test builds only): dies as a SIGKILL here would, after the end is committed and
  // before the reports and JobEnded (docs/architecture.md, failure table).
  static const bool test_exit = test_hooks::env("FANOUT_TEST_EXIT_AFTER_JOB_END").has_value();
  if (test_exit) ::kill(::getpid(), SIGKILL);
  note_job_ended(job, end_state);
  proto::JobEnded msg{job.id, end_state, end_reason, progress_of(job)};
  if (took_back) {
    // The store took results back (their rows could not be written): its counts, which
    // `fanout status` and the reports show, are the job's, not what this loop had counted.
    try {
      if (auto c = store_->job_counts(job.id)) {
        msg.progress.succeeded = c->succeeded;
        msg.progress.failed = c->failed;
        msg.progress.items_succeeded = c->items_succeeded;
        msg.progress.items_failed = c->items_failed;
        msg.progress.attempts_failed = c->attempts_failed;
      }
    } catch (const Failure& f) {
      log_->warn("job {}: its counts could not be read from the store: {}", job.id, f.what());
    }
  }
  log_->info("job {} ({}) {}: {} ({} of {} mini-batches succeeded)", job.id, job.spec.name,
             end_state, end_reason, job.succeeded, job.total);
  // The report reads every attempt of the job: seconds for a large one. It is written on the
  // report thread from what was just flushed, while this loop serves the other jobs; the
  // clients get JobEnded once it is done.
  const bool report = !job.spec.log_dir.empty();
  if (report) reports_->submit(job.id, job.spec.log_dir);
  if (auto d = sessions_.close(std::move(msg), report)) deliver(std::move(*d));
}

void Interchange::on_reports_done() {
  for (auto& d : reports_->take_done()) {
    if (d.ok) store_->mark_reported(d.job_id, unix_now());
    auto delivery = sessions_.report_written(d.job_id, d.wall_s, d.cpu_s);
    if (!delivery) continue;
    if (d.ok) {
      SPDLOG_LOGGER_DEBUG(log_, "job {}: report written ({} files, {:.3f} s, {})", d.job_id,
                          d.files, d.wall_s,
                          d.built_while_running ? "built while it ran" : "in one pass");
    } else {
      log_->error("job {}: the report could not be written: {}", d.job_id, d.error);
    }
    deliver(std::move(*delivery));
  }
}

void Interchange::deliver(Delivery d) {
  auto frame = proto::encode(d.ended);
  for (const auto& c : d.clients) send_client(c, frame);
  sessions_.delivered(d.ended);
}

void Interchange::write_overviews() {
  const double now = unix_now();
  for (const auto& [id, job] : ledger_.jobs()) {
    if (job.spec.log_dir.empty() || job.started <= 0) continue;
    report::ProgressOverview ov;
    ov.job_id = id;
    ov.name = job.spec.name;
    ov.state = state_string(job.state);
    ov.total_known = job.submit_done;
    ov.total = job.total;
    ov.succeeded = job.succeeded;
    ov.failed = job.failed;
    ov.items_succeeded = job.items_succeeded;
    ov.items_failed = job.items_failed;
    ov.attempts_failed = job.attempts_failed;
    ov.started = job.started;
    ov.now = now;
    const std::string path = job.spec.log_dir + "/" + report::progress_overview_name(job.started);
    if (auto r = write_file_atomic(path, report::format_progress_overview(ov)); !r) {
      SPDLOG_LOGGER_DEBUG(log_, "job {}: progress overview not written: {}", id, r.error().message);
    }
  }
}

void Interchange::log_stats(bool force) {
  auto now = Clock::now();
  if (!force && now - last_stats_ < opts_.stats_interval) return;
  last_stats_ = now;
  if (zap_) stats_.refused_peers = zap_->refused();
  stats_.unauthenticated_cut = 0;
  stats_.accept_failures = 0;
  for (const auto* g : {client_guard_.get(), pool_guard_.get()}) {
    if (g == nullptr) continue;
    stats_.unauthenticated_cut += g->cut();
    stats_.accept_failures += g->accept_failures();
  }
  if (stats_ == logged_stats_) return;
  logged_stats_ = stats_;
  log_->info(
      "stats: frames in {} out {}, tasks {}, results {}, late {}, stale {}, bad frames {}, "
      "unregistered-pool frames {}, re-registrations {}, dropped submissions {}, "
      "would-block {}, pools lost {}, left {}, resource samples {}, refused peers {}, "
      "pool key mismatches {}, window-refused {}, leases expired {}, pools {}, jobs {}, "
      "unauthenticated cut {}, accept failures {}",
      stats_.frames_in, stats_.frames_out, stats_.tasks_dispatched, stats_.results,
      stats_.late_results, stats_.stale_results, stats_.bad_frames, stats_.unknown_pool_frames,
      stats_.reregistrations, stats_.dropped_submissions, stats_.would_block, stats_.pools_lost,
      stats_.pools_left, stats_.resource_samples, stats_.refused_peers, stats_.key_mismatch,
      stats_.window_refused, stats_.leases_expired, pools_.size(), ledger_.jobs().size(),
      stats_.unauthenticated_cut, stats_.accept_failures);
}

}  // namespace fanout::ix
