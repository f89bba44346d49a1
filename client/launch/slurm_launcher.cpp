// The Slurm launcher's I/O: sbatch, squeue, scancel. See slurm_launcher.hpp.
#include "client/launch/slurm_launcher.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "client/launch/embedded.hpp"
#include "client/launch/pool_address.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/child_process.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/fs.hpp"
#include "fanout/util/json.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

struct Output {
  ExitStatus status{};
  std::string out{}, err{};
};

// Runs a Slurm command, its output captured in files of `dir`; a command that hangs (slurmctld
// unreachable) is stopped after 30 s.
Output run_command(const std::vector<std::string>& argv, const std::string& dir) {
  Output o;
  const std::string out = dir + "/.cmd.out", err = dir + "/.cmd.err";
  std::error_code ec;
  fs::remove(out, ec);
  fs::remove(err, ec);
  auto child = ChildProcess::spawn(
      SpawnOptions{.argv = argv, .stdin_file = "null", .stdout_file = out, .stderr_file = err});
  if (!child) {
    o.status.code = 127;
    o.err = child.error().message;
    return o;
  }
  child->set_grace(std::chrono::milliseconds(1000));
  auto st = child->wait_for(std::chrono::seconds(30));
  o.status = st ? *st : child->stop();
  if (auto t = read_file(out)) o.out = *t;
  if (auto t = read_file(err)) o.err = *t;
  fs::remove(out, ec);
  fs::remove(err, ec);
  while (!o.err.empty() && o.err.back() == '\n') o.err.pop_back();
  return o;
}

std::string join(const std::vector<std::uint64_t>& ids) {
  std::string s;
  for (auto id : ids) s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s;
}

std::vector<std::uint64_t> recorded_ids(const std::string& run_dir) {
  std::vector<std::uint64_t> ids;
  std::ifstream in(run_dir + "/slurm/job_ids");
  std::string line;
  while (std::getline(in, line)) {
    if (auto id = slurm::parse_job_id(line); id != 0) ids.push_back(id);
  }
  return ids;
}

std::string user_name() {
  if (const char* u = std::getenv("USER"); u != nullptr && *u != '\0') return u;
  return std::to_string(::getuid());
}

// The states of this user's jobs, or nullopt when squeue failed (then nothing is concluded).
std::optional<std::map<std::uint64_t, std::string>> query_states(const std::string& dir) {
  auto o = run_command({"squeue", "-h", "-t", "all", "-u", user_name(), "-o", "%i %T"}, dir);
  if (!o.status.success()) return std::nullopt;
  return slurm::parse_squeue(o.out);
}

}  // namespace

SlurmLauncher::SlurmLauncher(Options opts, Logger log)
    : o_(std::move(opts)),
      log_(std::move(log)),
      policy_(o_.nodes, o_.launch.min_nodes, o_.launch.max_nodes),
      dir_(o_.run_dir + "/slurm"),
      script_(dir_ + "/pools.sbatch"),
      ids_file_(dir_ + "/job_ids") {
  if (auto r = make_dirs(dir_); !r) throw Failure(r.error());
}

SlurmLauncher::~SlurmLauncher() {
  if (!detached_) release();
}

void SlurmLauncher::start(const PoolCommand& pool, std::uint32_t blocks) {
  slurm::ScriptInput in{
      .job_name = o_.job_name, .run_dir = o_.run_dir, .launch = o_.launch, .pool_argv = pool.argv};
  if (auto r = write_file_atomic(script_, slurm::batch_script(in)); !r) throw Failure(r.error());
  std::error_code ec;
  fs::permissions(script_, fs::perms::owner_all, fs::perm_options::replace, ec);
  for (std::uint32_t i = 0; i < blocks; ++i) submit();
  refresh(true);
}

