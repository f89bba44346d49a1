// The embedded default: a private interchange and local pools. See embedded.hpp.
#include "client/launch/embedded.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "client/launch/hpc_launcher.hpp"
#include "client/launch/run_plan.hpp"
#include "client/launch/sge_launcher.hpp"
#include "client/launch/slurm_launcher.hpp"
#include "client/launch/ssh_launcher.hpp"
#include "fanout/net/keys.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/protocol/ready_file.hpp"
#include "fanout/store/owner_lock.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/fs.hpp"
#include "fanout/util/test_hooks.hpp"

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

// Test hook (test builds only): with FANOUT_TEST_HOLD_GUEST=PATH, a run that has just attached to
// the store's owner creates PATH and waits (up to 60 s) until it is removed, so that a test can
// make the owner go away at this instant.
void hold_as_guest() {
  const auto hook = test_hooks::env("FANOUT_TEST_HOLD_GUEST");
  if (!hook || hook->empty()) return;
  const std::string path(*hook);
  if (auto r = write_file_atomic(path, "attached\n"); !r) return;
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (fs::exists(path) && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

// The private interchange and pools of the embedded default: the plan (run_plan.hpp), then
// each of its steps.
Embedded::Embedded(const RunSettings& rs, const std::string& db, const std::string& run_dir,
                   Logger log)
    : log_(std::move(log)), db_(db) {
  EmbeddedFacts facts{
      .interchange_bin = find_binary("FANOUT_INTERCHANGE_BIN", "fanout-interchange", "interchange"),
      .pool_bin = find_binary("FANOUT_POOL_BIN", "fanout-pool", "pool"),
  };
  if (rs.transport == Transport::Ipc) {
    auto dir = net::make_private_ipc_dir();
    if (!dir) throw Failure(dir.error());
    ipc_dir_ = *dir;
    facts.ipc_dir = ipc_dir_;
  }
  if (rs.transport == Transport::Curve && !rs.keys_dir.empty()) {
    facts.keys_exist = fs::exists(net::secret_key_path(rs.keys_dir, "interchange"));
  }
  const InterchangePlan plan = plan_interchange(rs, db, run_dir, facts);
  (void)make_dirs(plan.sys_dir);
  ready_ = plan.ready_file;
  ix_log_ = plan.log_file;
  security_ = plan.security;
  make_keys(plan);
  const proto::ReadyFile ready = start_interchange(plan);
  client_ep_ = ready.client;
  std::vector<std::string> pool_security = plan.pool_security;
  if (guest_) {
    // The owner's transport and keys, for this client and its pools.
    token_.clear();
    GuestSecurity g = plan_guest(ready);
    security_ = g.security;
    pool_security = g.pool_flags;
    std::fprintf(stderr,
                 "note: the store %s is owned by the running interchange pid %lld; this job runs "
                 "there, with this run's pools\n",
                 db.c_str(), static_cast<long long>(ready.pid));
    hold_as_guest();
  }
  pool_ep_ = pool_endpoint_for(ready.pool, host_name());
  PoolCommand pool;
  pool.argv = plan_pool_argv(rs, facts.pool_bin, pool_ep_, pool_security);
  pool.workers = rs.workers;
  if (plan_launcher(rs) == LauncherKind::Slurm) {
    launcher_ = std::make_unique<SlurmLauncher>(SlurmLauncher::Options{.launch = rs.launch,
                                                                       .nodes = rs.pools,
                                                                       .job_name = rs.job_name,
                                                                       .run_dir = run_dir,
                                                                       .quiet = rs.quiet},
                                                log_);
  } else if (plan_launcher(rs) == LauncherKind::Sge) {
    launcher_ = std::make_unique<SgeLauncher>(SgeLauncher::Options{.launch = rs.launch,
                                                                   .nodes = rs.pools,
                                                                   .job_name = rs.job_name,
                                                                   .run_dir = run_dir,
                                                                   .quiet = rs.quiet},
                                              log_);
  } else if (plan_launcher(rs) == LauncherKind::Ssh) {
    launcher_ = std::make_unique<SshLauncher>(SshLauncher::Options{.launch = rs.launch,
                                                                   .nodes = rs.pools,
                                                                   .run_dir = run_dir,
                                                                   .cwd = fs::current_path(),
                                                                   .quiet = rs.quiet},
                                              log_);
  } else if (auto sched = hpc::scheduler_of(rs.launch.kind)) {
    launcher_ = std::make_unique<HpcLauncher>(HpcLauncher::Options{.scheduler = *sched,
                                                                   .launch = rs.launch,
                                                                   .nodes = rs.pools,
                                                                   .job_name = rs.job_name,
                                                                   .run_dir = run_dir,
                                                                   .quiet = rs.quiet},
                                              log_);
  } else {
    launcher_ = std::make_unique<LocalLauncher>(run_dir, log_);
  }
  if (rs.exit_with_client) start_watchdog();
  launcher_->start(pool, rs.pools);
}

void Embedded::make_keys(const InterchangePlan& plan) {
  if (plan.keys == KeysAction::MakeFresh) {
    std::error_code ec;
    fs::remove_all(plan.security.keys_dir, ec);
  }
  if (plan.keys == KeysAction::None) return;
  if (auto r = net::make_key_folder(plan.security.keys_dir); !r) throw Failure(r.error());
  if (plan.keys == KeysAction::Make) {
    log_->info("made the key folder {} (as fanout keygen does)", plan.security.keys_dir);
  }
}

proto::ReadyFile Embedded::start_interchange(const InterchangePlan& plan) {
  SpawnOptions so;
  so.argv = plan.argv;
  so.stdin_file = "null";
  so.stderr_file = ix_log_;
  {
    std::random_device rd;
    token_ = fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
  }
  so.env_set.emplace_back("FANOUT_SHUTDOWN_TOKEN", token_);
  so.new_process_group = true;  // Ctrl-C reaches the client only; it stops the job in order
  // Wait for the endpoints. An interchange that finds the store owned by another live one
  // exits kExitStoreOwned: this run's job then goes to that owner (docs/store.md, section 1);
  // should the owner be gone meanwhile, a private interchange is started again.
  // The ready file once our own interchange wrote it; nullopt before. Not removed first: a
  // ready file there may be another live run's on the same run folder (two `fanout resume`s of
  // one job), and the pid tells an old or foreign one from ours.
  auto own_ready = [&]() -> std::optional<proto::ReadyFile> {
    auto t = read_file(ready_);
    if (!t) return std::nullopt;
    auto r = proto::parse_ready(*t, ready_);
    if (!r || r->pid != ix_.pid()) return std::nullopt;
    return *r;
  };
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  std::optional<proto::ReadyFile> ready;
  while (!ready) {
    if (!ix_.valid() || ix_.poll()) {
      auto ix = ChildProcess::spawn(so);
      if (!ix) throw Failure(ix.error());
      ix_ = std::move(*ix);
    }
    while (!own_ready()) {
      if (auto st = ix_.poll()) {
        if (st->code == proto::kExitStoreOwned) {
          ready = owner_endpoints(deadline);
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
    if (!guest_) ready = own_ready();
  }
  return *ready;
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

std::optional<proto::ReadyFile> Embedded::owner_endpoints(Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    auto found = store::find_owner(db_);
    if (!found) throw Failure(found.error());
    const auto& owner = *found;
    if (!owner) return std::nullopt;  // gone meanwhile: start a private interchange again
    auto published = proto::parse_ready(owner->text, store::owner_file(db_));
    if (published && !published->client.empty()) {
      guest_ = true;
      owner_pid_ = owner->pid;
      return *published;
    }
    // Not published yet: a new owner (what the file holds may be its dead predecessor's, which
    // find_owner does not return), or caught half-written.
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

void Embedded::stop_unused() {
  if (launcher_) launcher_->release_now();
  if (!guest_) ix_.stop();  // SIGTERM: it closes the store and its sockets as on Ctrl-C
  stop();
}

void Embedded::detach() {
  detached_ = true;
  (void)ix_.release();
  (void)watchdog_.release();  // --exit-with-client: it still releases the pools when we exit
  if (launcher_) launcher_->detach();
}

void Embedded::observe(const proto::JobProgress& p) {
  if (!launcher_) return;
  Load load{.job_id = p.job_id, .in_flight = p.in_flight, .db = db_};
  const std::uint64_t done = p.succeeded + p.failed + p.in_flight;
  load.backlog = p.submitted > done ? p.submitted - done : 0;
  for (const auto& i : p.idle_pools) load.idle_pools.emplace_back(i.name, i.idle_s);
  launcher_->observe(load);
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
