// fanout-pool-load: what N pools cost one interchange (docs/scaling.md). One process opens N
// simulated pools: DEALER sockets with their own routing ids that Register, heartbeat on the
// period the interchange gives them, and answer every TaskBatch at once with a ResultBatch of
// RUN_DONE results (one row each). For each N it starts a fanout-interchange on a fresh
// temporary store (or uses the one given with --interchange), and measures:
//   idle      the interchange's CPU per second while all N pools only heartbeat;
//   job       its CPU per mini-batch over a job of M no-op mini-batches submitted as a client
//             does (SubmitJob, SubmitTasks within the window, SubmitEnd), then checks the job's
//             rows in the store (every mini-batch succeeded once, attempts = mini-batches);
//   lost      the time from one pool going silent to its row in the store turning `lost` (or a
//             Reject reaching it);
//   peak RSS  the interchange's VmHWM at the end.
// CPU is utime + stime from /proc/<pid>/stat. Prints one line per N, or one JSON object per line
// with --json. Exits 1 when a job's rows are not exactly right, 2 on bad options.
// Each pool costs this process two file descriptors (its TCP connection and its ZeroMQ socket's
// mailbox). When RLIMIT_NOFILE cannot hold them all, the pools beyond what one process can hold
// are served by forked helper processes that only register, heartbeat and answer tasks.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "fanout/net/keys.hpp"
#include "fanout/net/security.hpp"
#include "fanout/net/socket.hpp"
#include "fanout/protocol/codec.hpp"
#include "fanout/protocol/messages.hpp"
#include "fanout/store/db.hpp"
#include "fanout/store/reader.hpp"
#include "fanout/util/child_process.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/fs.hpp"

namespace {

namespace fs = std::filesystem;
namespace proto = fanout::proto;
namespace net = fanout::net;
using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// ZeroMQ's default ZMQ_MAX_SOCKETS is 1023 per context, and net::Context has no way to raise
// it: the simulated pools are spread over contexts of at most this many sockets each.
constexpr std::size_t kSocketsPerContext = 1000;
// As the client does (client/commands/perf.cpp): mini-batches per SubmitTasks frame.
constexpr std::uint64_t kFrameBatches = 1024;
// File descriptors a process keeps for itself besides its pools' two each.
constexpr rlim_t kSpareFds = 512;

struct Options {
  std::vector<std::uint64_t> pools{10, 100, 1000, 10000};
  std::uint64_t minibatches = 20000;
  std::uint32_t workers = 1;
  std::uint32_t prefetch = 1;
  unsigned heartbeat_period_ms = 2000;  // the interchange's defaults
  unsigned heartbeat_threshold_ms = 10000;
  double idle_seconds = 5;
  std::uint32_t window = 20000;
  std::string interchange{};  // a running interchange's pool endpoint; empty: start one
  std::string client_endpoint{};
  long interchange_pid = 0;
  std::string db{};
  // With --interchange: its keys (Curve on tcp://, docs/security.md) or --insecure. The
  // interchange the tool starts itself uses Curve with keys made for the run, or plaintext TCP
  // loopback with --insecure (how the figures of docs/scaling.md were taken).
  fanout::net::Security security{};
  std::string interchange_bin{};
  std::string dir{};
  bool keep = false;
  bool json = false;
  bool no_lost = false;
};

// ---- the interchange process, seen from outside ----

// CPU seconds (utime + stime) of a process from /proc/<pid>/stat; -1 when unknown.
double proc_cpu_s(long pid) {
  if (pid <= 0) return -1;
  auto text = fanout::read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!text) return -1;
  auto rp = text->rfind(')');
  if (rp == std::string::npos) return -1;
  // Fields after the command name start at field 3 (state); utime and stime are 14 and 15.
  std::size_t pos = rp + 2;
  unsigned long long ticks[2] = {0, 0};
  for (int field = 3; field <= 15 && pos < text->size(); ++field) {
    auto sp = text->find(' ', pos);
    if (field >= 14) ticks[field - 14] = std::strtoull(text->c_str() + pos, nullptr, 10);
    if (sp == std::string::npos) break;
    pos = sp + 1;
  }
  return static_cast<double>(ticks[0] + ticks[1]) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A /proc/<pid>/status value in kB ("VmHWM"); -1 when unknown.
long proc_status_kb(long pid, const char* key) {
  if (pid <= 0) return -1;
  auto text = fanout::read_file("/proc/" + std::to_string(pid) + "/status");
  if (!text) return -1;
  auto k = text->find(std::string(key) + ":");
  if (k == std::string::npos) return -1;
  return std::strtol(text->c_str() + k + std::strlen(key) + 1, nullptr, 10);
}

double self_cpu_s() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Raises RLIMIT_NOFILE's soft limit to the hard one, and the hard one to `need` when it is lower
// and the process may (root). Each pool holds a TCP connection and a ZeroMQ mailbox here, and
// one connection in the interchange, which inherits the limit. Returns the soft limit now.
rlim_t raise_open_files(rlim_t need) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < need) {
    rlimit more{need, need};
    if (::setrlimit(RLIMIT_NOFILE, &more) == 0) return need;
  }
  lim.rlim_cur = lim.rlim_max;
  (void)::setrlimit(RLIMIT_NOFILE, &lim);
  (void)::getrlimit(RLIMIT_NOFILE, &lim);
  return lim.rlim_cur;
}

