// The pool manager loop. See pool.hpp.
#include "pool/pool.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <thread>

#include "fanout/protocol/codec.hpp"
#include "fanout/protocol/error_categories.hpp"
#include "fanout/util/fs.hpp"
#include "fanout/util/test_hooks.hpp"
#include "pool/launch.hpp"
#include "pool/result_frames.hpp"
#include "pool/wall_clock.hpp"
#include "pool/worker_pipe.hpp"
#include "pool/worker_placement.hpp"

namespace fanout::pool {

namespace {

using proto::AttemptStatus;

// Cap of the doubling back-off between unanswered Registers.
constexpr std::chrono::milliseconds kMaxRegisterBackoff{30000};

Clock::duration to_duration(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

static_assert(pipe::kInputChangedCategory == proto::kInputChangedCategory,
              "the worker pipe and the protocol name a changed input alike");

// "ValueError: bad input\nTraceback..." -> "ValueError".
std::string category_of(const std::string& text, const char* fallback) {
  auto nl = text.find('\n');
  std::string first = text.substr(0, nl);
  auto colon = first.find(':');
  if (colon == std::string::npos || colon == 0 || colon > 80) return fallback;
  return first.substr(0, colon);
}

// The worker count `opts` asks for, bounded by the node's MemAvailable at mem_per_worker_gib
// each; a bound that lowers it is said once, at start.
std::uint32_t memory_capped_workers(const Options& opts, const Logger& log) {
  if (opts.mem_per_worker_gib <= 0) return opts.workers;
  const MemInfo mem = parse_meminfo(read_proc_file("/proc/meminfo"));
  const auto n = cap_workers_by_memory(opts.workers, opts.mem_per_worker_gib, mem.available_kb);
  if (n < opts.workers) {
    log->warn(
        "starting {} workers, not {}: MemAvailable is {} and each worker is given {} GiB "
        "(mem_per_worker)",
        n, opts.workers, format_memory(mem.available_kb * 1024), opts.mem_per_worker_gib);
  }
  return n;
}

// The options with their defaults filled in (name, node; place_workers() sets the count).
Options with_defaults(Options opts) {
  if (opts.name.empty()) opts.name = fmt::format("{}-{}", host_name(), ::getpid());
  if (opts.node.empty()) opts.node = host_name();
  return opts;
}

// The placement of the pool's workers, which fixes their count (opts.workers is set to it).
// Logged once: how many workers, why that many, and what each slot gets.
PoolPlacement place_workers(Options& opts, const Logger& log) {
  if (auto ok = check_placement(opts.placement); !ok) throw Failure(ok.error());
  const NodeOffer offer = node_offer(opts.placement);
  std::string why;
  PoolPlacement p = plan_placement(opts.placement, offer, opts.workers, why);
  if (opts.workers == 0) {
    log->info("{} workers ({})", p.workers, why);
  } else if (p.workers != opts.workers) {
    log->warn("{} workers instead of the {} asked for ({})", p.workers, opts.workers, why);
  }
  opts.workers = p.workers;
  // Numbered from the planned count, before the memory bound: MemAvailable differs from one
  // pool's start to the next, the devices and cores do not.
  if (opts.pool_index > 0) opts.first_process = first_process_of(opts.pool_index, p.workers);
  // The memory bound comes last: it can only lower the count the devices and cores allow.
  opts.workers = memory_capped_workers(opts, log);
  if (opts.workers < p.workers) {
    p.workers = opts.workers;
    p.slots.resize(opts.workers);
  }
  if (!offer.devices.empty()) {
    std::string devices;
    for (const auto& s : p.slots) devices += (devices.empty() ? "" : " ") + s.device;
    log->info("accelerators from {}: {} per worker slot, {} ({} workers per accelerator)",
              offer.devices_from, p.device_variable, devices,
              opts.placement.workers_per_accelerator);
  }
  if (opts.placement.cpu_affinity != "none") {
    std::string cpus;
    for (const auto& s : p.slots) cpus += (cpus.empty() ? "" : " ") + format_cpu_list(s.cpus);
    log->info("cpu_affinity {}: CPUs per worker slot {}", opts.placement.cpu_affinity, cpus);
  }
  return p;
}

}  // namespace

Pool::Pool(Options opts, Logger log)
    : opts_(with_defaults(std::move(opts))),
      log_(std::move(log)),
      placement_(place_workers(opts_, log_)),
      placed_(opts_.workers),
      sock_(ctx_, net::Socket::Kind::Dealer, opts_.name),
      hb_period_(opts_.heartbeat_period),
      hb_threshold_(opts_.heartbeat_threshold),
      planner_(PlannerConfig{opts_.workers, opts_.prefetch, opts_.poll,
                             opts_.max_minibatches_per_worker}),
      memory_(opts_.worker_memory_limit_bytes) {
  slots_.resize(opts_.workers);
  if (const auto n = test_hooks::env("FANOUT_TEST_SWALLOW_TASKS")) {
    swallow_ = std::strtoull(std::string(*n).c_str(), nullptr, 10);
  }
  net::connect_secure(sock_, opts_.interchange, opts_.security, net::Role::Pool);
}

Pool::~Pool() {
  // Workers get SIGTERM from ChildProcess and are reaped.
  for (auto& w : slots_) {
    if (w) w->process().set_grace(std::chrono::milliseconds(500));
  }
}

void Pool::send(const std::string& frame) {
  // The DEALER queues for a reconnecting interchange up to its high-water mark; beyond that the
  // frame would be lost, which the interchange's liveness check turns into a requeue.
  if (sock_.send(frame) != net::SendResult::Sent) {
    ++stats_.bad_frames;
    log_->warn("interchange is not reading: a frame could not be queued");
  }
  last_sent_ = Clock::now();
}

proto::Heartbeat Pool::heartbeat() const {
  // The tasks held renew their leases at the interchange (interchange/peer_bounds.hpp). Tasks
  // forgotten at a re-registration are not held: the interchange requeued them.
  proto::Heartbeat hb{planner_.capacity(), true, {}};
  hb.held.reserve(planner_.queue().size() + results_.size() + slots_.size());
  for (const auto& t : planner_.queue()) hb.held.push_back(t.task_id);
  for (const auto& r : results_) hb.held.push_back(r.task_id);
  for (const auto& w : slots_) {
    if (!w) continue;
    if (const auto& t = w->tasks().task()) hb.held.push_back(t->task_id);
    for (const auto& t : w->tasks().queued()) hb.held.push_back(t.task_id);
  }
  return hb;
}

void Pool::send_register() {
  proto::Register reg{opts_.name,     opts_.node,     opts_.workers,
                      opts_.prefetch, FANOUT_VERSION, static_cast<std::int64_t>(::getpid())};
  send(proto::encode(reg));
  last_register_ = Clock::now();
  ++stats_.registrations;
}

void Pool::reregister(const char* why) {
  log_->warn("{}; registering again", why);
  registered_ = false;
  planner_.forget_queue();
  for (auto& w : slots_) {
    // Their results would be discarded anyway.
    if (w) w->forget_tasks();
  }
  register_backoff_ = std::max(hb_period_, Millis(1000));
  send_register();
}

void Pool::drop_job(std::uint64_t job_id, const std::string& reason) {
  ++stats_.jobs_dropped;
  std::size_t queued = planner_.job_dropped(job_id), stopped = 0;
  const auto now = Clock::now();
  for (auto& w : slots_) {
    if (!w || w->job_id() != job_id || w->state() == Worker::State::Stopping) continue;
    // The interchange recorded the running attempts as CANCELLED: nothing is reported for them,
    // nor for tasks waiting in the worker's pipe (they must not be requeued when it exits).
    queued += w->tasks().queued().size();
    if (w->tasks().task()) ++stopped;
    w->cancel(now + opts_.kill_grace);
  }
  jobs_.erase(job_id);
  if (auto it = fork_servers_.find(job_id); it != fork_servers_.end()) {
    retiring_servers_.insert(fork_servers_.extract(it));
    retire_fork_servers();
  }
  spawned_jobs_.erase(job_id);
  log_->info("job {} dropped ({}): stopped {} running tasks, dropped {} queued", job_id, reason,
             stopped, queued);
}

int Pool::run() {
  net::Poller poller;
  poller.add(sock_);
  last_heard_ = Clock::now();
  last_stats_ = last_heard_;
  if (opts_.warm_python) {
    auto warm = WarmInterpreter::start(opts_.python.empty() ? kDefaultPython : opts_.python,
                                       opts_.shim_dir);
    if (warm) {
      warm_ = std::move(*warm);
    } else {
      log_->warn("cannot start a warm interpreter: {}", warm.error().message);
    }
  }
  send_register();
  int rc = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    if ((signals_.load(std::memory_order_relaxed) > 0 || walltime_due()) &&
        drain_over(Clock::now())) {
      break;
    }
    const std::vector<std::size_t> fd_slots = wait_for_events(poller);
    note_freeze();
    read_interchange();
    read_workers(poller, fd_slots);
    const auto now = Clock::now();
    reap_ended(now);
    check_deadlines(now);
    check_memory(now);
    cap_user_logs(now);
    assign();
    run_monitor(now);
    if (!results_.empty() && first_result_ == Clock::time_point{}) first_result_ = now;
    if (planner_.results_due(results_.size(), first_result_, now)) flush_results();
    if (now - last_sent_ >= hb_period_) send(proto::encode(heartbeat()));
    if (!keep_registered(now)) {
      rc = 1;
      break;
    }
    log_stats(false);
  }
  flush_results();
  if (registered_ && !told_to_stop_ && rc == 0) say_goodbye();
  warm_.reset();
  stop_workers();
  cap_user_logs(Clock::now(), true);  // what the last workers wrote before they stopped
  log_stats(true);
  log_->info("pool {} stopped", opts_.name);
  return rc;
}

std::vector<std::size_t> Pool::wait_for_events(net::Poller& poller) {
  std::vector<int> fds;
  std::vector<std::size_t> fd_slots;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i]) {
      fds.push_back(slots_[i]->read_fd());
      fd_slots.push_back(i);
    }
  }
  poller.set_fds(fds);
  // Wake for the nearest deadline: heartbeat, a worker's timeout, or the poll period while
  // workers are being stopped.
  const auto now = Clock::now();
  auto wake = last_sent_ + hb_period_;
  for (auto& w : slots_) {
    if (!w) continue;
    if (const auto& k = w->tasks().kill_at()) wake = std::min(wake, *k);
    if (auto d = task_deadline(*w)) wake = std::min(wake, d->at);
  }
  if (monitor_) wake = std::min(wake, next_sample_);
  if (!results_.empty()) wake = std::min(wake, first_result_ + opts_.poll);
  auto timeout = std::chrono::duration_cast<Millis>(wake - now) + Millis(1);
  // poll_ms bounds the wait like Parsl's poll period: deadlines are re-checked at least that
  // often.
  poller.wait(std::clamp(timeout, Millis(0), std::min(hb_period_, opts_.poll)));
  return fd_slots;
}

