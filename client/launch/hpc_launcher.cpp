// The PBS, LSF and HTCondor launchers' I/O. See hpc_launcher.hpp.
#include "client/launch/hpc_launcher.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include "client/launch/embedded.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/child_process.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

struct Output {
  ExitStatus status{};
  std::string out{}, err{};
};

// Runs a scheduler command, its output captured in files of `dir`; a command that hangs (the
// server unreachable) is stopped after 30 s.
Output run_command(const hpc::Command& c, const std::string& dir) {
  Output o;
  const std::string out = dir + "/.cmd.out", err = dir + "/.cmd.err";
  std::error_code ec;
  fs::remove(out, ec);
  fs::remove(err, ec);
  auto child =
      ChildProcess::spawn(SpawnOptions{.argv = c.argv,
                                       .stdin_file = c.stdin_file.empty() ? "null" : c.stdin_file,
                                       .stdout_file = out,
                                       .stderr_file = err});
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

void write_script(const std::string& path, const std::string& text) {
  if (auto r = write_file_atomic(path, text); !r) throw Failure(r.error());
  std::error_code ec;
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::replace, ec);
}

}  // namespace

HpcLauncher::HpcLauncher(Options opts, Logger log)
    : o_(std::move(opts)),
      log_(std::move(log)),
      policy_(o_.nodes, o_.launch.min_nodes, o_.launch.max_nodes),
      name_(hpc::name_of(o_.scheduler)),
      dir_(o_.run_dir + "/" + name_),
      submit_file_(dir_ +
                   (o_.scheduler == hpc::Scheduler::Condor ? "/pools.sub" : "/pools." + name_)),
      node_script_(dir_ + "/pool-node.sh"),
      ids_file_(dir_ + "/job_ids") {
  if (auto r = make_dirs(dir_); !r) throw Failure(r.error());
}

HpcLauncher::~HpcLauncher() {
  if (!detached_) release();
}

void HpcLauncher::start(const PoolCommand& pool, std::uint32_t blocks) {
  hpc::ScriptInput in{.job_name = o_.job_name,
                      .run_dir = o_.run_dir,
                      .launch = o_.launch,
                      .pool_argv = pool.argv,
                      .node_script = node_script_};
  write_script(node_script_, hpc::node_script(o_.scheduler, in));
  write_script(submit_file_, hpc::submit_file(o_.scheduler, in));
  for (std::uint32_t i = 0; i < blocks; ++i) submit();
  refresh(true);
}

void HpcLauncher::submit() {
  const auto cmd = hpc::submit_command(o_.scheduler, submit_file_);
  auto o = run_command(cmd, dir_);
  const std::string id = o.status.success() ? hpc::parse_submit(o_.scheduler, o.out) : "";
  if (id.empty()) {
    throw Failure(ErrorCode::Runtime,
                  fmt::format("{} {} failed ({}): {}{}{}", cmd.argv[0], submit_file_,
                              o.status.describe(), o.err, o.out,
                              o.status.code == 127 ? fmt::format(" (is {} on PATH?)", cmd.argv[0])
                                                   : std::string()));
  }
  ids_.push_back(id);
  states_[id] = "SUBMITTED";
  FILE* f = std::fopen(ids_file_.c_str(), "a");
  if (f != nullptr) {
    std::fprintf(f, "%s\n", id.c_str());
    std::fclose(f);
  }
  log_->info("submitted pool job {} ({})", id, submit_file_);
}

std::uint32_t HpcLauncher::active() const {
  std::uint32_t n = 0;
  for (const auto& id : ids_) {
    auto it = states_.find(id);
    if (it != states_.end() &&
        (it->second == "SUBMITTED" || hpc::is_active(o_.scheduler, it->second))) {
      ++n;
    }
  }
  return n;
}

std::string HpcLauncher::describe() const {
  std::string s = fmt::format("{} job{}", name_, ids_.size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < ids_.size(); ++i) {
    auto it = states_.find(ids_[i]);
    const std::string st = it == states_.end() || it->second.empty() ? "GONE" : it->second;
    s += fmt::format("{} {} {}", i == 0 ? "" : ",", ids_[i], st);
  }
  return s;
}

void HpcLauncher::refresh(bool now) {
  const auto t = Clock::now();
  if (ids_.empty()) return;  // nothing submitted: nothing to show
  if (!now && t < next_refresh_) return;
  next_refresh_ = t + std::chrono::seconds(2);
  auto o = run_command(hpc::status_command(o_.scheduler, ids_), dir_);
  auto states = hpc::parse_status(o_.scheduler, o.out, o.err);
  // A failed command that said nothing we read (the server busy or away): conclude nothing. A
  // status command that names ended jobs fails too (qstat, bjobs), and is read.
  if (!o.status.success() && states.empty()) return;
  for (const auto& id : ids_) {
    auto it = states.find(hpc::key_of(o_.scheduler, id));
    if (it != states.end() && !it->second.empty()) {
      states_[id] = it->second;
      missing_.erase(id);
    } else if (it != states.end() || ++missing_[id] >= 2) {
      // Said to be unknown or finished, or left out twice in a row (a job leaving the queue may
      // be left out for a moment while it is being removed).
      states_[id] = std::string();
    }
  }
  // One line whenever a state changes: pending, running, ended (never per task).
  std::string line = describe();
  if (line != shown_) {
    shown_ = line;
    log_->info("pool jobs: {}", line);
    if (!o_.quiet) std::fprintf(stderr, "fanout: pool jobs: %s\n", line.c_str());
  }
}

std::string HpcLauncher::poll() {
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
  return fmt::format(
      "every pool job ended ({}) and --max-nodes {} allows no replacement; pool logs under "
      "{}/logs/sys/node/, the jobs' output under {}",
      shown_, policy_.max_nodes(), o_.run_dir, dir_);
}

void HpcLauncher::release() {
  if (released_ || detached_) return;
  released_ = true;
  refresh(true);
  std::vector<std::string> live;
  for (const auto& id : ids_) {
    if (states_[id] == "SUBMITTED" || hpc::is_active(o_.scheduler, states_[id])) {
      live.push_back(id);
    }
  }
  if (!live.empty()) {
    auto o = run_command(hpc::cancel_command(o_.scheduler, live), dir_);
    if (!o.status.success()) log_->warn("{}: {} ({})", name_, o.err, o.status.describe());
  }
  // Wait (bounded) until the scheduler has let go of every node, so nothing outlives the run.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (active() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    refresh(true);
  }
}

std::string HpcLauncher::release_command() const {
  const auto cancel = hpc::cancel_command(o_.scheduler, {});
  return fmt::format("ids=$(cat {} 2>/dev/null); [ -z \"$ids\" ] || {} $ids",
                     slurm::shell_quote(ids_file_), cancel.argv[0]);
}

}  // namespace fanout::client