// ---- one measured run ----

struct Figures {
  std::uint64_t pools = 0;
  std::uint64_t processes = 1;  // this one and its helpers
  std::uint64_t registered = 0;
  double register_s = 0;
  double idle_cpu_per_s = -1;  // interchange CPU seconds per wall second, pools idle
  std::uint64_t minibatches = 0;
  double job_s = 0;
  double job_cpu_s = -1;  // interchange CPU over the job, its logs/ report excluded
  double cpu_per_minibatch_us = -1;
  // The same less what heartbeating alone costs over as long (idle_cpu_per_s * job_s): while
  // the job runs the interchange still heartbeats every pool and scans them all for silence.
  double net_cpu_per_minibatch_us = -1;
  double tool_cpu_s = 0;  // this process, over the whole run
  double lost_after_ms = -1;
  std::string lost_seen{};  // "store", "reject", "drain" or "" (not measured / not seen)
  long peak_rss_kb = -1;
  std::uint64_t succeeded = 0, attempts = 0, committed = 0;
  std::uint64_t rejects = 0, tasks_answered = 0;
  bool ok = false;
  std::string error{};
};

struct SimPool {
  std::string name{};  // also its routing id
  std::uint64_t id = 0;
  bool registered = false;
  bool silent = false;
  Clock::time_point last_sent{};
};

class Load final {
 public:
  // `per_process`: the most pools one process may hold (its open-file limit).
  Load(const Options& o, std::uint64_t n, std::uint64_t per_process)
      : o_(o), n_(n), per_process_(std::max<std::uint64_t>(per_process, 1)) {}

  Figures run();

 private:
  void start_interchange();
  // Opens this process's share of the N pools, and forks helpers that open the others.
  void open_pools(std::uint64_t per_process);
  // Opens pools [first, first + count) in this process (and the client's socket if asked).
  void open_own_pools(std::uint64_t first, std::uint64_t count, bool with_client);
  // A helper process: serves its pools until the parent closes `pipe_fd`. Never returns.
  [[noreturn]] void serve_helper(std::uint64_t first, std::uint64_t count, int pipe_fd);
  void stop_helpers();
  // Pools the interchange's store shows connected: all N, counting the helpers' too.
  std::int64_t connected_in_store();
  // Serves every pool and the client for up to `wait`: answers tasks, sends due heartbeats.
  void pump(Millis wait);
  void on_pool_frame(std::size_t i, const std::string& frame);
  void on_client_frame(const std::string& frame);
  void send_register(std::size_t i);
  void heartbeats();
  void run_job();
  void measure_lost();
  [[nodiscard]] Millis period() const { return Millis(period_ms_); }

  const Options& o_;
  std::uint64_t n_;
  std::uint64_t per_process_;
  Figures f_{};
  std::string dir_{}, db_{}, pool_ep_{}, client_ep_{};
  long ix_pid_ = 0;
  net::Security security_{};  // how the pools and the client connect
  fanout::ChildProcess ix_{};
  unsigned period_ms_ = 0;

  // Contexts are declared before the sockets and outlive them (net::Context's rule).
  std::vector<std::unique_ptr<net::Context>> contexts_{};
  std::vector<SimPool> sims_{};
  std::vector<net::Socket> socks_{};
  std::unique_ptr<net::Socket> client_{};
  std::unique_ptr<net::Poller> poller_{};
  std::size_t client_item_ = 0;
  std::size_t parent_item_ = 0;    // a helper: the pipe from the parent
  std::size_t next_register_ = 0;  // pools [0, next_register_) have sent their Register
  struct Helper {
    pid_t pid = -1;
    int pipe_fd = -1;  // closing it tells the helper to stop
  };
  std::vector<Helper> helpers_{};
  std::unique_ptr<fanout::store::Db> db_reader_{};
  Clock::time_point next_heartbeat_check_{};