void Pool::note_freeze() {
  // The loop wakes at least every poll period. A much longer gap means this process was frozen
  // (SIGSTOP, a suspended VM, swapping): the interchange's silence is counted from now, not
  // across our own freeze, so that it gets a heartbeat period or more to answer (and, if it
  // declared us lost meanwhile, a Reject that makes us register again).
  const auto woke = Clock::now();
  const auto gap = woke - last_turn_;
  if (last_turn_ != Clock::time_point{} &&
      gap > std::max<Clock::duration>(2 * hb_period_, Millis(2000))) {
    log_->warn(
        "this pool was frozen for {} ms (stopped or starved); the interchange's "
        "silence is measured from now",
        std::chrono::duration_cast<Millis>(gap).count());
    last_heard_ = std::max(last_heard_, woke);
    send(proto::encode(heartbeat()));
  }
  last_turn_ = woke;
}

void Pool::read_interchange() {
  net::Message msg;
  for (int i = 0; i < 4096 && sock_.recv(msg); ++i) {
    last_heard_ = Clock::now();
    on_message(msg.frame);
    if (stop_.load(std::memory_order_relaxed)) break;
  }
}

void Pool::read_workers(net::Poller& poller, const std::vector<std::size_t>& fd_slots) {
  std::vector<WorkerEvent> events;
  for (std::size_t k = 0; k < fd_slots.size(); ++k) {
    if (!poller.readable(poller.socket_count() + k)) continue;
    const std::size_t slot = fd_slots[k];
    if (!slots_[slot]) continue;
    events.clear();
    bool alive = slots_[slot]->read_events(events);
    on_worker_events(slot, events);
    if (!alive) on_worker_gone(slot);
  }
}

