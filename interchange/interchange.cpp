// The interchange poll loop. See interchange.hpp and docs/architecture.md.
#include "interchange/interchange.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "fanout/protocol/codec.hpp"
#include "fanout/report/progress_overview.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::ix {

namespace {

using proto::AttemptStatus;

bool is_success(std::uint8_t status) {
  return status == static_cast<std::uint8_t>(AttemptStatus::RunDone);
}

}  // namespace

Interchange::Interchange(Options opts, Logger log)
    : opts_(std::move(opts)),
      log_(std::move(log)),
      clients_(ctx_, net::Socket::Kind::Router),
      pools_sock_(ctx_, net::Socket::Kind::Router) {
  client_ep_ = clients_.bind(opts_.client_endpoint);
  pool_ep_ = pools_sock_.bind(opts_.pool_endpoint);
  store_ = std::make_unique<store::TaskStore>(opts_.db_path, log_);
  reports_ = std::make_unique<ReportWriter>(opts_.db_path);
  next_job_id_ = store_->max_job_id() + 1;
  next_task_id_ = store_->max_attempt_id() + 1;
  // Pool ids are never reused within a store, across restarts too.
  next_pool_id_ = store_->max_pool_id() + 1;
  std::random_device rd;
  instance_ =
      (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ static_cast<std::uint64_t>(::getpid());
  if (instance_ == 0) instance_ = 1;
  recover();
  log_->info("interchange {} listening: clients {} pools {} store {}", FANOUT_VERSION, client_ep_,
             pool_ep_, opts_.db_path);
}

Interchange::~Interchange() = default;

void Interchange::recover() {
  for (auto& u : store_->recover()) {
    Job job;
    job.id = u.job_id;
    job.spec = std::move(u.spec);
    job.submit_done = u.submit_done;
    job.total = u.total;
    job.succeeded = u.succeeded;
    job.failed = u.failed;
    job.items_succeeded = u.items_succeeded;
    job.items_failed = u.items_failed;
    job.attempts_failed = u.attempts_failed;
    // Before SubmitEnd the store's total is 0: the known mini-batches are those recorded, which
    // are a prefix of the input (the client resumes submitting from there).
    if (!job.submit_done) job.total = u.succeeded + u.failed + u.remaining.size();
    job.accepted_at = Clock::now();
    job.last_finished_at = job.accepted_at;
    job.last_progress = job.accepted_at;
    for (std::size_t i = 0; i < u.remaining.size(); ++i) {
      job.ready.push_back(Pending{std::move(u.remaining[i]),
                                  i < u.remaining_tries.size() ? u.remaining_tries[i] : 0});
    }
    log_->info("resuming job {} ({}): {} of {} mini-batches left", job.id, job.spec.name,
               job.ready.size(), job.total);
    auto id = job.id;
    jobs_.emplace(id, std::move(job));
  }
  // A resumed job whose last mini-batch committed just before the crash ends now.
  std::vector<std::uint64_t> ids;
  for (auto& [id, job] : jobs_) ids.push_back(id);
  for (auto id : ids) maybe_finish(jobs_.at(id));
}

void Interchange::write_ready_file() {
  if (opts_.ready_file.empty()) return;
  std::string tmp = opts_.ready_file + ".tmp";
  {
    std::ofstream out(tmp);
    out << "client=" << client_ep_ << "\npool=" << pool_ep_ << "\npid=" << ::getpid() << "\n";
  }
  std::filesystem::rename(tmp, opts_.ready_file);
}

int Interchange::run() {
  write_ready_file();
  net::Poller poller;
  poller.add(clients_);
  poller.add(pools_sock_);
  const std::size_t reports_item = poller.add_fd(reports_->fd());
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
    if (!jobs_.empty()) wake = std::min(wake, now + opts_.progress_interval);
    auto timeout = std::chrono::duration_cast<Millis>(wake - now) + Millis(1);
    poller.wait(std::max(timeout, Millis(0)));

    // Drain both sockets, a bounded number of messages each, so neither side starves the other.
    for (int i = 0; i < 4096 && clients_.recv(msg); ++i) {
      ++stats_.frames_in;
      on_client(msg);
    }
    for (int i = 0; i < 4096 && pools_sock_.recv(msg); ++i) {
      ++stats_.frames_in;
      on_pool(msg);
    }
    dispatch();
    if (poller.readable(reports_item)) on_reports_done();

    now = Clock::now();
    check_job_timeouts(now);
    for (auto& [id, job] : jobs_) send_progress(job, false);
    if (now >= next_overview) {
      next_overview = now + opts_.overview_interval;
      write_overviews();
    }
    if (now >= next_heartbeat) {
      next_heartbeat = now + opts_.heartbeat_period;
      const std::string hb = proto::encode(proto::Heartbeat{});
      std::vector<std::string> peers;
      for (auto& [peer, pool] : pools_) peers.push_back(peer);
      for (auto& peer : peers) {
        auto it = pools_.find(peer);
        if (it != pools_.end()) send_pool(it->second, hb);
      }
      expire_pools(now);
      log_stats(false);
    }
    if (!store_->ok()) {
      log_->critical("store {} failed; stopping", opts_.db_path);
      return 1;
    }
    if (opts_.exit_when_idle && had_client_ && jobs_.empty() && reporting_.empty()) {
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
  // Reports being written are finished, and their clients told, before we go.
  if (!reporting_.empty()) {
    reports_->wait_idle();
    on_reports_done();
  }
  // Tell pools to go; let the frames leave before the sockets close.
  const std::string bye = proto::encode(proto::Shutdown{"interchange stopping"});
  const double now_unix = unix_now();
  for (auto& [peer, pool] : pools_) {
    (void)pools_sock_.send_to(peer, bye);
    // Told to go: they leave cleanly, which the store calls `gone` (not `lost`).
    store_->upsert_pool(store::PoolRecord{pool.id, pool.reg.pool_name, pool.reg.node,
                                          pool.reg.workers, pool.reg.prefetch, pool.reg.pid,
                                          pool.reg.build, "gone", pool.registered, now_unix});
  }
  pools_sock_.set_linger(Millis(500));
  clients_.set_linger(Millis(500));
  store_->flush();
  log_stats(true);
  log_->info("interchange stopped");
  return 0;
}

void Interchange::bad_frame(const char* side, const std::string& peer, const Error& err) {
  ++stats_.bad_frames;
  // A peer's garbage is logged once in full, then only counted (STYLE.md section 7).
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
  auto r = clients_.send_to(peer, frame);
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
      send_client(msg.peer, proto::encode(proto::Reject{h.error().message}));
    }
    return;
  }
  switch (h->type) {
    case proto::MsgType::SubmitJob: {
      auto m = proto::decode<proto::SubmitJob>(msg.frame);
      if (!m) return bad_frame("client", msg.peer, m.error());
      if (auto ok = validate_spec(m->spec); !ok) {
        send_client(msg.peer, proto::encode(proto::Reject{ok.error().message}));
        return;
      }
      had_client_ = true;
      Job job;
      job.id = next_job_id_++;
      job.spec = std::move(m->spec);
      job.clients.insert(msg.peer);
      job.last_progress = Clock::now();
      job.accepted_at = job.last_progress;
      job.last_finished_at = job.last_progress;
      job.started = unix_now();
      store_->create_job(job.id, job.spec, job.started);
      log_->info("job {} ({}) submitted: runtime {}, entry {}", job.id, job.spec.name,
                 job.spec.runtime, job.spec.entry_script);
      send_client(msg.peer, proto::encode(proto::JobAccepted{job.id, opts_.window}));
      auto id = job.id;
      jobs_.emplace(id, std::move(job));
      return;
    }
    case proto::MsgType::SubmitTasks: {
      auto m = proto::decode<proto::SubmitTasks>(msg.frame);
      if (!m) return bad_frame("client", msg.peer, m.error());
      auto it = jobs_.find(m->job_id);
      if (it == jobs_.end()) {
        send_client(msg.peer, proto::encode(proto::Reject{
                                  fmt::format("SubmitTasks: job {} is not running", m->job_id)}));
        return;
      }
      Job& job = it->second;
      if (job.submit_done) {
        ++stats_.dropped_submissions;
        return;
      }
      // Mini-batches are accepted in input order only: index == the count known. A client that
      // resumes after an interchange restart resends from the count it was told, and frames it
      // queued before it knew may arrive too, so duplicates and gaps are dropped here (and
      // counted), never recorded twice.
      std::vector<proto::MiniBatch> accepted;
      accepted.reserve(m->batches.size());
      for (auto& mb : m->batches) {
        if (mb.index != job.total) {
          ++stats_.dropped_submissions;
          continue;
        }
        ++job.total;
        job.ready.push_back(Pending{mb, 0});
        accepted.push_back(std::move(mb));
      }
      SPDLOG_LOGGER_DEBUG(log_, "job {}: {} mini-batches submitted", job.id, accepted.size());
      if (!accepted.empty()) store_->add_minibatches(job.id, std::move(accepted));
      return;
    }
    case proto::MsgType::SubmitEnd: {
      auto m = proto::decode<proto::SubmitEnd>(msg.frame);
      if (!m) return bad_frame("client", msg.peer, m.error());
      auto it = jobs_.find(m->job_id);
      if (it == jobs_.end()) return;
      Job& job = it->second;
      if (job.submit_done) return;
      if (m->total != job.total) {
        // Some mini-batches were lost on the way (an interchange restart while submitting): the
        // client resubmits them and sends SubmitEnd again.
        ++stats_.dropped_submissions;
        send_progress(job, true);
        return;
      }
      job.submit_done = true;
      store_->set_submit_done(job.id, job.total);
      log_->info("job {}: all {} mini-batches submitted", job.id, job.total);
      check_thresholds(job);  // allowed_failed_percent is known from now on
      if (auto j = jobs_.find(m->job_id); j != jobs_.end()) maybe_finish(j->second);
      return;
    }
    case proto::MsgType::Attach: {
      auto m = proto::decode<proto::Attach>(msg.frame);
      if (!m) return bad_frame("client", msg.peer, m.error());
      had_client_ = true;
      if (auto it = jobs_.find(m->job_id); it != jobs_.end()) {
        it->second.clients.insert(msg.peer);
        send_progress(it->second, true);
      } else if (auto r = reporting_.find(m->job_id); r != reporting_.end()) {
        r->second.clients.insert(msg.peer);  // told when the report is written
      } else if (auto e = ended_.find(m->job_id); e != ended_.end()) {
        send_client(msg.peer, proto::encode(e->second));
      } else {
        send_client(msg.peer, proto::encode(proto::Reject{
                                  fmt::format("Attach: job {} is not known here", m->job_id)}));
      }
      return;
    }
    case proto::MsgType::CancelJob: {
      auto m = proto::decode<proto::CancelJob>(msg.frame);
      if (!m) return bad_frame("client", msg.peer, m.error());
      if (auto it = jobs_.find(m->job_id); it != jobs_.end()) {
        it->second.clients.insert(msg.peer);
        end_job(it->second, "cancelled", m->reason.empty() ? "cancelled by a client" : m->reason);
      }
      return;
    }
    case proto::MsgType::Shutdown: {
      auto m = proto::decode<proto::Shutdown>(msg.frame);
      if (!m) return bad_frame("client", msg.peer, m.error());
      if (opts_.shutdown_token.empty() || m->token != opts_.shutdown_token) {
        bad_frame("client", msg.peer,
                  Error{ErrorCode::Protocol, "Shutdown: refused (no or wrong token)"});
        return;
      }
      log_->info("shutdown requested by the client that started us");
      stop();
      return;
    }
    case proto::MsgType::Heartbeat:
      return;
    default:
      bad_frame("client", msg.peer,
                Error{ErrorCode::Protocol,
                      "client sent " + proto::type_name(static_cast<std::uint8_t>(h->type)) +
                          ", which only pools or the interchange send"});
  }
}

