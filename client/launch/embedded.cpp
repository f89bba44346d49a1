// The embedded default: a private interchange and local pools. See embedded.hpp.
#include "client/launch/embedded.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "client/launch/slurm_launcher.hpp"
#include "fanout/net/keys.hpp"
#include "fanout/store/owner_lock.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

std::string find_binary(const char* env, const char* name, const char* build_subdir) {
  if (const char* e = std::getenv(env); e != nullptr && *e != '\0') return e;
  const std::string self = self_dir();
  for (const std::string& cand : {self + "/" + name, self + "/../" + build_subdir + "/" + name}) {
    if (fs::exists(cand)) return fs::path(cand).lexically_normal().string();
  }
  return name;  // from PATH
}

std::string ready_value(const std::string& text, std::string_view key) {
  for (std::size_t pos = 0; pos < text.size();) {
    auto nl = text.find('\n', pos);
    std::string_view line = std::string_view(text).substr(pos, nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == '=') {
      return std::string(line.substr(key.size() + 1));
    }
  }
  return {};
}

std::string tail_of(const std::string& path, std::size_t lines) {
  auto text = read_file(path);
  if (!text) return {};
  std::string s = *text;
  std::size_t pos = s.size();
  for (std::size_t n = 0; n <= lines && pos > 0; ++n) {
    pos = s.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
  }
  return s.substr(pos);
}