void Pool::reap_ended(Clock::time_point now) {
  if (now - last_exit_check_ < kExitCheckPeriod) return;
  // A worker has ended when its process has, whatever its pipe says: a process it started may
  // hold the pipe open long after it (reaping it kills the rest of its group). What it wrote
  // before it ended is read first.
  last_exit_check_ = now;
  std::vector<WorkerEvent> events;
  for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
    if (!slots_[slot] || !slots_[slot]->process().poll()) continue;
    events.clear();
    (void)slots_[slot]->read_events(events);
    on_worker_events(slot, events);
    on_worker_gone(slot);
  }
}

bool Pool::keep_registered(Clock::time_point now) {
  if (!registered_ && now - last_register_ > register_backoff_) {
    // Unanswered: the interchange is away. Ask again, less and less often.
    register_backoff_ = std::min(register_backoff_ * 2, kMaxRegisterBackoff);
    // WARN, once per try: the tries thin out to one per kMaxRegisterBackoff.
    log_->warn("no answer to Register; trying again on a new connection, then waiting {} ms",
               register_backoff_.count());
    // A new connection: the interchange ignores one that names a routing id its previous
    // connection from us still holds (no ROUTER_HANDOVER, docs/security.md), so this one may be
    // deaf until we make another.
    sock_.disconnect(opts_.interchange);
    sock_.connect(opts_.interchange);
    send_register();
  }
  if (now - last_heard_ > hb_threshold_) {
    if (opts_.exit_on_lost) {
      log_->warn("interchange silent for {} ms; exiting", hb_threshold_.count());
      return false;
    }
    // Reconnect with a fresh registration; the interchange has requeued what we held.
    last_heard_ = now;
    if (registered_) reregister("interchange silent past the heartbeat threshold");
  }
  return true;
}

void Pool::say_goodbye() {
  // Stopped on our own (a signal): what we still hold (never started, or stopped at the drain
  // grace) is handed back at once, with no try used. The socket keeps a moment to let our last
  // frames leave.
  std::size_t running = 0, queued = planner_.queue().size();
  for (const auto& w : slots_) {
    if (!w) continue;
    if (w->tasks().task()) ++running;
    queued += w->tasks().queued().size();
  }
  send(proto::encode(proto::PoolLeaving{fmt::format(
      "the pool was stopped ({}); handed back {} unstarted and {} stopped tasks",
      walltime_drain_ ? "its allocation's walltime is near" : "signal", queued, running)}));
  sock_.set_linger(Millis(2000));
  log_->info("said goodbye to the interchange: handed back {} unstarted and {} stopped tasks",
             queued, running);
}

void Pool::stop_workers() {
  for (auto& w : slots_) {
    if (w) w->send_quit();
  }
  // Give workers a moment to run shutdown(); ChildProcess reaps the rest.
  auto until = Clock::now() + std::chrono::seconds(2);
  for (auto& w : slots_) {
    if (!w) continue;
    auto left = std::chrono::duration_cast<Millis>(until - Clock::now());
    if (left.count() > 0) (void)w->process().wait_for(left);
  }
}

bool Pool::walltime_due() {
  if (walltime_drain_) return true;
  if (opts_.walltime_end <= 0) return false;
  const double now = local_unix_now();
  const double expected = run_times_.longest_median();
  if (fits_walltime(now, opts_.walltime_end, static_cast<double>(opts_.walltime_margin.count()),
                    expected)) {
    return false;
  }
  walltime_drain_ = true;
  log_->info(
      "walltime: {:.0f} s left before the allocation ends (margin {} s), a mini-batch takes "
      "{:.1f} s (median): taking no more, handing back what is left",
      std::max(0.0, opts_.walltime_end - now), opts_.walltime_margin.count(), expected);
  return true;
}

// After a signal the pool asks for no more tasks (capacity 0), starts none of those it holds,
// and lets its running tasks finish (with the tasks already in their pipes) for at most
// drain_grace; then it leaves, and PoolLeaving hands back what is left. A second signal, or no
// registration (nothing to hand back to), ends the drain at once.
bool Pool::drain_over(Clock::time_point now) {
  if (!registered_ || told_to_stop_ || signals_.load(std::memory_order_relaxed) > 1) return true;
  const auto busy = [](const std::optional<Worker>& w) {
    return w && (w->tasks().task() || !w->tasks().queued().empty());
  };
  const auto running = std::count_if(slots_.begin(), slots_.end(), busy);
  if (!planner_.draining()) {
    planner_.start_draining();
    auto grace = opts_.drain_grace;
    if (walltime_drain_) {
      // The drain starts when a mini-batch started now would not end a margin before the end,
      // so a running one may need up to its run time past that point: running tasks may go on
      // until half the margin before the end (a task cut then would spend a try).
      grace = std::chrono::duration_cast<Millis>(std::chrono::duration<double>(
          walltime_left(local_unix_now(), opts_.walltime_end,
                        static_cast<double>(opts_.walltime_margin.count()) / 2.0)));
      if (signals_.load(std::memory_order_relaxed) > 0) grace = std::min(grace, opts_.drain_grace);
    }
    drain_until_ = now + grace;
    log_->info(
        "stopping ({}): finishing {} running tasks within {} ms, handing back {} "
        "queued ones; a second signal stops at once",
        walltime_drain_ ? "walltime" : "signal", running, grace.count(), planner_.queue().size());
    send(proto::encode(proto::Heartbeat{planner_.capacity()}));  // 0: no more tasks, please
  }
  if (running == 0) return true;
  if (now < drain_until_) return false;
  log_->warn("drain grace of {} ms over: stopping {} running tasks, handed back",
             opts_.drain_grace.count(), running);
  return true;
}