Expected<void> Interchange::validate_spec(const proto::JobSpec& spec) const {
  namespace fs = std::filesystem;
  auto bad = [](const std::string& field, const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "SubmitJob: " + field + ": " + what);
  };
  if (spec.name.empty()) return bad("name", "must not be empty");
  if (spec.runtime != "python" && spec.runtime != "command" && spec.runtime != "native") {
    return bad("runtime", "expected python, command or native (got '" + spec.runtime + "')");
  }
  if (spec.max_tries == 0) return bad("max_tries", "must be >= 1");
  std::error_code ec;
  if (!fs::path(spec.code_dir).is_absolute() || !fs::is_directory(spec.code_dir, ec)) {
    return bad("code_dir", "expected an existing absolute folder (got '" + spec.code_dir + "')");
  }
  if (!spec.log_dir.empty()) {
    if (!fs::path(spec.log_dir).is_absolute()) {
      return bad("log_dir", "expected an absolute path (got '" + spec.log_dir + "')");
    }
    if (auto r = make_dirs(spec.log_dir); !r) return bad("log_dir", r.error().message);
  }
  if (!spec.output_path.empty()) {
    const fs::path out(spec.output_path);
    if (!out.is_absolute() || !out.has_filename()) {
      return bad("output_path", "expected an absolute file path (got '" + spec.output_path + "')");
    }
    if (auto r = make_dirs(out.parent_path().string()); !r)
      return bad("output_path", r.error().message);
    std::ofstream probe(spec.output_path, std::ios::app);
    if (!probe) return bad("output_path", spec.output_path + ": cannot be opened for writing");
  }
  return {};
}