  // The job, seen by its client.
  std::uint64_t job_id_ = 0;
  std::uint32_t window_ = 0;
  proto::JobProgress progress_{};
  std::optional<proto::JobEnded> ended_{};
  // The silent pool's end: when another frame told it that it was gone.
  std::optional<Clock::time_point> silent_told_{};
  std::string silent_told_by_{};
};

void Load::start_interchange() {
  if (!o_.interchange.empty()) {
    pool_ep_ = o_.interchange;
    client_ep_ = o_.client_endpoint;
    ix_pid_ = o_.interchange_pid;
    db_ = o_.db;
    security_ = o_.security;
    return;
  }
  std::vector<std::string> link = {"--insecure"};
  if (o_.security.insecure) {
    security_.insecure = true;
  } else {  // Curve, as every real tcp:// link: a key folder of this run's own
    security_.keys_dir = dir_ + "/keys";
    std::error_code ec;
    std::filesystem::remove_all(security_.keys_dir, ec);
    if (auto r = fanout::net::make_key_folder(security_.keys_dir); !r) {
      throw fanout::Failure(r.error());
    }
    link = {"--keys", security_.keys_dir};
  }
  db_ = dir_ + "/store.db";
  const std::string ready = dir_ + "/ix.ready";
  const std::string log = dir_ + "/interchange.log";
  fanout::SpawnOptions so;
  so.argv = {o_.interchange_bin,
             "--db",
             db_,
             "--ready-file",
             ready,
             "--log-file",
             log,
             "--log-level",
             "warn",
             "--heartbeat-period-ms",
             std::to_string(o_.heartbeat_period_ms),
             "--heartbeat-threshold-ms",
             std::to_string(o_.heartbeat_threshold_ms),
             "--window",
             std::to_string(o_.window)};
  so.argv.insert(so.argv.end(), link.begin(), link.end());
  so.stdin_file = "null";
  so.stderr_file = log;
  auto c = fanout::ChildProcess::spawn(so);
  if (!c) throw fanout::Failure(c.error().code, "start interchange: " + c.error().message);
  ix_ = std::move(*c);
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    if (auto st = ix_.poll()) {
      throw fanout::Failure(fanout::ErrorCode::Io,
                            "fanout-interchange ended (" + st->describe() + "); see " + log);
    }
    if (auto text = fanout::read_file(ready); text && text->find("pid=") != std::string::npos) {
      std::istringstream in(*text);
      std::string line;
      while (std::getline(in, line)) {
        if (line.rfind("client=", 0) == 0) client_ep_ = line.substr(7);
        if (line.rfind("pool=", 0) == 0) pool_ep_ = line.substr(5);
      }
      ix_pid_ = ix_.pid();
      return;
    }
    ::usleep(20000);
  }
  throw fanout::Failure(fanout::ErrorCode::Io, "fanout-interchange not ready within 60 s");
}

void Load::open_pools(std::uint64_t per_process) {
  // Even shares: this process takes the first, helpers the others. No ZeroMQ context exists
  // yet, so the forks copy none.
  const std::uint64_t procs = (n_ + per_process - 1) / per_process;
  const std::uint64_t share = (n_ + procs - 1) / procs;
  for (std::uint64_t first = share; first < n_; first += share) {
    int fds[2];
    if (::pipe(fds) != 0) throw fanout::Failure(fanout::ErrorCode::Io, "pipe failed");
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid < 0) throw fanout::Failure(fanout::ErrorCode::Io, "fork failed");
    if (pid == 0) {
      ::close(fds[1]);
      for (const auto& h : helpers_) ::close(h.pipe_fd);
      serve_helper(first, std::min(share, n_ - first), fds[0]);
    }
    ::close(fds[0]);
    helpers_.push_back(Helper{pid, fds[1]});
  }
  f_.processes = procs;
  open_own_pools(0, std::min(share, n_), true);
}

