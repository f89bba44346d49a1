// The Slurm launcher's I/O: sbatch, squeue, scancel. See slurm_launcher.hpp.
#include "client/launch/slurm_launcher.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "client/launch/embedded.hpp"
#include "client/launch/hpc_script.hpp"
#include "client/launch/pool_address.hpp"
#include "client/launch/ssh_script.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/fs.hpp"
#include "fanout/util/json.hpp"

namespace fanout::client {

namespace {

std::string user_name() {
  if (const char* u = std::getenv("USER"); u != nullptr && *u != '\0') return u;
  return std::to_string(::getuid());
}

// Slurm's ids are numbers; the base keeps them as submitted, in decimal.
std::vector<std::uint64_t> numeric(const std::vector<std::string>& ids) {
  std::vector<std::uint64_t> out;
  out.reserve(ids.size());
  for (const auto& id : ids) out.push_back(std::stoull(id));
  return out;
}

// Says once, before anything is submitted, that the pools will not be told their end when the
// walltime is not a time limit fanout reads (the batch scripts then pass no --walltime-end).
void warn_unread_walltime(const std::string& walltime, const std::string& where) {
  if (walltime.empty() || hpc::walltime_seconds(walltime) > 0) return;
  if (walltime == "infinite" || walltime == "unlimited" || walltime == "UNLIMITED") return;
  std::fprintf(stderr,
               "warning: %s: fanout.walltime '%s' is not a time limit fanout reads (M, M:S, "
               "H:M:S, D-H, D-H:M or D-H:M:S): the pools are not told when their allocation "
               "ends and do not drain before it\n",
               where.c_str(), walltime.c_str());
}

}  // namespace

SlurmLauncher::SlurmLauncher(Options opts, Logger log)
    : BatchLauncher(std::move(opts), std::move(log), "slurm", "pools.sbatch", "PENDING") {}

SlurmLauncher::~SlurmLauncher() {
  if (!detached()) release();
}

void SlurmLauncher::write_scripts(const PoolCommand& pool) {
  slurm::ScriptInput in{
      .job_name = o_.job_name, .run_dir = o_.run_dir, .launch = o_.launch, .pool_argv = pool.argv};
  write_script(script_, slurm::batch_script(in));
}

std::string SlurmLauncher::submit_job() {
  auto o = run_command({"sbatch", "--parsable", script_}, dir_);
  const std::uint64_t id = o.status.success() ? slurm::parse_job_id(o.out) : 0;
  if (id == 0) {
    throw Failure(ErrorCode::Runtime,
                  fmt::format("sbatch {} failed ({}): {}{}", script_, o.status.describe(), o.err,
                              o.status.code == 127 ? " (is Slurm's sbatch on PATH?)" : ""));
  }
  return std::to_string(id);
}

std::optional<std::map<std::string, std::string>> SlurmLauncher::query_states() {
  auto o = run_command({"squeue", "-h", "-t", "all", "-u", user_name(), "-o", "%i %T"}, dir_);
  if (!o.status.success()) return std::nullopt;
  std::map<std::string, std::string> out;
  for (auto& [id, state] : slurm::parse_squeue(o.out)) out[std::to_string(id)] = std::move(state);
  return out;
}

bool SlurmLauncher::is_active(const std::string& state) const { return slurm::is_active(state); }

std::string SlurmLauncher::describe() const {
  std::map<std::uint64_t, std::string> states;
  for (const auto& [id, state] : states_) states[std::stoull(id)] = state;
  return slurm::describe_jobs(numeric(ids_), states);
}

std::vector<std::string> SlurmLauncher::drain_command(const std::string& id) const {
  // The signal goes to the job's steps (the pools under srun), not to its batch shell.
  return {"scancel", "--signal=TERM", id};
}

bool SlurmLauncher::runs_in(const std::string& pool, const std::string& id) const {
  return pool.find("-slurm" + id + "-") != std::string::npos;
}

std::vector<std::string> SlurmLauncher::cancel_command(const std::vector<std::string>& ids) const {
  std::vector<std::string> argv = {"scancel"};
  argv.insert(argv.end(), ids.begin(), ids.end());
  return argv;
}

std::optional<BatchLauncher::EndNote> SlurmLauncher::end_note() {
  // A job still COMPLETING has not said how it ended (TIMEOUT, CANCELLED, NODE_FAIL, ...): wait
  // for that a while (Slurm's KillWait and epilog), so the message can say why.
  const auto now = Clock::now();
  if (settle_until_ == Clock::time_point{}) settle_until_ = now + std::chrono::seconds(60);
  const bool completing = std::any_of(states_.begin(), states_.end(), [](const auto& s) {
    return s.second.rfind("COMPLETING", 0) == 0;
  });
  if (completing && now < settle_until_) return std::nullopt;
  const std::string& last = ids_.back();
  const std::string out = fmt::format("{}/pools-{}.out", dir_, last);
  return EndNote{.advice = slurm::end_advice(std::stoull(last), states_[last], o_.launch),
                 .output = fmt::format("the last job's output in {}:{}", out, tail_of(out, 10))};
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
  if (rs.launch.kind == "ssh") {
    if (auto e = ssh::check_hosts(rs.launch.hosts); !e.empty()) {
      return make_error(ErrorCode::InvalidArgument, where + ": " + e);
    }
  }
  warn_unread_walltime(rs.launch.walltime, where);
  auto addr = interchange_address(rs.launch.interchange_address);
  if (!addr) return Unexpected{addr.error()};
  rs.pool_address = *addr;
  return {};
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