// ---------------------------------------------------------------- pools

bool Interchange::send_pool(Pool& pool, const std::string& frame) {
  const std::string peer = pool.peer;  // lose_pool below destroys `pool`
  auto r = pools_sock_.send_to(peer, frame);
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
      (void)pools_sock_.send_to(msg.peer, proto::encode(proto::Reject{h.error().message}));
    }
    return;
  }
  if (h->type == proto::MsgType::Register) {
    auto m = proto::decode<proto::Register>(msg.frame);
    if (!m) return bad_frame("pool", msg.peer, m.error());
    on_register(msg.peer, *m);
    return;
  }
  auto it = pools_.find(msg.peer);
  if (it == pools_.end()) {
    // Unknown peer: after an interchange restart, or a pool declared lost. It must register
    // again; whatever it sends before that is not trusted.
    ++stats_.unknown_pool_frames;
    (void)pools_sock_.send_to(msg.peer,
                              proto::encode(proto::Reject{"not registered: send Register"}));
    return;
  }
  Pool& pool = it->second;
  pool.last_seen = Clock::now();
  switch (h->type) {
    case proto::MsgType::Heartbeat: {
      auto m = proto::decode<proto::Heartbeat>(msg.frame);
      if (!m) return bad_frame("pool", msg.peer, m.error());
      pool.capacity = m->capacity;
      return;
    }
    case proto::MsgType::ResultBatch: {
      auto m = proto::decode<proto::ResultBatch>(msg.frame);
      if (!m) return bad_frame("pool", msg.peer, m.error());
      pool.capacity = m->capacity;
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
                Error{ErrorCode::Protocol,
                      "pool sent " + proto::type_name(static_cast<std::uint8_t>(h->type)) +
                          ", which pools never send"});
  }
}