void SlurmLauncher::submit() {
  auto o = run_command({"sbatch", "--parsable", script_}, dir_);
  const std::uint64_t id = o.status.success() ? slurm::parse_job_id(o.out) : 0;
  if (id == 0) {
    throw Failure(ErrorCode::Runtime,
                  fmt::format("sbatch {} failed ({}): {}{}", script_, o.status.describe(), o.err,
                              o.status.code == 127 ? " (is Slurm's sbatch on PATH?)" : ""));
  }
  ids_.push_back(id);
  states_[id] = "PENDING";
  FILE* f = std::fopen(ids_file_.c_str(), "a");
  if (f != nullptr) {
    std::fprintf(f, "%llu\n", static_cast<unsigned long long>(id));
    std::fclose(f);
  }
  log_->info("submitted pool job {} ({})", id, script_);
}

std::uint32_t SlurmLauncher::active() const {
  std::uint32_t n = 0;
  for (auto id : ids_) {
    auto it = states_.find(id);
    if (slurm::is_active(it == states_.end() ? "" : it->second)) ++n;
  }
  return n;
}

void SlurmLauncher::refresh(bool now) {
  const auto t = Clock::now();
  if (ids_.empty()) return;  // nothing submitted (sbatch refused the first): nothing to show
  if (!now && t < next_refresh_) return;
  next_refresh_ = t + std::chrono::seconds(2);
  auto states = query_states(dir_);
  if (!states) return;  // slurmctld busy or away: conclude nothing this time
  for (auto id : ids_) {
    auto it = states->find(id);
    if (it != states->end()) {
      states_[id] = it->second;
      missing_.erase(id);
    } else if (++missing_[id] >= 2) {
      // Gone from squeue (ended long ago, or purged). Once is not enough: while a job is being
      // cancelled squeue has been seen to leave it out for a moment.
      states_[id] = std::string();
    }
  }
  // One line whenever a state changes: pending, running, ended (never per task).
  std::string line = slurm::describe_jobs(ids_, states_);
  if (line != shown_) {
    shown_ = line;
    log_->info("pool jobs: {}", line);
    if (!o_.quiet) std::fprintf(stderr, "fanout: pool jobs: %s\n", line.c_str());
  }
}

std::string SlurmLauncher::poll() {
  if (released_ || ids_.empty()) return {};
  refresh(false);
  const std::uint32_t act = active();
  const std::uint32_t more = policy_.replacements(act, static_cast<std::uint32_t>(ids_.size()));
  if (more > 0) {
    try {
      for (std::uint32_t i = 0; i < more; ++i) submit();
      if (!o_.quiet) {
        std::fprintf(stderr,
                     "fanout: submitted %u replacement pool job(s) (%zu of --max-nodes %u)\n", more,
                     ids_.size(), policy_.max_nodes());
      }
      refresh(true);
    } catch (const Failure& f) {
      log_->warn("replacement pool job: {}", f.what());
    }
    return {};
  }
  if (act > 0) return {};
  // A job still COMPLETING has not said how it ended (TIMEOUT, CANCELLED, NODE_FAIL, ...): wait
  // for that a while (Slurm's KillWait and epilog), so the message below can say why.
  const auto now = Clock::now();
  if (settle_until_ == Clock::time_point{}) settle_until_ = now + std::chrono::seconds(60);
  const bool completing = std::any_of(states_.begin(), states_.end(), [](const auto& s) {
    return s.second.rfind("COMPLETING", 0) == 0;
  });
  if (completing && now < settle_until_) return {};
  const std::uint64_t last = ids_.back();
  const std::string out = fmt::format("{}/pools-{}.out", dir_, last);
  return fmt::format(
      "every pool job ended ({}) and --max-nodes {} allows no replacement{}; pool logs under "
      "{}/logs/sys/node/, the last job's output in {}:{}",
      shown_, policy_.max_nodes(), slurm::end_advice(last, states_[last], o_.launch), o_.run_dir,
      out, tail_of(out, 10));
}

void SlurmLauncher::release() {
  if (released_ || detached_) return;
  released_ = true;
  refresh(true);
  std::vector<std::string> argv = {"scancel"};
  for (auto id : ids_) {
    if (slurm::is_active(states_[id])) argv.push_back(std::to_string(id));
  }
  if (argv.size() > 1) {
    auto o = run_command(argv, dir_);
    if (!o.status.success()) log_->warn("scancel: {} ({})", o.err, o.status.describe());
  }
  // Wait (bounded) until Slurm has let go of every node, so nothing outlives the run.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (active() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    refresh(true);
  }
}