void Pool::on_registered(const proto::Registered& m) {
  registered_ = true;
  register_backoff_ = std::max(hb_period_, Millis(1000));
  if (m.heartbeat_period_ms > 0) hb_period_ = Millis(m.heartbeat_period_ms);
  if (m.heartbeat_threshold_ms > 0) hb_threshold_ = Millis(m.heartbeat_threshold_ms);
  clock_correction_ = clock_correction(m.now_unix, local_unix_now());
  if (std::abs(clock_correction_) > 1.0) {
    log_->info("our clock is {:+.1f} s off the interchange's: reported times are corrected",
               -clock_correction_);
  }
  log_->info("pool {} registered as {} ({} workers, prefetch {})", opts_.name, m.pool_id,
             opts_.workers, opts_.prefetch);
}

void Pool::on_message(const std::string& frame) {
  auto h = proto::read_header(frame);
  if (!h) {
    ++stats_.bad_frames;
    log_->warn("dropped a bad frame from the interchange: {}", h.error().message);
    return;
  }
  switch (h->type) {
    case proto::MsgType::Registered: {
      auto m = proto::decode<proto::Registered>(frame);
      if (!m) break;
      on_registered(*m);
      return;
    }
    case proto::MsgType::Reject: {
      auto m = proto::decode<proto::Reject>(frame);
      const std::string reason = m ? m->reason : std::string("?");
      if (registered_) {
        // The interchange restarted or declared us lost: what we hold was requeued there.
        reregister(("interchange rejected us: " + reason).c_str());
      } else if (reason.rfind("not registered", 0) == 0) {
        // The answer to a frame sent before our pending Register; that one is answered in turn.
        SPDLOG_LOGGER_DEBUG(log_, "rejected while registering: {}", reason);
      } else {
        // Our Register itself was refused (wrong version, no workers): retrying cannot help.
        log_->error("interchange refused our registration: {}", reason);
        told_to_stop_ = true;
        stop_.store(true, std::memory_order_relaxed);
      }
      return;
    }
    case proto::MsgType::Heartbeat:
      return;
    case proto::MsgType::JobInfo: {
      auto m = proto::decode<proto::JobInfo>(frame);
      if (!m) break;
      planner_.job_known(m->job_id);
      jobs_[m->job_id] = std::move(m->spec);
      return;
    }
    case proto::MsgType::TaskBatch: {
      auto m = proto::decode<proto::TaskBatch>(frame);
      if (!m) break;
      stats_.tasks += m->tasks.size();
      SPDLOG_LOGGER_DEBUG(log_, "received {} tasks", m->tasks.size());
      for (auto& t : m->tasks) {
        if (swallow_ > 0) {
          // Test hook (test builds only): a broken pool that drops tasks silently.
          --swallow_;
          log_->warn("test hook: swallowed task {} (mini-batch {})", t.task_id, t.index);
          continue;
        }
        planner_.task_arrived(std::move(t));
      }
      return;
    }
    case proto::MsgType::DropJob: {
      auto m = proto::decode<proto::DropJob>(frame);
      if (!m) break;
      drop_job(m->job_id, m->reason);
      return;
    }
    // Drain is retired (docs/protocol.md): one from an older interchange stops the pool too.
    case proto::MsgType::Shutdown:
    case proto::MsgType::Drain:
      log_->info("interchange asked us to stop");
      told_to_stop_ = true;
      stop_.store(true, std::memory_order_relaxed);
      return;
    default:
      break;
  }
  ++stats_.bad_frames;
  log_->warn("dropped an unexpected {} frame from the interchange",
             proto::type_name(static_cast<std::uint8_t>(h->type)));
}

std::string Pool::start_worker(std::size_t slot, std::uint64_t job_id) {
  const auto& spec = jobs_.at(job_id);
  const std::string process = fmt::format("process{:03}", slot + opts_.first_process);
  WorkerLaunch l = make_launch(spec, LaunchContext{job_id, opts_.node, process, opts_.shim_dir,
                                                   opts_.python, opts_.worker_bin});
  placed_[slot] = apply_placement(l, placement_, slot, spec.env);
  auto w = Worker::start(with_fork_server(l, job_id), job_id, process);
  if (!w) {
    log_->error("cannot start a worker for job {}: {}", job_id, w.error().message);
    return w.error().message;
  }
  ++stats_.workers_started;
  memory_.worker_started(w->pid());
  SPDLOG_LOGGER_DEBUG(log_, "started {} (pid {}) for job {}", process, w->pid(), job_id);
  if (opts_.max_user_log_mb > 0) {
    for (const auto& f : {l.stdout_file, l.stderr_file}) {
      if (!f.empty()) user_logs_.emplace(f, false);
    }
    if (!spec.log_dir.empty()) {
      // Where the shim's EntryScript logger writes (fanout_runtime: _log_path()).
      user_logs_.emplace(
          fmt::format("{}/user/entry_script_log/{}/{}.log.txt", spec.log_dir, opts_.node, process),
          false);
    }
  }
  slots_[slot] = std::move(*w);
  return {};
}

Expected<ForkServer> Pool::new_fork_server(const WorkerLaunch& first, std::uint64_t job_id) {
  if (warm_) {
    std::string why;
    if (warm_->fits(first, why)) {
      const pid_t pid = warm_->pid();
      WarmInterpreter warm = std::move(*warm_);
      warm_.reset();  // used once: later jobs start their servers afresh
      auto server = ForkServer::adopt(std::move(warm), first, job_id);
      if (server) {
        SPDLOG_LOGGER_DEBUG(log_, "job {}: its fork server is the warm interpreter (pid {})",
                            job_id, pid);
        return server;
      }
      log_->warn("job {}: the warm interpreter cannot serve it ({}); its fork server starts afresh",
                 job_id, server.error().message);
    } else {
      // It waits on for a job that fits.
      SPDLOG_LOGGER_DEBUG(log_, "job {}: not the warm interpreter: {}", job_id, why);
    }
  }
  return ForkServer::start(first, job_id);
}