void Interchange::on_register(const std::string& peer, const proto::Register& reg) {
  if (auto it = pools_.find(peer); it != pools_.end()) {
    Pool& known = it->second;
    if (known.tasks.empty() && reg.workers > 0 && reg.pid == known.reg.pid &&
        reg.pool_name == known.reg.pool_name && reg.workers == known.reg.workers &&
        reg.prefetch == known.reg.prefetch) {
      // The same process asking again with nothing to lose: Registers it queued while the
      // interchange was away arrive in a burst. Answer each with the same registration.
      known.last_seen = Clock::now();
      send_pool(known, proto::encode(proto::Registered{
                           known.id, static_cast<std::uint32_t>(opts_.heartbeat_period.count()),
                           static_cast<std::uint32_t>(opts_.heartbeat_threshold.count())}));
      return;
    }
    // The same pool registering again lost its state (restart): what it held is requeued.
    ++stats_.reregistrations;
    lose_pool(peer, "registered again");
  }
  if (reg.workers == 0) {
    (void)pools_sock_.send_to(peer, proto::encode(proto::Reject{"Register: workers must be >= 1"}));
    return;
  }
  Pool pool;
  pool.id = next_pool_id_++;
  pool.peer = peer;
  pool.reg = reg;
  pool.capacity = reg.workers + reg.prefetch;
  pool.last_seen = Clock::now();
  pool.registered = unix_now();
  store_->upsert_pool(store::PoolRecord{pool.id, reg.pool_name, reg.node, reg.workers, reg.prefetch,
                                        reg.pid, reg.build, "connected", pool.registered,
                                        pool.registered});
  log_->info("pool {} registered: {} on {}, {} workers, prefetch {}", pool.id, reg.pool_name,
             reg.node, reg.workers, reg.prefetch);
  auto reply = proto::encode(
      proto::Registered{pool.id, static_cast<std::uint32_t>(opts_.heartbeat_period.count()),
                        static_cast<std::uint32_t>(opts_.heartbeat_threshold.count())});
  auto [it, inserted] = pools_.emplace(peer, std::move(pool));
  send_pool(it->second, reply);
}