std::string SlurmLauncher::release_command() const {
  return fmt::format("ids=$(cat {} 2>/dev/null); [ -z \"$ids\" ] || scancel $ids",
                     slurm::shell_quote(ids_file_));
}

Expected<void> prepare_launcher(RunSettings& rs, const config::JobConfig& cfg,
                                const RunOverrides& ov) {
  if (rs.launch.kind == "local") return {};
  const std::string where =
      cfg.spec_path + (rs.launch.line > 0 ? ":" + std::to_string(rs.launch.line) : "");
  if (!ov.interchange.empty()) {
    return make_error(ErrorCode::InvalidArgument,
                      where + ": launcher " + rs.launch.kind +
                          " starts the job's own interchange; --interchange is for a running "
                          "one (drop one of them)");
  }
  if (auto e = slurm::check_blocks(rs.launch, cfg.instance_count); !e.empty()) {
    return make_error(ErrorCode::InvalidArgument, where + ": " + e);
  }
  // scheduler_options again for the launcher chosen last (--launcher may differ from the file's).
  if (auto e = config::check_scheduler_options(rs.launch.kind, rs.launch.scheduler_options);
      !e.empty()) {
    return make_error(ErrorCode::InvalidArgument,
                      where + ": fanout.scheduler_options (--scheduler-options): " + e);
  }
  auto addr = interchange_address(rs.launch.interchange_address);
  if (!addr) return Unexpected{addr.error()};
  rs.pool_address = *addr;
  return {};
}

std::string slurm_status_line(const std::string& run_dir) {
  auto ids = recorded_ids(run_dir);
  if (ids.empty()) return {};
  auto states = query_states(run_dir + "/slurm");
  if (!states) return "slurm jobs " + join(ids) + " (squeue failed)";
  return slurm::describe_jobs(ids, *states);
}

std::string slurm_status_json(const std::string& run_dir) {
  auto ids = recorded_ids(run_dir);
  if (ids.empty()) return {};
  auto states = query_states(run_dir + "/slurm");
  std::string out = "[";
  for (auto id : ids) {
    std::string state;
    if (states) {
      if (auto it = states->find(id); it != states->end()) state = it->second;
    }
    out += fmt::format("{}{{\"id\":{},\"state\":{}}}", out.size() > 1 ? "," : "", id,
                       json_quote(state));
  }
  return out + "]";
}

std::string release_slurm_jobs(const std::string& run_dir) {
  auto ids = recorded_ids(run_dir);
  if (ids.empty()) return {};
  const std::string dir = run_dir + "/slurm";
  auto states = query_states(dir);
  std::vector<std::string> argv = {"scancel"};
  std::vector<std::uint64_t> cancelled;
  for (auto id : ids) {
    auto it = states ? states->find(id) : std::map<std::uint64_t, std::string>::iterator{};
    // Unknown states (squeue failed): scancel them all; Slurm ignores ended ones.
    if (!states || (it != states->end() && slurm::is_active(it->second))) {
      argv.push_back(std::to_string(id));
      cancelled.push_back(id);
    }
  }
  if (cancelled.empty()) return {};
  (void)run_command(argv, dir);
  return join(cancelled);
}

Expected<std::string> interchange_address(const std::string& given) {
  if (!given.empty()) return given;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    return make_error(ErrorCode::NotFound,
                      "cannot list network interfaces; give "
                      "--interchange-address (fanout.interchange_address)");
  }
  std::vector<InterfaceAddress> found;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    InterfaceAddress x{.name = a->ifa_name != nullptr ? a->ifa_name : "", .flags = a->ifa_flags};
    char buf[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr != nullptr) x.family = a->ifa_addr->sa_family;
    if (x.family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      if (::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf) != nullptr) x.address = buf;
    } else if (x.family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      if (::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf) != nullptr) x.address = buf;
    }
    found.push_back(std::move(x));
  }
  ::freeifaddrs(list);
  return choose_pool_address(found);
}

}  // namespace fanout::client
