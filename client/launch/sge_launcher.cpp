// The Grid Engine launcher's I/O: qsub, qstat, qdel. See sge_launcher.hpp.
#include "client/launch/sge_launcher.hpp"

#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

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

// Runs a Grid Engine command, its output captured in files of `dir`; a command that hangs
// (sge_qmaster unreachable) is stopped after 30 s.
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

// qstat -u takes a name only (a uid lists nothing): the passwd entry's, else $USER.
std::string user_name() {
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_name != nullptr) {
    return pw->pw_name;
  }
  if (const char* u = std::getenv("USER"); u != nullptr && *u != '\0') return u;
  return "*";
}

// The states of this user's jobs, or nullopt when qstat failed (then nothing is concluded).
std::optional<std::map<std::uint64_t, std::string>> query_states(const std::string& dir) {
  auto o = run_command({"qstat", "-u", user_name()}, dir);
  if (!o.status.success()) return std::nullopt;
  return sge::parse_qstat(o.out);
}

}  // namespace

SgeLauncher::SgeLauncher(Options opts, Logger log)
    : o_(std::move(opts)),
      log_(std::move(log)),
      policy_(o_.nodes, o_.launch.min_nodes, o_.launch.max_nodes),
      dir_(o_.run_dir + "/sge"),
      script_(dir_ + "/pools.sh"),
      ids_file_(dir_ + "/job_ids") {
  if (auto r = make_dirs(dir_); !r) throw Failure(r.error());
}

SgeLauncher::~SgeLauncher() {
  if (!detached_) release();
}

void SgeLauncher::start(const PoolCommand& pool, std::uint32_t blocks) {
  sge::ScriptInput in{
      .job_name = o_.job_name, .run_dir = o_.run_dir, .launch = o_.launch, .pool_argv = pool.argv};
  if (auto r = write_file_atomic(script_, sge::job_script(in)); !r) throw Failure(r.error());
  std::error_code ec;
  fs::permissions(script_, fs::perms::owner_all, fs::perm_options::replace, ec);
  for (std::uint32_t i = 0; i < blocks; ++i) submit();
  refresh(true);
}

void SgeLauncher::submit() {
  auto o = run_command({"qsub", "-terse", script_}, dir_);
  const std::uint64_t id = o.status.success() ? sge::parse_job_id(o.out) : 0;
  if (id == 0) {
    throw Failure(ErrorCode::Runtime,
                  fmt::format("qsub {} failed ({}): {}{}", script_, o.status.describe(), o.err,
                              o.status.code == 127 ? " (is Grid Engine's qsub on PATH?)" : ""));
  }
  ids_.push_back(id);
  states_[id] = "qw";
  FILE* f = std::fopen(ids_file_.c_str(), "a");
  if (f != nullptr) {
    std::fprintf(f, "%llu\n", static_cast<unsigned long long>(id));
    std::fclose(f);
  }
  log_->info("submitted pool job {} ({})", id, script_);
}

std::uint32_t SgeLauncher::active() const {
  std::uint32_t n = 0;
  for (auto id : ids_) {
    auto it = states_.find(id);
    if (sge::is_active(it == states_.end() ? "" : it->second)) ++n;
  }
  return n;
}

void SgeLauncher::refresh(bool now) {
  const auto t = Clock::now();
  if (ids_.empty()) return;
  if (!now && t < next_refresh_) return;
  next_refresh_ = t + std::chrono::seconds(2);
  auto states = query_states(dir_);
  if (!states) return;  // qmaster busy or away: conclude nothing this time
  for (auto id : ids_) {
    auto it = states->find(id);
    if (it != states->end()) {
      states_[id] = it->second;
      missing_.erase(id);
    } else if (++missing_[id] >= 2) {
      // qstat lists pending and running jobs only: gone twice in a row, the job has ended (once
      // is not enough: a job just submitted may not be listed yet).
      states_[id] = std::string();
    }
  }
  // One line whenever a state changes: pending, running, ended (never per task).
  std::string line = sge::describe_jobs(ids_, states_);
  if (line != shown_) {
    shown_ = line;
    log_->info("pool jobs: {}", line);
    if (!o_.quiet) std::fprintf(stderr, "fanout: pool jobs: %s\n", line.c_str());
  }
}

std::string SgeLauncher::poll() {
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
  const std::uint64_t last = ids_.back();
  const std::string out = fmt::format("{}/pools-{}.out", dir_, last);
  return fmt::format(
      "every pool job ended ({}) and --max-nodes {} allows no replacement; pool logs under "
      "{}/logs/sys/node/, the last job's output in {} (qacct -j {} says how it ended):{}",
      shown_, policy_.max_nodes(), o_.run_dir, out, last, tail_of(out, 10));
}

void SgeLauncher::release() {
  if (released_ || detached_) return;
  released_ = true;
  refresh(true);
  std::vector<std::string> argv = {"qdel"};
  for (auto id : ids_) {
    if (!states_[id].empty()) argv.push_back(std::to_string(id));  // Eqw ones too
  }
  if (argv.size() > 1) {
    auto o = run_command(argv, dir_);
    if (!o.status.success()) log_->warn("qdel: {} ({})", o.err, o.status.describe());
  }
  // Wait (bounded) until Grid Engine lists none of them, so nothing outlives the run.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  auto listed = [&] {
    for (auto id : ids_) {
      if (!states_[id].empty()) return true;
    }
    return false;
  };
  while (listed() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    refresh(true);
  }
}

std::string SgeLauncher::release_command() const {
  return fmt::format("ids=$(cat {} 2>/dev/null); [ -z \"$ids\" ] || qdel $ids",
                     slurm::shell_quote(ids_file_));
}

}  // namespace fanout::client