void Interchange::dispatch() {
  if (jobs_.empty() || pools_.empty()) return;
  std::vector<std::string> peers;
  peers.reserve(pools_.size());
  for (auto& [peer, pool] : pools_) peers.push_back(peer);
  for (const auto& peer : peers) {
    while (true) {
      auto pit = pools_.find(peer);
      if (pit == pools_.end()) break;
      Pool& pool = pit->second;
      if (pool.tasks.size() >= pool.capacity) break;
      std::size_t room = std::min<std::size_t>(pool.capacity - pool.tasks.size(), opts_.max_batch);
      proto::TaskBatch batch;
      bool blocked = false;
      // Oldest job first; a job whose queue is empty yields to the next.
      for (auto& [id, job] : jobs_) {
        if (job.ready.empty()) continue;
        if (pool.jobs_known.count(id) == 0) {
          auto r = pools_sock_.send_to(peer, proto::encode(proto::JobInfo{id, job.spec}, 512));
          if (r != net::SendResult::Sent) {
            blocked = true;
            break;
          }
          pool.jobs_known.insert(id);
        }
        while (!job.ready.empty() && batch.tasks.size() < room) {
          Pending p = std::move(job.ready.front());
          job.ready.pop_front();
          proto::Task t;
          t.task_id = next_task_id_++;
          t.job_id = id;
          t.index = p.mb.index;
          t.attempt = p.tries + 1;
          t.items = p.mb.items;
          t.detail = p.mb.detail;
          in_flight_.emplace(t.task_id, InFlight{peer, id, t.attempt, std::move(p.mb)});
          batch.tasks.push_back(std::move(t));
        }
        if (batch.tasks.size() >= room) break;
      }
      if (batch.tasks.empty() && !blocked) return;  // nothing left to dispatch for anyone
      net::SendResult r = net::SendResult::WouldBlock;
      if (!batch.tasks.empty()) {
        r = pools_sock_.send_to(peer, proto::encode(batch, 64 + batch.tasks.size() * 64));
      }
      if (r != net::SendResult::Sent) {
        // Not queued: undo, so the tasks go to another pool or the next round, with no try used.
        for (auto it = batch.tasks.rbegin(); it != batch.tasks.rend(); ++it) {
          auto fl = in_flight_.find(it->task_id);
          jobs_.at(it->job_id).ready.push_front(Pending{std::move(fl->second.mb), it->attempt - 1});
          in_flight_.erase(fl);
        }
        ++stats_.would_block;
        if (r == net::SendResult::Unreachable) lose_pool(peer, "connection closed");
        break;
      }
      ++stats_.frames_out;
      for (const auto& t : batch.tasks) {
        store_->mark_running(t.job_id, t.index, t.attempt);
        pool.tasks.insert(t.task_id);
        Job& job = jobs_.at(t.job_id);
        ++job.in_flight;
        job.dispatched = true;
      }
      stats_.tasks_dispatched += batch.tasks.size();
      SPDLOG_LOGGER_DEBUG(log_, "sent {} tasks to pool {}", batch.tasks.size(), pool.id);
    }
  }
}

void Interchange::on_results(Pool& pool, proto::ResultBatch& batch) {
  SPDLOG_LOGGER_DEBUG(log_, "pool {} returned {} results", pool.id, batch.results.size());
  for (auto& r : batch.results) on_result(pool, r);
}

void Interchange::on_result(Pool& pool, proto::TaskResult& r) {
  ++stats_.results;
  auto fl_it = in_flight_.find(r.task_id);
  if (fl_it == in_flight_.end() || fl_it->second.pool_peer != pool.peer ||
      fl_it->second.job_id != r.job_id || fl_it->second.mb.index != r.index) {
    // Reassigned after this pool was declared lost, or the job ended: never written twice.
    ++stats_.late_results;
    SPDLOG_LOGGER_TRACE(log_, "late result for task {}", r.task_id);
    return;
  }
  InFlight fl = std::move(fl_it->second);
  in_flight_.erase(fl_it);
  pool.tasks.erase(r.task_id);
  auto job_it = jobs_.find(fl.job_id);
  if (job_it == jobs_.end()) {
    ++stats_.late_results;
    return;
  }
  Job& job = job_it->second;
  --job.in_flight;
  job.last_finished_at = Clock::now();
  r.attempt = fl.attempt;
  r.items = fl.mb.items.size();
  if (is_success(r.status)) {
    ++job.succeeded;
    job.items_succeeded += r.succeeded;
    job.items_failed += r.failed;
    store_->record_attempt(store::AttemptRecord{pool.id, pool.reg.pool_name, std::move(r),
                                                "succeeded", !job.spec.output_path.empty()});
  } else {
    const bool retried = fail_attempt(job, Pending{std::move(fl.mb), fl.attempt}, r);
    store_->record_attempt(store::AttemptRecord{pool.id, pool.reg.pool_name, std::move(r),
                                                retried ? "pending" : "failed", false});
  }
  // check_thresholds may end the job, which erases it: look it up again.
  const auto job_id = job.id;
  check_thresholds(job);
  if (auto it = jobs_.find(job_id); it != jobs_.end()) maybe_finish(it->second);
}