WorkerLaunch Pool::with_fork_server(WorkerLaunch l, std::uint64_t job_id) {
  if (spawned_jobs_.contains(job_id) || !wants_fork_server(jobs_.at(job_id))) return l;
  auto it = fork_servers_.find(job_id);
  if (it == fork_servers_.end()) {
    auto server = new_fork_server(l, job_id);
    if (!server) {
      log_->warn("job {}: cannot start its fork server ({}); its workers start without it", job_id,
                 server.error().message);
      spawned_jobs_.insert(job_id);
      return l;
    }
    it = fork_servers_.emplace(job_id, std::move(*server)).first;
  } else if (auto st = it->second.ended()) {
    // An import error ends it too: the spawned workers then report it as a load error.
    log_->warn("job {}: its fork server ended ({}); its workers start without it", job_id,
               st->describe());
    fork_servers_.erase(it);
    spawned_jobs_.insert(job_id);
    return l;
  }
  return it->second.via(std::move(l), opts_.worker_bin);
}

std::vector<SlotView> Pool::slot_views() const {
  std::vector<SlotView> views(slots_.size());
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i]) continue;
    const WorkerTasks& t = slots_[i]->tasks();
    views[i] = SlotView{true,
                        slots_[i]->job_id(),
                        t.state(),
                        t.task().has_value(),
                        t.queued().size(),
                        t.queued_bytes(),
                        t.stale(),
                        t.kill_at().has_value(),
                        t.finished()};
  }
  return views;
}

// Carries out the planner's placements. A worker that cannot be started fails one queued task of
// its job, and the planner is asked again, as its slot is still free: a launch that always fails
// (a missing interpreter, a folder that cannot be entered) ends every queued task of its job in
// this turn. Each new round has failed a task, so the rounds end.
void Pool::assign() {
  // Every loop turn: nothing to place, nothing buffered (with max_minibatches_per_worker the
  // planner may still retire a spent worker).
  if (planner_.queue().empty() && opts_.max_minibatches_per_worker == 0) return;
  bool again = true;
  while (again) {
    again = false;
    for (auto& action : planner_.assign(slot_views())) again = execute(action) || again;
  }
  for (auto& w : slots_) {
    // A failed write means the worker is gone: its EOF handling returns `queued` to the queue.
    if (w) (void)w->flush_queued();
  }
}

bool Pool::execute(PoolAction& a) {
  switch (a.kind) {
    case PoolAction::Kind::StartTask: {
      Worker& w = *slots_[a.slot];
      if (!w.start_task(std::move(*a.task), Clock::now())) {
        // The worker died between its last frame and now; its EOF handler replaces it.
        planner_.tasks_returned(std::deque<proto::Task>{std::move(*a.task)});
        return false;
      }
      SPDLOG_LOGGER_TRACE(log_, "task {} -> {}", w.tasks().task()->task_id, w.name());
      return false;
    }
    case PoolAction::Kind::EnqueueTask: {
      Worker& w = *slots_[a.slot];
      if (!w.tasks().task()) {
        // Its StartTask just above failed (the worker is gone): the task waits for another.
        planner_.tasks_returned(std::deque<proto::Task>{std::move(*a.task)});
        return false;
      }
      SPDLOG_LOGGER_TRACE(log_, "task {} -> {} (queued in its pipe)", a.task->task_id, w.name());
      w.enqueue(std::move(*a.task));  // written by flush_queued() once the round is over
      return false;
    }
    case PoolAction::Kind::StartWorker: {
      const std::string why = start_worker(a.slot, a.job_id);
      if (why.empty()) return false;
      auto failed = planner_.worker_start_failed(a.job_id);
      if (!failed) return false;
      fail_task(*failed, StopCause::WorkerStartError,
                "the worker process could not be started: " + why);
      return true;
    }
    case PoolAction::Kind::RetireWorker:
      if (planner_.spent(slot_views()[a.slot])) {
        ++stats_.workers_recycled;
        SPDLOG_LOGGER_DEBUG(log_, "{} ran {} mini-batches: replaced", slots_[a.slot]->name(),
                            slots_[a.slot]->tasks().finished());
      }
      slots_[a.slot]->retire(Clock::now() + opts_.kill_grace);
      return false;
    case PoolAction::Kind::FailTask:
      fail_task(*a.task, a.cause, a.message);
      return false;
  }
  return false;
}

void Pool::on_worker_events(std::size_t slot, std::vector<WorkerEvent>& events) {
  Worker& w = *slots_[slot];
  for (auto& ev : events) {
    switch (ev.kind) {
      case WorkerEvent::Kind::Ready:
        w.ready();
        planner_.worker_ready(w.job_id());
        SPDLOG_LOGGER_DEBUG(log_, "{} ready: {}", w.name(), ev.text);
        break;
      case WorkerEvent::Kind::LoadError:
        w.load_failed(ev.text.empty() ? std::string("LoadError: init failed") : ev.text);
        break;
      case WorkerEvent::Kind::RunStarted:
        w.run_started(ev.task_id, Clock::now());
        break;
      case WorkerEvent::Kind::RunEnded:
        w.run_ended(ev.task_id, Clock::now());
        break;
      case WorkerEvent::Kind::Done:
        on_task_done(w, ev);
        break;
    }
  }
}