namespace {

// Test only: with FANOUT_TEST_HOLD_GUEST=PATH, a run that has just attached to the store's owner
// creates PATH and waits (up to 60 s) until it is removed, so that a test can make the owner go
// away at this instant (tests/integration/store_owner_test.cpp).
void hold_as_guest() {
  const char* path = std::getenv("FANOUT_TEST_HOLD_GUEST");
  if (path == nullptr || *path == '\0') return;
  if (auto r = write_file_atomic(path, "attached\n"); !r) return;
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (fs::exists(path) && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

// The private interchange and pools of the embedded default.
Embedded::Embedded(const RunSettings& rs, const std::string& db, const std::string& run_dir,
                   Logger log)
    : log_(std::move(log)) {
  const std::string sys_dir = run_dir + "/logs/sys";
  (void)make_dirs(sys_dir);
  ready_ = run_dir + "/interchange.ready";
  std::error_code ec;
  ix_log_ = sys_dir + "/interchange.log";
  SpawnOptions so;
  so.argv = {find_binary("FANOUT_INTERCHANGE_BIN", "fanout-interchange", "interchange"),
             "--db",
             db,
             "--ready-file",
             ready_,
             "--exit-when-idle",
             "--heartbeat-period-ms",
             std::to_string(rs.heartbeat_period_ms),
             "--heartbeat-threshold-ms",
             std::to_string(rs.heartbeat_threshold_ms),
             "--log-level",
             rs.log_level,
             "--log-file",
             ix_log_};
  // The private interchange runs as this user, for this user's clients (a 0700 ipc folder, or
  // this user's keys), so it may write wherever the client names, as the client itself could;
  // a shared interchange keeps its operator's roots (docs/security.md).
  so.argv.push_back("--write-root");
  so.argv.push_back("/");
  if (rs.window > 0) {
    so.argv.push_back("--window");
    so.argv.push_back(std::to_string(rs.window));
  }
  if (rs.reopen_failed > 0) {
    so.argv.push_back("--reopen-failed");
    so.argv.push_back(std::to_string(rs.reopen_failed));
  }
  // Where the interchange listens, and the flags the pools need to reach it.
  std::vector<std::string> security_flags;
  switch (rs.transport) {
    case Transport::Ipc: {
      // No other local user can enter the folder, so nothing needs keys.
      auto dir = net::make_private_ipc_dir();
      if (!dir) throw Failure(dir.error());
      ipc_dir_ = *dir;
      for (const std::string& a :
           {std::string("--client-endpoint"), "ipc://" + ipc_dir_ + "/client",
            std::string("--pool-endpoint"), "ipc://" + ipc_dir_ + "/pool"}) {
        so.argv.push_back(a);
      }
      break;
    }
    case Transport::Tcp:
      security_.insecure = true;
      security_flags = {"--insecure"};
      break;
    case Transport::Curve:
      if (rs.keys_dir.empty()) {  // keys of this run only (fanout perf --curve)
        security_.keys_dir = run_dir + "/keys";
        fs::remove_all(security_.keys_dir, ec);
        if (auto r = net::make_key_folder(security_.keys_dir); !r) throw Failure(r.error());
      } else {
        // The user's key folder, which pools on other nodes read too (a shared home folder);
        // made as `fanout keygen` would when missing, so a first run needs no setup.
        security_.keys_dir = rs.keys_dir;
        if (!fs::exists(net::secret_key_path(rs.keys_dir, "interchange"))) {
          if (auto r = net::make_key_folder(rs.keys_dir); !r) throw Failure(r.error());
          log_->info("made the key folder {} (as fanout keygen does)", rs.keys_dir);
        }
      }
      security_flags = {"--keys", security_.keys_dir};
      break;
  }
  if (!rs.pool_address.empty()) {
    so.argv.push_back("--pool-endpoint");
    so.argv.push_back("tcp://" + rs.pool_address + ":*");
  }
  so.argv.insert(so.argv.end(), security_flags.begin(), security_flags.end());
  so.stdin_file = "null";
  so.stderr_file = ix_log_;
  {
    std::random_device rd;
    token_ = fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
  }
  so.env_set.emplace_back("FANOUT_SHUTDOWN_TOKEN", token_);
  so.new_process_group = true;  // Ctrl-C reaches the client only; it stops the job in order
  // Wait for the endpoints. An interchange that finds the store owned by another live one
  // exits 4: this run's job then goes to that owner (docs/store.md, section 1); should the owner
  // be gone meanwhile, a private interchange is started again.
  db_ = db;
  // The ready file's text once our own interchange wrote it; "" before. Not removed first: a
  // ready file there may be another live run's on the same run folder (two `fanout resume`s of
  // one job), and the pid tells an old or foreign one from ours.
  auto own_ready = [&]() -> std::string {
    auto t = read_file(ready_);
    if (!t || ready_value(*t, "pid") != std::to_string(ix_.pid())) return {};
    return *t;
  };
  auto deadline = Clock::now() + std::chrono::seconds(30);
  std::string text;
  while (text.empty()) {
    if (!ix_.valid() || ix_.poll()) {
      auto ix = ChildProcess::spawn(so);
      if (!ix) throw Failure(ix.error());
      ix_ = std::move(*ix);
    }
    while (own_ready().empty()) {
      if (auto st = ix_.poll()) {
        if (st->code == 4) {
          text = owner_endpoints(deadline);
          break;
        }
        throw Failure(ErrorCode::Runtime, "the interchange exited at start (" + st->describe() +
                                              "):" + tail_of(ix_log_, 10));
      }
      if (Clock::now() > deadline) {
        throw Failure(ErrorCode::Runtime,
                      "the interchange did not start within 30 s: see " + ix_log_);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!guest_) text = own_ready();
  }
  client_ep_ = ready_value(text, "client");
  pool_ep_ = ready_value(text, "pool");
  if (guest_) {
    // The owner's transport and keys, for this client and its pools.
    token_.clear();
    security_ = net::Security{};
    security_flags.clear();
    const std::string security = ready_value(text, "security");
    if (security == "insecure") {
      security_.insecure = true;
      security_flags = {"--insecure"};
    } else if (security == "curve") {
      security_.keys_dir = ready_value(text, "keys");
      if (!security_.keys_dir.empty()) security_flags = {"--keys", security_.keys_dir};
    }
    std::fprintf(stderr,
                 "note: the store %s is owned by the running interchange pid %s; this job runs "
                 "there, with this run's pools\n",
                 db.c_str(), ready_value(text, "pid").c_str());
    hold_as_guest();
  }
  // Pools bound to a wildcard address reach it by this host's name.
  for (const char* any : {"tcp://0.0.0.0:", "tcp://*:"}) {
    if (pool_ep_.rfind(any, 0) == 0) {
      pool_ep_ = "tcp://" + host_name() + ":" + pool_ep_.substr(std::string(any).size());
    }
  }
  PoolCommand pool;
  pool.argv = {find_binary("FANOUT_POOL_BIN", "fanout-pool", "pool"),
               "--interchange",
               pool_ep_,
               "--prefetch",
               std::to_string(rs.prefetch),
               "--poll-ms",
               std::to_string(rs.poll_ms),
               "--exit-on-lost",
               "--heartbeat-period-ms",
               std::to_string(rs.heartbeat_period_ms),
               "--heartbeat-threshold-ms",
               std::to_string(rs.heartbeat_threshold_ms),
               "--log-level",
               rs.log_level};
  if (rs.workers > 0) {  // 0 (a pool on a cluster node): the node's cores
    pool.argv.push_back("--workers");
    pool.argv.push_back(std::to_string(rs.workers));
  }
  pool.argv.insert(pool.argv.end(), security_flags.begin(), security_flags.end());
  if (!rs.python.empty()) {
    pool.argv.push_back("--python");
    pool.argv.push_back(rs.python);
  }
  if (rs.resource_monitor_interval_s > 0) {
    pool.argv.push_back("--resource-monitor-interval");
    pool.argv.push_back(fmt::format("{}", rs.resource_monitor_interval_s));
  }
  if (rs.launch.kind == "slurm") {
    launcher_ = std::make_unique<SlurmLauncher>(SlurmLauncher::Options{.launch = rs.launch,
                                                                       .nodes = rs.pools,
                                                                       .job_name = rs.job_name,
                                                                       .run_dir = run_dir,
                                                                       .quiet = rs.quiet},
                                                log_);
  } else {
    launcher_ = std::make_unique<LocalLauncher>(run_dir, log_);
  }
  pool.workers = rs.workers;
  if (rs.exit_with_client) start_watchdog();
  launcher_->start(pool, rs.pools);
}

void Embedded::start_watchdog() {
  // A shell in its own process group that outlives the client: once the client's pid is gone
  // (SIGKILL included), it releases the pools and stops the interchange. stop() ends it first.
  const std::string release = launcher_->release_command();
  SpawnOptions w;
  w.argv = {"/bin/sh", "-c",
            fmt::format("while kill -0 {} 2>/dev/null; do sleep 1; done; {}{}kill -TERM {} "
                        "2>/dev/null",
                        ::getpid(), release, release.empty() ? "" : "; ", ix_.pid())};
  w.stdin_file = "null";
  w.stdout_file = "/dev/null";
  w.stderr_file = "/dev/null";
  w.new_process_group = true;
  auto p = ChildProcess::spawn(w);
  if (!p) throw Failure(p.error());
  watchdog_ = std::move(*p);
}

std::string Embedded::owner_endpoints(Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    auto found = store::find_owner(db_);
    if (!found) throw Failure(found.error());
    const auto& owner = *found;
    if (!owner) return {};  // gone meanwhile: start a private interchange again
    if (!ready_value(owner->text, "client").empty()) {
      guest_ = true;
      owner_pid_ = owner->pid;
      return owner->text;
    }
    // Not published yet: a new owner (what the file holds may be its dead predecessor's, which
    // find_owner does not return).
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw Failure(ErrorCode::Runtime, "the store " + db_ +
                                        " is owned by another interchange, which did not publish "
                                        "its endpoints within 30 s (see " +
                                        store::owner_file(db_) + ")");
}

bool Embedded::interchange_exited() {
  if (guest_) {
    auto owner = store::find_owner(db_);
    return !owner || !*owner || (*owner)->pid != owner_pid_;
  }
  return ix_.poll().has_value();
}

void Embedded::stop() {
  watchdog_.set_grace(std::chrono::milliseconds(200));
  if (!detached_) watchdog_.stop();
  ix_.set_grace(std::chrono::milliseconds(3000));
  (void)ix_.wait_for(std::chrono::seconds(5));  // it exits by itself once told / idle
  ix_.stop();
  if (launcher_) launcher_->release();
  // The interchange removed its socket files when it closed them; the folder goes too.
  if (!ipc_dir_.empty() && !detached_) {
    std::error_code ec;
    fs::remove_all(ipc_dir_, ec);
    ipc_dir_.clear();
  }
}

void Embedded::abandon() {
  if (launcher_) launcher_->release_now();
  stop();
}

void Embedded::detach() {
  detached_ = true;
  (void)ix_.release();
  (void)watchdog_.release();  // --exit-with-client: it still releases the pools when we exit
  if (launcher_) launcher_->detach();
}

std::vector<pid_t> Embedded::pool_pids() const {
  return launcher_ ? launcher_->pids() : std::vector<pid_t>{};
}

std::string Embedded::dead_child() {
  if (guest_) {
    if (interchange_exited()) {
      return fmt::format("the interchange that owned the store {} (pid {}) exited", db_,
                         owner_pid_);
    }
  } else if (auto st = ix_.poll()) {
    return "the interchange exited (" + st->describe() + "):" + tail_of(ix_log_, 10);
  }
  return launcher_ ? launcher_->poll() : std::string();
}

}  // namespace fanout::client