// Decides what a failed attempt means: retried (pushed to the front of the queue, so retries
// are not starved by a long queue) or, out of tries, a failed mini-batch.
bool Interchange::fail_attempt(Job& job, Pending p, const proto::TaskResult& r) {
  ++job.attempts_failed;
  if (p.tries < job.spec.max_tries) {
    job.ready.push_front(std::move(p));
    return true;
  }
  ++job.failed;
  job.items_failed += r.items;
  log_->warn("job {}: mini-batch {} failed after {} tries: {}: {}", job.id, r.index, p.tries,
             proto::to_string(static_cast<AttemptStatus>(r.status)),
             r.error_message.substr(0, 200));
  return false;
}

void Interchange::requeue_lost(Job& job, InFlight fl, AttemptStatus status,
                               const std::string& why) {
  proto::TaskResult r;
  r.job_id = job.id;
  r.index = fl.mb.index;
  r.attempt = fl.attempt;
  r.task_id = next_task_id_++;
  r.status = static_cast<std::uint8_t>(status);
  r.items = fl.mb.items.size();
  r.failed = r.items;
  r.error_category = proto::to_string(status);
  r.error_message = why;
  r.start = unix_now();
  --job.in_flight;
  const bool retried = fail_attempt(job, Pending{std::move(fl.mb), fl.attempt}, r);
  store_->record_attempt(
      store::AttemptRecord{0, "", std::move(r), retried ? "pending" : "failed", false});
}

void Interchange::lose_pool(const std::string& peer, const std::string& why, bool left) {
  auto it = pools_.find(peer);
  if (it == pools_.end()) return;
  Pool pool = std::move(it->second);
  pools_.erase(it);
  const char* what = left ? "left" : "lost";
  ++(left ? stats_.pools_left : stats_.pools_lost);
  log_->warn("pool {} ({} on {}) {}: {}; requeueing {} tasks", pool.id, pool.reg.pool_name,
             pool.reg.node, what, why, pool.tasks.size());
  store_->upsert_pool(store::PoolRecord{
      pool.id, pool.reg.pool_name, pool.reg.node, pool.reg.workers, pool.reg.prefetch, pool.reg.pid,
      pool.reg.build, left ? "gone" : "lost", pool.registered, unix_now()});
  std::vector<std::uint64_t> tasks(pool.tasks.begin(), pool.tasks.end());
  std::sort(tasks.begin(), tasks.end(), std::greater<>());  // push_front keeps order
  std::vector<std::uint64_t> touched;
  for (auto tid : tasks) {
    auto fl_it = in_flight_.find(tid);
    if (fl_it == in_flight_.end()) continue;
    InFlight fl = std::move(fl_it->second);
    in_flight_.erase(fl_it);
    auto job_it = jobs_.find(fl.job_id);
    if (job_it == jobs_.end()) continue;
    requeue_lost(job_it->second, std::move(fl), AttemptStatus::PoolLost,
                 fmt::format("pool {} on {} {}: {}", pool.reg.pool_name, pool.reg.node, what, why));
    touched.push_back(job_it->first);
  }
  for (auto id : touched) {
    if (auto j = jobs_.find(id); j != jobs_.end()) {
      check_thresholds(j->second);
      if (auto k = jobs_.find(id); k != jobs_.end()) maybe_finish(k->second);
    }
  }
}

void Interchange::expire_pools(Clock::time_point now) {
  std::vector<std::string> silent;
  for (auto& [peer, pool] : pools_) {
    if (now - pool.last_seen > opts_.heartbeat_threshold) silent.push_back(peer);
  }
  for (auto& peer : silent) {
    lose_pool(peer, fmt::format("silent for more than {} ms", opts_.heartbeat_threshold.count()));
  }
}

// ---------------------------------------------------------------- job outcome

void Interchange::check_thresholds(Job& job) {
  if (job.state != "running") return;
  const auto& s = job.spec;
  if (s.error_threshold >= 0 && job.items_failed > static_cast<std::uint64_t>(s.error_threshold)) {
    end_job(job, "failed",
            fmt::format("error_threshold exceeded: {} failed items > {}", job.items_failed,
                        s.error_threshold));
    return;
  }
  if (s.mini_batch_error_threshold >= 0 &&
      job.failed > static_cast<std::uint64_t>(s.mini_batch_error_threshold)) {
    end_job(job, "failed",
            fmt::format("mini_batch_error_threshold exceeded: {} failed mini-batches > {}",
                        job.failed, s.mini_batch_error_threshold));
    return;
  }
  // allowed_failed_percent is a share of the whole job, known once every mini-batch is
  // submitted; from then on failures only add up, so crossing it ends the job at once.
  if (job.submit_done && job.total > 0 && s.allowed_failed_percent >= 0 &&
      s.allowed_failed_percent < 100) {
    const double pct = 100.0 * static_cast<double>(job.failed) / static_cast<double>(job.total);
    if (pct > s.allowed_failed_percent) {
      end_job(job, "failed",
              fmt::format("allowed_failed_percent exceeded: {:.1f}% of mini-batches failed > {}%",
                          pct, s.allowed_failed_percent));
    }
  }
}

