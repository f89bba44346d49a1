// The loop the scheduler launchers share. See batch_launcher.hpp.
#include "client/launch/batch_launcher.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "client/launch/embedded.hpp"
#include "client/launch/hpc_script.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

CommandOutput run_command(const std::vector<std::string>& argv, const std::string& dir,
                          const std::string& stdin_file) {
  CommandOutput o;
  // Named after this process: `fanout status` and `fanout cancel` ask from the same folder while
  // the run's client does.
  const std::string tag = dir + "/.cmd." + std::to_string(::getpid());
  const std::string out = tag + ".out", err = tag + ".err";
  std::error_code ec;
  fs::remove(out, ec);
  fs::remove(err, ec);
  auto child =
      ChildProcess::spawn(SpawnOptions{.argv = argv,
                                       .stdin_file = stdin_file.empty() ? "null" : stdin_file,
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

BatchLauncher::BatchLauncher(Options opts, Logger log, const std::string& folder,
                             const std::string& script, std::string submitted_state)
    : o_(std::move(opts)),
      log_(std::move(log)),
      policy_(o_.nodes, o_.launch.min_nodes, o_.launch.max_nodes),
      dir_(o_.run_dir + "/" + folder),
      script_(dir_ + "/" + script),
      ids_file_(dir_ + "/job_ids"),
      submitted_state_(std::move(submitted_state)) {
  // Before anything is written: every batch script puts these on lines of their own.
  if (auto r = hpc::check_script_values(o_.job_name, o_.run_dir, o_.launch); !r) {
    throw Failure(r.error());
  }
  if (auto r = make_dirs(dir_); !r) throw Failure(r.error());
  // Elastic pool jobs (docs/cluster.md, section 6): on when init_nodes, parallelism or
  // max_idletime is given; min_nodes then defaults to 0 and max_nodes to the jobs at the start.
  const auto& l = o_.launch;
  elastic_ = l.elastic();
  es_.min_nodes = l.min_nodes;
  es_.max_nodes = std::max(l.max_nodes, std::max(1u, o_.nodes));
  es_.parallelism = l.parallelism >= 0 ? l.parallelism : 1.0;
  es_.max_idletime_s = l.max_idletime_s >= 0 ? l.max_idletime_s : 120.0;
}

void BatchLauncher::start(const PoolCommand& pool, std::uint32_t blocks) {
  es_.slots_per_node = std::max(1u, pool.workers) * std::max(1u, o_.launch.nodes_per_block);
  write_scripts(pool);
  for (std::uint32_t i = 0; i < blocks; ++i) submit();
  refresh(true);
}

void BatchLauncher::submit() {
  const std::string id = submit_job();
  ids_.push_back(id);
  states_[id] = submitted_state_;
  records_[id].submitted = unix_now();
  FILE* f = std::fopen(ids_file_.c_str(), "a");
  if (f != nullptr) {
    std::fprintf(f, "%s\n", id.c_str());
    std::fclose(f);
  }
  log_->info("submitted pool job {} ({})", id, script_);
}

std::uint32_t BatchLauncher::count(bool (BatchLauncher::*pred)(const std::string&) const) const {
  std::uint32_t n = 0;
  for (const auto& id : ids_) {
    auto it = states_.find(id);
    if ((this->*pred)(it == states_.end() ? std::string() : it->second)) ++n;
  }
  return n;
}

void BatchLauncher::refresh(bool now) {
  const auto t = Clock::now();
  if (ids_.empty()) return;  // nothing submitted (the first was refused): nothing to show
  if (!now && t < next_refresh_) return;
  next_refresh_ = t + std::chrono::seconds(2);
  auto states = query_states();
  if (!states) return;  // the scheduler busy or away: conclude nothing this time
  for (const auto& id : ids_) {
    auto it = states->find(id);
    if (it != states->end() && !it->second.empty()) {
      states_[id] = it->second;
      missing_.erase(id);
    } else if (it != states->end() || ++missing_[id] >= 2) {
      // Said to have ended, or left out twice in a row. Once is not enough: a job being
      // cancelled, or one just submitted, may be left out for a moment.
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

std::string BatchLauncher::poll() {
  if (released_ || ids_.empty()) return {};
  refresh(false);
  note_states();
  if (elastic_) return poll_elastic();
  write_records();
  const std::uint32_t act = count(&BatchLauncher::is_active);
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
  auto note = end_note();
  if (!note) return {};
  return all_ended(*note);
}

std::string BatchLauncher::all_ended(const EndNote& note) const {
  return fmt::format(
      "every pool job ended ({}) and --max-nodes {} allows no replacement{}; pool logs under "
      "{}/logs/sys/node/, {}",
      shown_, elastic_ ? es_.max_nodes : policy_.max_nodes(), note.advice, o_.run_dir, note.output);
}

void BatchLauncher::release() {
  if (released_ || detached_) return;
  released_ = true;
  refresh(true);
  std::vector<std::string> live;
  for (const auto& id : ids_) {
    if (holds(states_[id])) live.push_back(id);
  }
  if (!live.empty()) {
    auto o = run_command(cancel_command(live), dir_);
    if (!o.status.success()) log_->warn("{}: {} ({})", cancel_label(), o.err, o.status.describe());
  }
  // Wait (bounded) until the scheduler has let go of every node, so nothing outlives the run.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (count(&BatchLauncher::holds) > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    refresh(true);
  }
  note_states();
  write_records();
}

bool BatchLauncher::adopt_recorded() {
  std::ifstream in(ids_file_);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) ids_.push_back(line);
  }
  if (ids_.empty()) return false;
  const auto listed = query_states();
  for (const auto& id : ids_) {
    auto it = listed ? listed->find(id) : std::map<std::string, std::string>::const_iterator{};
    states_[id] = !listed ? submitted_state_ : it != listed->end() ? it->second : std::string();
  }
  shown_ = describe();
  return true;
}

std::vector<std::pair<std::string, std::string>> BatchLauncher::job_states() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& id : ids_) {
    auto it = states_.find(id);
    out.emplace_back(id, it == states_.end() ? std::string() : it->second);
  }
  return out;
}

std::string BatchLauncher::cancel_label() const { return cancel_command({}).front(); }

std::string BatchLauncher::release_command() const {
  return fmt::format("ids=$(cat {} 2>/dev/null); [ -z \"$ids\" ] || {} $ids",
                     slurm::shell_quote(ids_file_), cancel_command({}).front());
}

}  // namespace fanout::client