void Load::open_own_pools(std::uint64_t first, std::uint64_t count, bool with_client) {
  sims_.resize(count);
  socks_.reserve(count);
  poller_ = std::make_unique<net::Poller>();
  for (std::uint64_t i = 0; i < count; ++i) {
    if (i % kSocketsPerContext == 0) contexts_.push_back(std::make_unique<net::Context>());
    char name[48];
    std::snprintf(name, sizeof name, "load-%06llu", static_cast<unsigned long long>(first + i));
    sims_[i].name = name;
    socks_.emplace_back(*contexts_.back(), net::Socket::Kind::Dealer, sims_[i].name);
    net::connect_secure(socks_.back(), pool_ep_, security_, net::Role::Pool);
    (void)poller_->add(socks_.back());
  }
  if (with_client) {
    contexts_.push_back(std::make_unique<net::Context>());
    client_ = std::make_unique<net::Socket>(*contexts_.back(), net::Socket::Kind::Dealer);
    net::connect_secure(*client_, client_ep_, security_, net::Role::Client);
    client_item_ = poller_->add(*client_);
  }
  period_ms_ = o_.heartbeat_period_ms;  // until Registered says otherwise
  next_register_ = 0;                   // sent by pump(), a few hundred at a time
}

void Load::serve_helper(std::uint64_t first, std::uint64_t count, int pipe_fd) {
  int rc = 0;
  try {
    open_own_pools(first, count, false);
    parent_item_ = poller_->add_fd(pipe_fd);
    while (true) {
      pump(Millis(50));
      if (poller_->readable(parent_item_)) {
        char c;
        if (::read(pipe_fd, &c, 1) <= 0) break;  // the parent closed its end
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fanout-pool-load helper: %s\n", e.what());
    rc = 1;
  }
  socks_.clear();
  contexts_.clear();
  // Leaves without destructors: the parent's objects (its interchange) are not ours to stop.
  ::_exit(rc);
}

void Load::stop_helpers() {
  for (auto& h : helpers_) {
    ::close(h.pipe_fd);
    rusage ru{};
    int st = 0;
    if (::wait4(h.pid, &st, 0, &ru) == h.pid) {
      f_.tool_cpu_s += static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                       static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
    }
  }
  helpers_.clear();
}

std::int64_t Load::connected_in_store() {
  if (db_.empty()) return -1;
  try {
    if (!db_reader_)
      db_reader_ = std::make_unique<fanout::store::Db>(db_, fanout::store::Db::Mode::ReadOnly);
    return db_reader_->query_int("SELECT count(*) FROM pools WHERE state = 'connected'");
  } catch (const fanout::Failure&) {
    return -1;  // not created yet, or the writer holds a lock: ask again
  }
}

void Load::send_register(std::size_t i) {
  proto::Register r;
  r.pool_name = sims_[i].name;
  r.node = "pool-load";
  r.workers = o_.workers;
  r.prefetch = o_.prefetch;
  r.build = "fanout-pool-load";
  r.pid = ::getpid();
  (void)socks_[i].send(proto::encode(r), false);
  sims_[i].last_sent = Clock::now();
}

void Load::pump(Millis wait) {
  poller_->wait(wait);
  net::Message m;
  for (std::size_t i = 0; i < sims_.size(); ++i) {
    if (!poller_->readable(i)) continue;
    while (socks_[i].recv(m)) on_pool_frame(i, m.frame);
  }
  if (client_) {
    while (client_->recv(m)) on_client_frame(m.frame);
  }
  heartbeats();
}

void Load::heartbeats() {
  // Pools start as a cluster's do, not all in the same millisecond: at most this many Registers
  // per turn, so that the burst does not stall the heartbeats of those already registered.
  constexpr std::size_t kRegistersPerTurn = 200;
  for (std::size_t k = 0; k < kRegistersPerTurn && next_register_ < sims_.size(); ++k) {
    send_register(next_register_++);
  }
  const auto now = Clock::now();
  if (now < next_heartbeat_check_) return;
  next_heartbeat_check_ = now + period() / 20;
  const std::string hb = proto::encode(proto::Heartbeat{o_.workers + o_.prefetch});
  for (std::size_t i = 0; i < next_register_; ++i) {
    auto& s = sims_[i];
    if (s.silent || now - s.last_sent < period()) continue;
    (void)socks_[i].send(hb);
    s.last_sent = now;
  }
}

void Load::on_pool_frame(std::size_t i, const std::string& frame) {
  auto& s = sims_[i];
  auto h = proto::read_header(frame);
  if (!h) return;
  switch (h->type) {
    case proto::MsgType::Registered: {
      auto m = proto::decode<proto::Registered>(frame);
      if (!m) return;
      if (!s.registered) ++f_.registered;
      s.registered = true;
      s.id = m->pool_id;
      if (m->heartbeat_period_ms > 0) period_ms_ = m->heartbeat_period_ms;
      // Spread the heartbeats over the period, as independent pools' would be.
      s.last_sent = Clock::now() - period() * static_cast<int>(i % 64) / 64;
      return;
    }
    case proto::MsgType::TaskBatch: {
      auto m = proto::decode<proto::TaskBatch>(frame);
      if (!m || s.silent) return;
      proto::ResultBatch rb;
      rb.capacity = o_.workers + o_.prefetch;
      rb.results.reserve(m->tasks.size());
      const double now = fanout::unix_now();
      for (const auto& t : m->tasks) {
        proto::TaskResult r;
        r.task_id = t.task_id;
        r.job_id = t.job_id;
        r.index = t.index;
        r.attempt = t.attempt;
        r.status = static_cast<std::uint8_t>(proto::AttemptStatus::RunDone);
        r.items = t.items.size();
        r.succeeded = r.items;
        r.rows = 1;
        r.output = std::to_string(t.index) + "\n";
        r.node = "pool-load";
        r.process = "process001";
        r.worker_pid = ::getpid();
        r.start = now;
        rb.results.push_back(std::move(r));
      }
      f_.tasks_answered += rb.results.size();
      (void)socks_[i].send(proto::encode(rb, 64 + rb.results.size() * 96), false);
      s.last_sent = Clock::now();
      return;
    }
    case proto::MsgType::Reject:
    case proto::MsgType::Drain:
    case proto::MsgType::Shutdown: {
      const char* by = h->type == proto::MsgType::Reject ? "reject" : "drain";
      if (s.silent) {
        if (!silent_told_) {
          silent_told_ = Clock::now();
          silent_told_by_ = by;
        }
        return;
      }
      if (h->type == proto::MsgType::Reject) {
        // Declared lost (a loaded machine delayed our heartbeats): register again, as a pool does.
        ++f_.rejects;
        if (s.registered) --f_.registered;
        s.registered = false;
        send_register(i);
      }
      return;
    }
    default:
      return;  // Heartbeat, JobInfo, DropJob: nothing to answer
  }
}

void Load::on_client_frame(const std::string& frame) {
  auto h = proto::read_header(frame);
  if (!h) return;
  if (h->type == proto::MsgType::JobAccepted) {
    if (auto m = proto::decode<proto::JobAccepted>(frame)) {
      job_id_ = m->job_id;
      window_ = std::max<std::uint32_t>(m->window, 1);
    }
  } else if (h->type == proto::MsgType::JobProgress) {
    if (auto m = proto::decode<proto::JobProgress>(frame); m && m->job_id == job_id_) {
      progress_ = *m;
    }
  } else if (h->type == proto::MsgType::JobEnded) {
    if (auto m = proto::decode<proto::JobEnded>(frame); m && m->job_id == job_id_) {
      ended_ = *m;
      progress_ = m->progress;
    }
  } else if (h->type == proto::MsgType::Reject) {
    auto m = proto::decode<proto::Reject>(frame);
    f_.error = "interchange refused the job: " + (m ? m->reason : std::string("Reject"));
  }
}

void Load::run_job() {
  const std::string code = dir_ + "/code";
  (void)fanout::make_dirs(code);
  proto::JobSpec spec;
  spec.name = "pool-load";
  spec.spec_path = "(fanout-pool-load)";
  spec.runtime = "native";  // the simulated pools run nothing; the spec only has to be valid
  spec.code_dir = code;
  spec.entry_script = "builtin:noop";
  spec.log_dir = dir_ + "/logs";
  spec.input_name = "synthetic";
  spec.settings_json = "{\"pool_load\":true,\"pools\":" + std::to_string(n_) + "}";
  (void)client_->send(proto::encode(proto::SubmitJob{spec}), false);
  const auto accept_deadline = Clock::now() + std::chrono::seconds(30);
  while (job_id_ == 0 && f_.error.empty() && Clock::now() < accept_deadline) pump(Millis(20));
  if (job_id_ == 0) {
    if (f_.error.empty()) f_.error = "the interchange did not accept the job within 30 s";
    return;
  }
  const double cpu0 = proc_cpu_s(ix_pid_);
  const auto t0 = Clock::now();
  std::uint64_t submitted = 0;
  proto::SubmitTasks frame{job_id_, {}};
  while (submitted < o_.minibatches && !ended_ && f_.error.empty()) {
    // Stay within the window of unfinished mini-batches, as the client does.
    const std::uint64_t finished = progress_.succeeded + progress_.failed;
    if (submitted + kFrameBatches > finished + window_ && submitted >= finished + window_ / 2) {
      pump(Millis(20));
      continue;
    }
    const std::uint64_t k = std::min(kFrameBatches, o_.minibatches - submitted);
    frame.batches.resize(k);
    for (std::uint64_t j = 0; j < k; ++j) {
      frame.batches[j].index = submitted + j;
      frame.batches[j].items = {"item-" + std::to_string(submitted + j)};
    }
    submitted += k;
    (void)client_->send(proto::encode(frame, 64 + k * 48), false);
    pump(Millis(0));
  }
  (void)client_->send(proto::encode(proto::SubmitEnd{job_id_, submitted}), false);
  const auto end_deadline = Clock::now() + std::chrono::seconds(600);
  while (!ended_ && f_.error.empty() && Clock::now() < end_deadline) pump(Millis(50));
  f_.job_s = seconds_since(t0);
  f_.minibatches = submitted;
  if (!ended_) {
    if (f_.error.empty()) f_.error = "the job did not end within 600 s of its SubmitEnd";
    return;
  }
  const double cpu1 = proc_cpu_s(ix_pid_);
  if (cpu0 >= 0 && cpu1 >= 0) {
    // The logs/ report written after the final commit is a per-job cost, not a per-mini-batch
    // one (as fanout perf counts it).
    f_.job_cpu_s = cpu1 - cpu0 - ended_->report_cpu_s;
    f_.cpu_per_minibatch_us =
        f_.job_cpu_s * 1e6 / static_cast<double>(std::max<std::uint64_t>(submitted, 1));
  }
  f_.succeeded = ended_->progress.succeeded;
}

void Load::measure_lost() {
  if (sims_.empty() || db_.empty()) return;
  // The last pool goes silent right after it spoke: from then on it sends nothing, and reads
  // what comes only to see a Reject (or a Shutdown, or the retired Drain, which mean the same).
  auto& victim = sims_.back();
  const std::size_t vi = sims_.size() - 1;
  const std::string hb = proto::encode(proto::Heartbeat{o_.workers + o_.prefetch});
  (void)socks_[vi].send(hb);
  const auto t0 = Clock::now();
  victim.last_sent = t0;
  victim.silent = true;
  fanout::store::Db db(db_, fanout::store::Db::Mode::ReadOnly);
  // By the id its Registered gave it: with --interchange, an earlier run's pool of the same
  // name may already be `lost`.
  const std::string query =
      "SELECT count(*) FROM pools WHERE id = " + std::to_string(victim.id) + " AND state = 'lost'";
  const auto deadline =
      t0 + Millis(o_.heartbeat_threshold_ms) + 4 * period() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    pump(Millis(10));
    if (silent_told_) {
      f_.lost_after_ms = std::chrono::duration<double, std::milli>(*silent_told_ - t0).count();
      f_.lost_seen = silent_told_by_;
      return;
    }
    bool lost = false;
    try {
      lost = db.query_int(query.c_str()) > 0;
    } catch (const fanout::Failure&) {
      // The writer holds a lock for a moment: ask again next turn.
    }
    if (lost) {
      f_.lost_after_ms = seconds_since(t0) * 1e3;
      f_.lost_seen = "store";
      return;
    }
  }
}

Figures Load::run() {
  f_.pools = n_;
  const double tool_cpu0 = self_cpu_s();
  char tmpl[] = "/tmp/fanout-pool-load-XXXXXX";
  if (!o_.dir.empty()) {
    dir_ = o_.dir + "/n" + std::to_string(n_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
    (void)fanout::make_dirs(dir_);
  } else if (const char* d = ::mkdtemp(tmpl); d != nullptr) {
    dir_ = d;
  } else {
    f_.error = "mkdtemp failed";
    return f_;
  }
  try {
    start_interchange();
    const auto t_reg = Clock::now();
    open_pools(per_process_);
    // Our pools count their Registered; the helpers' show in the store.
    auto all_registered = [&] {
      if (f_.registered < sims_.size()) return false;
      if (helpers_.empty()) return true;
      return connected_in_store() >= static_cast<std::int64_t>(n_);
    };
    const auto reg_deadline = t_reg + std::chrono::seconds(60) + Millis(10 * n_);
    while (!all_registered() && Clock::now() < reg_deadline) pump(Millis(20));
    f_.register_s = seconds_since(t_reg);
    if (!all_registered()) {
      f_.error = std::to_string(f_.registered) + " of this process's " +
                 std::to_string(sims_.size()) + " pools registered in time, " +
                 std::to_string(connected_in_store()) + " of " + std::to_string(n_) +
                 " connected in the store";
    } else {
      f_.registered = n_;
    }
    if (f_.error.empty()) {
      // Idle: every pool heartbeats, the interchange heartbeats back and checks for silence.
      const auto settle = Clock::now() + period();
      while (Clock::now() < settle) pump(Millis(20));
      const double cpu0 = proc_cpu_s(ix_pid_);
      const auto t0 = Clock::now();
      const auto until = t0 + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(o_.idle_seconds));
      while (Clock::now() < until) pump(Millis(20));
      const double cpu1 = proc_cpu_s(ix_pid_);
      if (cpu0 >= 0 && cpu1 >= 0) f_.idle_cpu_per_s = (cpu1 - cpu0) / seconds_since(t0);
      run_job();
      if (f_.job_cpu_s >= 0 && f_.idle_cpu_per_s >= 0 && f_.minibatches > 0) {
        f_.net_cpu_per_minibatch_us = (f_.job_cpu_s - f_.idle_cpu_per_s * f_.job_s) * 1e6 /
                                      static_cast<double>(f_.minibatches);
      }
    }
    if (f_.error.empty() && !o_.no_lost) measure_lost();
    f_.peak_rss_kb = proc_status_kb(ix_pid_, "VmHWM");
    // JobEnded is sent once the job's final state is durable: read what the store committed.
    if (job_id_ != 0 && ended_ && !db_.empty()) {
      fanout::store::StoreReader reader(db_);
      if (auto j = reader.job(job_id_)) {
        f_.attempts = j->attempts;
        f_.committed = j->succeeded;
      }
    }
  } catch (const fanout::Failure& e) {
    if (f_.error.empty()) f_.error = e.what();
  }
  // Sockets go before their contexts; the interchange we started is stopped (SIGTERM).
  db_reader_.reset();
  client_.reset();
  poller_.reset();
  socks_.clear();
  contexts_.clear();
  stop_helpers();
  if (ix_.valid()) (void)ix_.stop();
  f_.tool_cpu_s = self_cpu_s() - tool_cpu0;
  f_.ok = f_.error.empty() && f_.minibatches == o_.minibatches && f_.succeeded == o_.minibatches &&
          f_.attempts == o_.minibatches && f_.committed == o_.minibatches;
  if (f_.error.empty() && !f_.ok) {
    f_.error = "counts differ: " + std::to_string(f_.minibatches) + " submitted, " +
               std::to_string(f_.succeeded) + " succeeded, " + std::to_string(f_.attempts) +
               " attempts and " + std::to_string(f_.committed) + " succeeded in the store";
  }
  if (!o_.keep && o_.dir.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  return f_;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

void print(const Figures& f, const Options& o) {
  using ull = unsigned long long;
  if (o.json) {
    std::printf(
        "{\"pools\":%llu,\"processes\":%llu,\"registered\":%llu,\"register_s\":%.3f,"
        "\"idle_cpu_per_s\":%.5f,\"minibatches\":%llu,\"job_s\":%.3f,\"job_cpu_s\":%.4f,"
        "\"cpu_per_minibatch_us\":%.2f,\"net_cpu_per_minibatch_us\":%.2f,"
        "\"lost_after_ms\":%.1f,\"lost_seen\":%s,\"peak_rss_kb\":%ld,\"succeeded\":%llu,"
        "\"attempts\":%llu,\"committed_succeeded\":%llu,\"rejects\":%llu,\"tool_cpu_s\":%.3f,"
        "\"heartbeat_period_ms\":%u,\"heartbeat_threshold_ms\":%u,\"workers\":%u,"
        "\"prefetch\":%u,\"ok\":%s,\"error\":%s}\n",
        static_cast<ull>(f.pools), static_cast<ull>(f.processes), static_cast<ull>(f.registered),
        f.register_s, f.idle_cpu_per_s, static_cast<ull>(f.minibatches), f.job_s, f.job_cpu_s,
        f.cpu_per_minibatch_us, f.net_cpu_per_minibatch_us, f.lost_after_ms,
        json_quote(f.lost_seen).c_str(), f.peak_rss_kb, static_cast<ull>(f.succeeded),
        static_cast<ull>(f.attempts), static_cast<ull>(f.committed), static_cast<ull>(f.rejects),
        f.tool_cpu_s, o.heartbeat_period_ms, o.heartbeat_threshold_ms, o.workers, o.prefetch,
        f.ok ? "true" : "false", json_quote(f.error).c_str());
  } else {
    std::printf(
        "pools=%llu cpu_per_minibatch=%.1fus (net of heartbeats %.1fus) idle_cpu=%.2f%% "
        "lost_after=%.0fms(%s) peak_rss=%ldkB minibatches=%llu job=%.2fs attempts=%llu %s%s\n",
        static_cast<ull>(f.pools), f.cpu_per_minibatch_us, f.net_cpu_per_minibatch_us,
        f.idle_cpu_per_s * 100.0, f.lost_after_ms, f.lost_seen.empty() ? "-" : f.lost_seen.c_str(),
        f.peak_rss_kb, static_cast<ull>(f.minibatches), f.job_s, static_cast<ull>(f.attempts),
        f.ok ? "ok" : "FAILED: ", f.error.c_str());
  }
  std::fflush(stdout);
}

std::string default_interchange_bin() {
  if (const char* e = std::getenv("FANOUT_INTERCHANGE_BIN"); e != nullptr && *e != '\0') return e;
  // Next to us when installed; ../interchange/ in a build tree.
  for (const std::string& cand : {fanout::self_dir() + "/fanout-interchange",
                                  fanout::self_dir() + "/../interchange/fanout-interchange"}) {
    if (fs::exists(cand)) return cand;
  }
  return "fanout-interchange";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fanout-pool-load: N simulated pools against one interchange (docs/scaling.md)"};
  Options o;
  app.add_option("-n,--pools", o.pools, "pool counts to measure, one run each")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("-m,--minibatches", o.minibatches, "no-op mini-batches in each run's job")
      ->capture_default_str();
  app.add_option("--workers", o.workers, "workers each simulated pool registers")
      ->capture_default_str();
  app.add_option("--prefetch", o.prefetch, "prefetch each simulated pool registers")
      ->capture_default_str();
  app.add_option("--heartbeat-period-ms", o.heartbeat_period_ms, "given to the interchange")
      ->capture_default_str();
  app.add_option("--heartbeat-threshold-ms", o.heartbeat_threshold_ms, "given to the interchange")
      ->capture_default_str();
  app.add_option("--idle-seconds", o.idle_seconds, "how long idle heartbeating is measured")
      ->capture_default_str();
  app.add_option("--window", o.window, "given to the interchange")->capture_default_str();
  app.add_option("--interchange", o.interchange,
                 "pool endpoint of a running interchange (default: start one per run)");
  app.add_option("--client-endpoint", o.client_endpoint,
                 "its client endpoint (with --interchange)");
  app.add_option("--interchange-pid", o.interchange_pid,
                 "its pid, for CPU and memory (with --interchange)");
  app.add_option("--db", o.db, "its store: the job's rows, the lost pool's (with --interchange)");
  app.add_option("--keys", o.security.keys_dir,
                 "key folder for a tcp:// --interchange (default: $FANOUT_KEYS, else "
                 "~/.config/fanout/keys); its pool and client keys are used");
  app.add_flag("--insecure", o.security.insecure,
               "plaintext tcp:// (loopback addresses only): to --interchange, or for the "
               "interchange the tool starts (default: Curve with keys made for the run)");
  app.add_option("--interchange-bin", o.interchange_bin, "the fanout-interchange to start");
  app.add_option("--dir", o.dir, "keep each run's store and logs in DIR/n<N>");
  app.add_flag("--keep", o.keep, "keep the temporary folders");
  app.add_flag("--no-lost", o.no_lost, "skip the lost-pool measurement");
  app.add_flag("--json", o.json, "one JSON object per line");
  CLI11_PARSE(app, argc, argv);
  if (o.pools.empty() || o.minibatches == 0 || o.workers == 0 || o.heartbeat_period_ms == 0 ||
      o.heartbeat_threshold_ms <= o.heartbeat_period_ms || o.idle_seconds < 0) {
    std::fprintf(stderr,
                 "error: need --pools, --minibatches > 0, --workers > 0, and "
                 "--heartbeat-threshold-ms > --heartbeat-period-ms > 0\n");
    return 2;
  }
  if (!o.interchange.empty() && (o.client_endpoint.empty() || o.db.empty())) {
    std::fprintf(stderr, "error: --interchange needs --client-endpoint and --db (its store)\n");
    return 2;
  }
  if (o.interchange_bin.empty()) o.interchange_bin = default_interchange_bin();
  const std::uint64_t most = *std::max_element(o.pools.begin(), o.pools.end());
  const rlim_t need = static_cast<rlim_t>(2 * most) + kSpareFds;
  const rlim_t have = raise_open_files(need);
  const std::uint64_t per_process =
      have > 2 * kSpareFds ? static_cast<std::uint64_t>((have - kSpareFds) / 2) : 1;
  bool all_ok = true;
  for (std::uint64_t n : o.pools) {
    Load load(o, n, per_process);
    Figures f = load.run();
    print(f, o);
    all_ok = all_ok && f.ok;
  }
  return all_ok ? 0 : 1;
}