void Interchange::check_job_timeouts(Clock::time_point now) {
  using Secs = std::chrono::duration<double>;
  std::vector<std::pair<std::uint64_t, std::string>> expired;
  for (auto& [id, job] : jobs_) {
    const auto& s = job.spec;
    // ParallelRunStep's first_task_creation_timeout: the job never got a mini-batch started
    // (no pool, or no input submitted).
    if (!job.dispatched && s.first_task_creation_timeout_s > 0 &&
        now - job.accepted_at > Secs(s.first_task_creation_timeout_s)) {
      expired.emplace_back(id, fmt::format("first_task_creation_timeout exceeded: no mini-batch "
                                           "started within {} s",
                                           s.first_task_creation_timeout_s));
      continue;
    }
    // progress_update_timeout: no attempt of the job finished (succeeded or failed) for that
    // long. A hung job, or one whose client stopped submitting, ends instead of waiting forever.
    if (s.progress_update_timeout_s > 0 &&
        now - job.last_finished_at > Secs(s.progress_update_timeout_s)) {
      expired.emplace_back(id, fmt::format("progress_update_timeout exceeded: no mini-batch "
                                           "finished for {} s",
                                           s.progress_update_timeout_s));
    }
  }
  for (auto& [id, reason] : expired) {
    if (auto it = jobs_.find(id); it != jobs_.end()) end_job(it->second, "failed", reason);
  }
}

void Interchange::maybe_finish(Job& job) {
  if (job.state != "running" || !job.submit_done) return;
  if (job.succeeded + job.failed < job.total) return;
  // allowed_failed_percent, for a job whose failures came before its SubmitEnd. Ending the job
  // erases it: look it up again.
  const auto job_id = job.id;
  check_thresholds(job);
  if (jobs_.count(job_id) == 0) return;
  end_job(job, "succeeded",
          job.failed == 0
              ? std::string("all mini-batches succeeded")
              : fmt::format("{} mini-batches failed, within the thresholds", job.failed));
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
  std::uint32_t workers = 0;
  for (auto& [peer, pool] : pools_) workers += pool.reg.workers;
  p.workers = workers;
  p.instance = instance_;
  return p;
}

void Interchange::send_progress(Job& job, bool force) {
  if (job.clients.empty()) return;
  auto now = Clock::now();
  const std::uint64_t finished = job.succeeded + job.failed;
  const bool credit_due = finished - job.finished_at_last_progress >= opts_.window / 4;
  if (!force && !credit_due) {
    if (finished == job.finished_at_last_progress) return;
    if (now - job.last_progress < opts_.progress_interval) return;
  }
  job.last_progress = now;
  job.finished_at_last_progress = finished;
  auto frame = proto::encode(progress_of(job));
  for (const auto& c : job.clients) send_client(c, frame);
}