void Pool::on_task_done(Worker& w, WorkerEvent& ev) {
  if (!w.tasks().runs(ev.task_id)) {
    // A task dropped after a re-registration, or a confused worker: nothing to report.
    w.unmatched_reply();
    return;
  }
  const proto::Task& t = *w.tasks().task();
  proto::TaskResult r;
  if (ev.status == pipe::DoneStatus::Ok) {
    r.task_id = t.task_id;
    r.job_id = t.job_id;
    r.index = t.index;
    r.attempt = t.attempt;
    r.status = static_cast<std::uint8_t>(AttemptStatus::RunDone);
    r.items = t.items.size();
    r.succeeded = std::min<std::uint64_t>(ev.n_result, r.items);
    r.failed = r.items - r.succeeded;
    // Rows are the lines the output file gets, so that the store's counts and the file agree
    // when an element's text holds a newline (it writes several lines); without an output file
    // they are what run() returned.
    r.rows = ev.output.empty()
                 ? ev.n_result
                 : static_cast<std::uint64_t>(std::count(ev.output.begin(), ev.output.end(), '\n'));
    r.output = std::move(ev.output);
  } else {
    std::string category = category_of(
        ev.error, ev.status == pipe::DoneStatus::BadReturn ? "BadReturn" : "RunException");
    r = proto::failed_result(t, AttemptStatus::RunException, std::move(category),
                             std::move(ev.error));
  }
  r.node = opts_.node;
  r.process = w.name();
  r.worker_pid = w.pid();
  add_placement(r);
  r.start = reported_unix(w.tasks().clock().start_unix);
  r.elapsed_s = std::chrono::duration<double>(Clock::now() - w.tasks().clock().start).count();
  r.run_s = ev.run_s;
  r.cpu_s = ev.cpu_s;
  if (fit_result(r, t)) log_->warn("job {} mini-batch {}: {}", t.job_id, t.index, r.error_message);
  planner_.task_finished(t.job_id, r.elapsed_s);
  run_times_.add(t.job_id, r.elapsed_s);
  results_.push_back(std::move(r));
  ++stats_.results;
  if (ev.status == pipe::DoneStatus::Exiting) {
    // run() raised SystemExit (or another BaseException): the worker exits after this reply and
    // never reads the tasks written behind it. They go back to the front of the queue, no try
    // used, and the worker gets nothing more.
    planner_.tasks_returned(w.take_queued());
    w.finish_task(Clock::now());
    w.retire(Clock::now() + opts_.kill_grace);
    return;
  }
  w.finish_task(Clock::now());  // the next task, if one was in the worker's pipe, starts now
}

void Pool::on_worker_gone(std::size_t slot) {
  user_logs_due_ = true;
  Worker& w = *slots_[slot];
  // The pipe closed: the process exited or is about to. Reap it (briefly wait, then force).
  auto st = w.process().wait_for(std::chrono::milliseconds(1000));
  if (!st) {
    w.kill_hard();
    st = w.process().wait();
  }
  const std::string how = st->describe();
  if (w.state() == Worker::State::Starting) {
    on_start_failed(w, how);
  } else if (const auto& task = w.tasks().task()) {
    // A task it was running when it ended: stopped for a bound it overran, else lost (or killed
    // for memory by someone else).
    auto [cause, msg] =
        w.tasks().stop_cause()
            ? std::pair{*w.tasks().stop_cause(), lost_task_message(w, *w.tasks().stop_cause(), how)}
            : classify_loss(w, *st);
    if (cause == StopCause::WorkerLost) ++stats_.workers_lost;
    log_->warn("job {} mini-batch {}: {}", w.job_id(), task->index, msg);
    fail_task(*task, cause, msg, w.name(), w.pid(), w.tasks().clock().start_unix);
  }
  memory_.worker_gone(w.pid());
  // Tasks waiting in its pipe never started: they go back to the front of the queue, no try used.
  planner_.tasks_returned(w.take_queued());
  slots_[slot].reset();
  retire_fork_servers();
}

void Pool::retire_fork_servers() {
  std::erase_if(retiring_servers_, [&](const auto& kv) {
    return std::none_of(slots_.begin(), slots_.end(),
                        [&](const auto& w) { return w && w->job_id() == kv.first; });
  });
}

void Pool::on_start_failed(const Worker& w, const std::string& how) {
  ++stats_.init_failures;
  const auto job_id = w.job_id();
  const std::string text = w.tasks().fail_status().empty()
                               ? fmt::format("LoadError: worker exited during init ({})", how)
                               : w.tasks().fail_status();
  log_->warn("{} failed to start for job {} ({}): {}", w.name(), job_id, how,
             text.substr(0, text.find('\n')));
  for (const auto& t : planner_.worker_init_failed(job_id)) {
    fail_task(t, AttemptStatus::LoadException, category_of(text, "LoadError"), text, w.name(),
              w.pid(), local_unix_now());
  }
}

std::string Pool::lost_task_message(const Worker& w, StopCause cause,
                                    const std::string& how) const {
  const auto job = jobs_.find(w.job_id());
  switch (cause) {
    case StopCause::RunTimeout:
      return fmt::format("run() exceeded its timeout of {} s; worker stopped ({})",
                         job != jobs_.end() ? job->second.run_timeout_s : 0.0, how);
    case StopCause::TaskOverheadTimeout:
      return fmt::format(
          "the mini-batch's overhead outside run() exceeded --task_overhead_timeout {} s ({}); "
          "worker stopped ({})",
          job != jobs_.end() ? job->second.task_overhead_timeout_s : 0.0,
          w.tasks().clock().run_started ? "after run() returned, writing its rows"
                                        : "before run() was called, loading the mini-batch",
          how);
    case StopCause::OutOfMemory:
      return w.memory_note();
    default:
      return fmt::format("worker process {} (pid {}) died: {}", w.name(), w.pid(), how);
  }
}

std::pair<StopCause, std::string> Pool::classify_loss(const Worker& w, const ExitStatus& st) {
  const LostWorkerFacts facts = memory_.facts(w.pid(), st.signal);
  if (classify_lost_worker(facts) == LossKind::KernelOom) {
    ++stats_.out_of_memory;
    return {StopCause::OutOfMemory, kernel_oom_message(w.name(), w.pid(), facts, st.describe())};
  }
  return {StopCause::WorkerLost, lost_task_message(w, StopCause::WorkerLost, st.describe())};
}

