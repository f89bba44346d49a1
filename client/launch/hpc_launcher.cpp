// The PBS, LSF and HTCondor launchers' I/O. See hpc_launcher.hpp.
#include "client/launch/hpc_launcher.hpp"

#include <fmt/format.h>

#include "client/launch/embedded.hpp"
#include "fanout/util/error.hpp"

namespace fanout::client {

namespace {

BatchLauncher::Options base_options(HpcLauncher::Options& o) {
  return {.launch = std::move(o.launch),
          .nodes = o.nodes,
          .job_name = std::move(o.job_name),
          .run_dir = std::move(o.run_dir),
          .quiet = o.quiet};
}

std::string submit_file_name(hpc::Scheduler s) {
  return s == hpc::Scheduler::Condor ? "pools.sub" : "pools." + std::string(hpc::name_of(s));
}

}  // namespace

HpcLauncher::HpcLauncher(Options opts, Logger log)
    : BatchLauncher(base_options(opts), std::move(log), std::string(hpc::name_of(opts.scheduler)),
                    submit_file_name(opts.scheduler), "SUBMITTED"),
      scheduler_(opts.scheduler),
      name_(hpc::name_of(scheduler_)),
      node_script_(dir_ + "/pool-node.sh") {}

HpcLauncher::~HpcLauncher() {
  if (!detached()) release();
}

void HpcLauncher::write_scripts(const PoolCommand& pool) {
  hpc::ScriptInput in{.job_name = o_.job_name,
                      .run_dir = o_.run_dir,
                      .launch = o_.launch,
                      .pool_argv = pool.argv,
                      .node_script = node_script_};
  write_script(node_script_, hpc::node_script(scheduler_, in));
  write_script(script_, hpc::submit_file(scheduler_, in));
}

std::string HpcLauncher::submit_job() {
  const auto cmd = hpc::submit_command(scheduler_, script_);
  auto o = run_command(cmd.argv, dir_, cmd.stdin_file);
  const std::string id = o.status.success() ? hpc::parse_submit(scheduler_, o.out) : "";
  if (id.empty()) {
    throw Failure(
        ErrorCode::Runtime,
        fmt::format(
            "{} {} failed ({}): {}{}{}", cmd.argv[0], script_, o.status.describe(), o.err, o.out,
            o.status.code == 127 ? fmt::format(" (is {} on PATH?)", cmd.argv[0]) : std::string()));
  }
  return id;
}

std::optional<std::map<std::string, std::string>> HpcLauncher::query_states() {
  const auto cmd = hpc::status_command(scheduler_, ids_);
  auto o = run_command(cmd.argv, dir_, cmd.stdin_file);
  auto states = hpc::parse_status(scheduler_, o.out, o.err);
  // A failed command that said nothing we read (the server busy or away): conclude nothing. A
  // status command that names ended jobs fails too (qstat, bjobs), and is read.
  if (!o.status.success() && states.empty()) return std::nullopt;
  std::map<std::string, std::string> out;
  for (const auto& id : ids_) {
    if (auto it = states.find(hpc::key_of(scheduler_, id)); it != states.end()) {
      out[id] = it->second;  // "": said to be unknown or finished
    }
  }
  return out;
}

bool HpcLauncher::is_active(const std::string& state) const {
  return state == "SUBMITTED" || hpc::is_active(scheduler_, state);
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

std::vector<std::string> HpcLauncher::cancel_command(const std::vector<std::string>& ids) const {
  return hpc::cancel_command(scheduler_, ids).argv;
}

std::optional<BatchLauncher::EndNote> HpcLauncher::end_note() {
  return EndNote{.output = fmt::format("the jobs' output under {}", dir_)};
}

}  // namespace fanout::client