void Interchange::end_job(Job& job, const std::string& state, const std::string& reason) {
  job.state = state;
  // Tasks still in pools are stopped: each becomes a CANCELLED attempt now, and the pools that
  // know the job are told to drop it (DropJob); a result that still arrives is discarded as late.
  std::vector<std::pair<std::uint64_t, InFlight>> stopped;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (it->second.job_id == job.id) {
      if (auto p = pools_.find(it->second.pool_peer); p != pools_.end()) {
        p->second.tasks.erase(it->first);
      }
      stopped.emplace_back(it->first, std::move(it->second));
      it = in_flight_.erase(it);
    } else {
      ++it;
    }
  }
  std::sort(stopped.begin(), stopped.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [task_id, fl] : stopped) {
    proto::TaskResult r;
    r.task_id = task_id;
    r.job_id = job.id;
    r.index = fl.mb.index;
    r.attempt = fl.attempt;
    r.status = static_cast<std::uint8_t>(AttemptStatus::Cancelled);
    r.items = fl.mb.items.size();
    r.failed = r.items;
    r.error_category = "CANCELLED";
    r.error_message = fmt::format("stopped: the job {}: {}", state, reason);
    r.start = unix_now();
    std::uint64_t pool_id = 0;
    std::string pool_name;
    if (auto p = pools_.find(fl.pool_peer); p != pools_.end()) {
      pool_id = p->second.id;
      pool_name = p->second.reg.pool_name;
    }
    store_->record_attempt(
        store::AttemptRecord{pool_id, std::move(pool_name), std::move(r), "pending", false});
  }
  job.in_flight = 0;
  if (!stopped.empty()) {
    log_->info("job {}: stopped {} running attempts", job.id, stopped.size());
  }
  const std::string drop = proto::encode(proto::DropJob{job.id, state + ": " + reason});
  for (auto& [peer, pool] : pools_) {
    if (pool.jobs_known.erase(job.id) == 0) continue;
    if (pools_sock_.send_to(peer, drop) == net::SendResult::Sent) ++stats_.frames_out;
  }
  job.ready.clear();
  store_->finish_job(job.id, state, reason, unix_now());
  store_->flush();  // the client is told only what is durable
  proto::JobEnded ended{job.id, state, reason, progress_of(job)};
  log_->info("job {} ({}) {}: {} ({} of {} mini-batches succeeded)", job.id, job.spec.name, state,
             reason, job.succeeded, job.total);
  if (job.spec.log_dir.empty()) {
    deliver_ended(std::move(ended), job.clients);
  } else {
    // The report reads every attempt of the job: seconds for a large one. It is written on the
    // report thread from what was just flushed, while this loop serves the other jobs.
    reports_->submit(job.id, job.spec.log_dir);
    reporting_[job.id] = Reporting{std::move(ended), std::move(job.clients)};
  }
  jobs_.erase(job.id);
}

void Interchange::on_reports_done() {
  for (auto& d : reports_->take_done()) {
    auto it = reporting_.find(d.job_id);
    if (it == reporting_.end()) continue;
    if (d.ok) {
      SPDLOG_LOGGER_DEBUG(log_, "job {}: report written ({} files, {:.3f} s)", d.job_id, d.files,
                          d.wall_s);
    } else {
      log_->error("job {}: the report could not be written: {}", d.job_id, d.error);
    }
    Reporting rep = std::move(it->second);
    reporting_.erase(it);
    rep.ended.report_s = d.wall_s;
    rep.ended.report_cpu_s = d.cpu_s;
    deliver_ended(std::move(rep.ended), rep.clients);
  }
}

void Interchange::deliver_ended(proto::JobEnded ended,
                                const std::unordered_set<std::string>& clients) {
  auto frame = proto::encode(ended);
  for (const auto& c : clients) send_client(c, frame);
  ended_[ended.job_id] = std::move(ended);
}

void Interchange::on_resource_sample(const Pool& pool, proto::ResourceSample& sample) {
  ++stats_.resource_samples;
  // Recorded only for jobs still running here: a finished job's report is final, and a sample
  // that arrives after it ended would make `fanout report` differ from the files written at
  // its end.
  std::vector<std::uint64_t> live;
  for (auto id : sample.job_ids) {
    if (jobs_.count(id) != 0 && std::find(live.begin(), live.end(), id) == live.end()) {
      live.push_back(id);
    }
  }
  SPDLOG_LOGGER_DEBUG(log_, "pool {}: resource sample for {} of {} jobs", pool.id, live.size(),
                      sample.job_ids.size());
  if (live.empty()) return;
  store_->record_resources(store::ResourceRecord{pool.id, pool.reg.pool_name, pool.reg.node,
                                                 std::move(live), std::move(sample)});
}

void Interchange::write_overviews() {
  const double now = unix_now();
  for (const auto& [id, job] : jobs_) {
    if (job.spec.log_dir.empty() || job.started <= 0) continue;
    report::ProgressOverview ov;
    ov.job_id = id;
    ov.name = job.spec.name;
    ov.state = job.state;
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
  if (stats_ == logged_stats_) return;
  logged_stats_ = stats_;
  log_->info(
      "stats: frames in {} out {}, tasks {}, results {}, late {}, bad frames {}, "
      "unregistered-pool frames {}, re-registrations {}, dropped submissions {}, "
      "would-block {}, pools lost {}, left {}, resource samples {}, pools {}, jobs {}",
      stats_.frames_in, stats_.frames_out, stats_.tasks_dispatched, stats_.results,
      stats_.late_results, stats_.bad_frames, stats_.unknown_pool_frames, stats_.reregistrations,
      stats_.dropped_submissions, stats_.would_block, stats_.pools_lost, stats_.pools_left,
      stats_.resource_samples, pools_.size(), jobs_.size());
}

}  // namespace fanout::ix