void Pool::check_memory(Clock::time_point now) {
  if (!memory_.due(now)) return;
  std::vector<MemoryGuard::Watched> watched;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    const auto& w = slots_[i];
    // A worker already stopped is not stopped twice; one killed waits to be reaped.
    if (w && w->state() != Worker::State::Stopping) watched.push_back({i, w->pid()});
  }
  if (watched.empty()) return;  // no worker: the node's memory concerns no task
  for (const auto& o : memory_.check(now, watched)) {
    Worker& w = *slots_[o.slot];
    ++stats_.out_of_memory;
    std::string note = fmt::format(
        "worker {} (pid {}) reached {} of memory (the RSS of its process "
        "group), over its limit of {} (fanout.worker_memory_limit); stopped with SIGKILL",
        w.name(), w.pid(), format_memory(o.rss_bytes), format_memory(memory_.limit_bytes()));
    log_->warn("{}", note);
    w.stop_for_memory(std::move(note), now);
  }
}

std::optional<Pool::TaskDeadline> Pool::task_deadline(const Worker& w) const {
  if (w.state() != Worker::State::Busy || !w.tasks().task()) return std::nullopt;
  const TaskClock& c = w.tasks().clock();
  auto it = jobs_.find(w.job_id());
  if (it == jobs_.end()) return std::nullopt;
  const proto::JobSpec& spec = it->second;
  if (run_markers(spec)) {
    // The markers split the task: outside run() the overhead budget left applies (it is spent
    // before run() and after it, together); inside, the run timeout, counted from run()'s start.
    if (!c.in_run) {
      return TaskDeadline{
          c.phase_start + to_duration(spec.task_overhead_timeout_s) - c.overhead_used, true};
    }
    if (spec.run_timeout_s <= 0) return std::nullopt;
    return TaskDeadline{c.phase_start + to_duration(spec.run_timeout_s), false};
  }
  // Without markers the pool cannot see where run() starts: the run timeout bounds the whole
  // task, from hand-off to its reply.
  if (spec.run_timeout_s <= 0) return std::nullopt;
  return TaskDeadline{c.start + to_duration(spec.run_timeout_s), false};
}

void Pool::check_deadlines(Clock::time_point now) {
  for (auto& w : slots_) {
    if (!w) continue;
    if (const auto& kill_at = w->tasks().kill_at()) {
      if (now >= *kill_at) w->kill_hard();
      continue;
    }
    if (w->state() == Worker::State::Busy && w->tasks().task()) {
      auto d = task_deadline(*w);
      if (!d || now <= d->at) continue;
      ++stats_.timeouts;
      w->time_out(d->overhead ? StopCause::TaskOverheadTimeout : StopCause::RunTimeout,
                  now + opts_.kill_grace);
    } else if (w->state() == Worker::State::Starting) {
      // The job's --first_task_creation_timeout bounds its workers' start and init() (no task
      // can start before), else the pool's own 600 s.
      const auto job = jobs_.find(w->job_id());
      const double job_s = job != jobs_.end() ? job->second.first_task_creation_timeout_s : 0;
      const auto bound = job_s > 0 ? to_duration(job_s) : Clock::duration(opts_.load_timeout);
      if (now - w->started() <= bound) continue;
      w->abort_start(
          job_s > 0 ? fmt::format("LoadTimeout: init() did not finish within "
                                  "--first_task_creation_timeout {} s",
                                  job_s)
                    : fmt::format("LoadTimeout: init() did not finish within {} s (the default; "
                                  "--first_task_creation_timeout sets it)",
                                  std::chrono::duration<double>(opts_.load_timeout).count()));
    }
  }
}

void Pool::fail_task(const proto::Task& t, StopCause cause, const std::string& message,
                     const std::string& process, std::int64_t pid, double start) {
  fail_task(t, attempt_status(cause), to_string(cause), message, process, pid, start);
}

void Pool::fail_task(const proto::Task& t, StopCause cause, const std::string& message) {
  fail_task(t, cause, message, "", 0, local_unix_now());
}

void Pool::fail_task(const proto::Task& t, AttemptStatus status, const std::string& category,
                     const std::string& message, const std::string& process, std::int64_t pid,
                     double start) {
  proto::TaskResult r = proto::failed_result(t, status, category, message);
  r.node = opts_.node;
  r.process = process;
  r.worker_pid = pid;
  add_placement(r);
  r.start = reported_unix(start);
  r.elapsed_s = local_unix_now() - start;
  (void)fit_result(r, t);  // cuts an overlong error text
  results_.push_back(std::move(r));
  ++stats_.results;
}

void Pool::add_placement(proto::TaskResult& r) const {
  // Worker names are process<first_process + slot> (start_worker()); a task that never reached
  // a worker has none.
  if (r.process.rfind("process", 0) != 0) return;
  const auto n = std::strtoull(r.process.c_str() + 7, nullptr, 10);
  if (n < opts_.first_process || n - opts_.first_process >= placed_.size()) return;
  const Placed& p = placed_[n - opts_.first_process];
  r.device = p.device;
  r.cpus = p.cpus;
  r.threads = p.threads;
}

void Pool::flush_results() {
  first_result_ = {};
  if (results_.empty()) return;
  // Never a frame the interchange refuses: results that together exceed a frame go in several
  // (each result fits alone: fit_result()).
  std::vector<std::size_t> sizes;
  sizes.reserve(results_.size());
  for (const auto& r : results_) sizes.push_back(result_frame_bytes(r));
  std::size_t first = 0;
  for (const std::size_t count : split_results(sizes)) {
    proto::ResultBatch batch;
    std::size_t bytes = kBatchOverheadBytes;
    for (std::size_t i = first; i < first + count; ++i) {
      bytes += sizes[i];
      batch.results.push_back(std::move(results_[i]));
    }
    first += count;
    batch.capacity = planner_.capacity();
    SPDLOG_LOGGER_DEBUG(log_, "returning {} results", batch.results.size());
    send(proto::encode(batch, bytes));
  }
  results_.clear();
}

// A user's print loop can fill a disk (321 MB from one job): each user log file is cut back to
// the cap. The files are opened O_APPEND by the worker (and its logger), so what it writes after
// a cut goes to the new end, and the next check cuts it again: a file stays within the cap plus
// what is written in one check period. The first cut is said in the file and at WARN, once.
void Pool::cap_user_logs(Clock::time_point now, bool at_once) {
  if (opts_.max_user_log_mb == 0) return;
  if (!at_once && !user_logs_due_ && now - last_log_check_ < kUserLogCheckPeriod) return;
  last_log_check_ = now;
  user_logs_due_ = false;
  const auto cap = static_cast<off_t>(opts_.max_user_log_mb * 1024 * 1024);
  const std::string note = fmt::format(
      "\n[fanout: this log reached its cap of {} MB (fanout-pool --max-user-log-mb); what the "
      "worker writes after this is dropped]\n",
      opts_.max_user_log_mb);
  const auto end = cap + static_cast<off_t>(note.size());
  for (auto& [path, said] : user_logs_) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || st.st_size <= end) continue;
    if (::truncate(path.c_str(), said ? end : cap) != 0) continue;
    if (said) continue;
    said = true;
    if (FILE* f = std::fopen(path.c_str(), "a")) {
      std::fputs(note.c_str(), f);
      std::fclose(f);
    }
    log_->warn("user log {} reached its cap of {} MB; what follows is dropped", path,
               opts_.max_user_log_mb);
  }
}

double Pool::monitor_interval_s() const {
  double interval = opts_.resource_monitor_interval_s;
  // Called every loop turn: when no job asks for a monitor (the usual case), nothing is scanned.
  const bool any_job_asks = std::any_of(jobs_.begin(), jobs_.end(), [](const auto& kv) {
    return kv.second.resource_monitor_interval_s > 0;
  });
  if (!any_job_asks) return interval;
  auto consider = [&](std::uint64_t job_id) {
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return;
    const double j = it->second.resource_monitor_interval_s;
    if (j > 0 && (interval <= 0 || j < interval)) interval = j;
  };
  for (const auto& w : slots_) {
    if (w) consider(w->job_id());
  }
  for (const auto& t : planner_.queue()) consider(t.job_id);
  return interval;
}

void Pool::run_monitor(Clock::time_point now) {
  const double interval = monitor_interval_s();
  if (interval <= 0) {
    if (monitor_) SPDLOG_LOGGER_DEBUG(log_, "resource monitor off");
    monitor_.reset();
    return;
  }
  const auto period =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval));
  // Besides every period, a sample when a job first has work here and when a job runs out of
  // work here, so that a job shorter than the period has samples too (else a short job's report
  // would have no resource figures). A pool that
  // runs dry between tasks would sample at every task: a job running out is sampled only when
  // the last sample is at least half a period old.
  std::vector<std::uint64_t> busy;
  for (const auto& w : slots_) {
    if (w && w->tasks().state() == WorkerTasks::State::Busy) busy.push_back(w->job_id());
  }
  for (const auto& t : planner_.queue()) busy.push_back(t.job_id);
  std::sort(busy.begin(), busy.end());
  busy.erase(std::unique(busy.begin(), busy.end()), busy.end());
  const bool job_ran_out =
      !std::includes(busy.begin(), busy.end(), monitor_busy_.begin(), monitor_busy_.end()) &&
      now >= last_sample_ + period / 2;
  bool job_started = false;
  for (const auto id : busy) job_started = monitor_seen_.insert(id).second || job_started;
  if (!monitor_) {
    monitor_.emplace();
    SPDLOG_LOGGER_DEBUG(log_, "resource monitor on, every {} s", interval);
    if (!monitor_->no_gpus().empty() && !no_gpus_said_) {
      log_->info("resource monitor: no accelerator samples on this node ({})", monitor_->no_gpus());
      no_gpus_said_ = true;
    }
  }
  std::vector<std::uint64_t> ran_out;
  std::set_difference(monitor_busy_.begin(), monitor_busy_.end(), busy.begin(), busy.end(),
                      std::back_inserter(ran_out));
  monitor_busy_ = busy;
  if (!job_started && !job_ran_out && now < next_sample_) return;
  // The next deadline follows from this one, so the series keeps its period under load.
  next_sample_ = std::max(next_sample_ + period, now + period / 2);
  last_sample_ = now;
  std::vector<WorkerRef> workers;
  std::vector<std::uint64_t> job_ids;
  for (const auto& w : slots_) {
    if (!w) continue;
    workers.push_back(WorkerRef{w->job_id(), w->name(), w->pid()});
    job_ids.push_back(w->job_id());
  }
  for (const auto& t : planner_.queue()) job_ids.push_back(t.job_id);
  job_ids.insert(job_ids.end(), ran_out.begin(), ran_out.end());  // its last sample
  std::sort(job_ids.begin(), job_ids.end());
  job_ids.erase(std::unique(job_ids.begin(), job_ids.end()), job_ids.end());
  auto sample = monitor_->sample(workers, job_ids);
  ++stats_.resource_samples;
  SPDLOG_LOGGER_DEBUG(log_, "resource sample: cpu {:.1f}%, {} workers, {} disks",
                      sample.node.cpu_percent, sample.processes.size(), sample.disks.size());
  sample.time = reported_unix(sample.time);
  if (registered_) send(proto::encode(sample, 512 + 64 * sample.disks.size()));
}

void Pool::log_stats(bool force) {
  auto now = Clock::now();
  if (!force && now - last_stats_ < std::chrono::seconds(30)) return;
  last_stats_ = now;
  if (stats_ == logged_stats_) return;
  logged_stats_ = stats_;
  log_->info(
      "stats: tasks {}, results {}, workers started {}, lost {}, timeouts {}, "
      "init failures {}, bad frames {}, registrations {}, jobs dropped {}, resource samples {}, "
      "out of memory {}, recycled {}",
      stats_.tasks, stats_.results, stats_.workers_started, stats_.workers_lost, stats_.timeouts,
      stats_.init_failures, stats_.bad_frames, stats_.registrations, stats_.jobs_dropped,
      stats_.resource_samples, stats_.out_of_memory, stats_.workers_recycled);
}

}  // namespace fanout::pool
