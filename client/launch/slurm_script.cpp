// The Slurm launcher's decisions, without I/O. See slurm_script.hpp.
#include "client/launch/slurm_script.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>

#include "client/launch/hpc_script.hpp"

namespace fanout::client::slurm {

std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

std::string batch_script(const ScriptInput& in) {
  const auto& l = in.launch;
  std::string s = "#!/bin/sh\n";
  s += fmt::format(
      "# Written by `fanout run` for job '{}': one fanout-pool on each node of this allocation,\n"
      "# connecting back to the job's interchange. Kept for you to read (docs/cluster.md).\n",
      in.job_name);
  s += fmt::format("#SBATCH --job-name=fanout-{}\n", in.job_name);
  // nodes_per_block: srun below runs one pool on each node of the allocation.
  s += fmt::format("#SBATCH --nodes={}\n#SBATCH --ntasks-per-node=1\n",
                   std::max(1u, l.nodes_per_block));
  s += fmt::format("#SBATCH --output={}/slurm/pools-%j.out\n", in.run_dir);
  if (!l.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", l.partition);
  if (!l.account.empty()) s += fmt::format("#SBATCH --account={}\n", l.account);
  if (!l.qos.empty()) s += fmt::format("#SBATCH --qos={}\n", l.qos);
  if (!l.walltime.empty()) s += fmt::format("#SBATCH --time={}\n", l.walltime);
  if (l.cores_per_node > 0) s += fmt::format("#SBATCH --cpus-per-task={}\n", l.cores_per_node);
  if (l.exclusive) s += "#SBATCH --exclusive\n";
  // The pool takes the GPUs (CUDA_VISIBLE_DEVICES) and cores (its CPU affinity) Slurm gives the
  // step: docs/resources.md.
  if (!l.gpus_per_node.empty()) s += fmt::format("#SBATCH --gpus-per-node={}\n", l.gpus_per_node);
  if (!l.mem_per_node.empty()) s += fmt::format("#SBATCH --mem={}\n", l.mem_per_node);
  if (!l.scheduler_options.empty()) {
    s += l.scheduler_options;
    if (s.back() != '\n') s += '\n';
  }
  // After the last #SBATCH line (sbatch reads none after a command), before worker_init.
  const std::uint64_t limit = hpc::walltime_seconds(l.walltime);
  if (limit > 0) s += "\n" + std::string(hpc::kWalltimeStart);
  if (!l.worker_init.empty()) {
    s += "\n# worker_init\n" + l.worker_init;
    if (s.back() != '\n') s += '\n';
  }
  // sh -c 'program' LOGS fanout-pool ARGS...: $0 is the pool-log folder, "$@" the command; the
  // node's name and the job id are known only on the node.
  s += "\nexec srun --ntasks-per-node=1 --kill-on-bad-exit=0 /bin/sh -c \\\n";
  s += "  'mkdir -p \"$0/$SLURMD_NODENAME\" && exec \"$@\" --node \"$SLURMD_NODENAME\" "
       "--name \"$SLURMD_NODENAME-slurm$SLURM_JOB_ID-$SLURM_PROCID\" "
       "--log-file \"$0/$SLURMD_NODENAME/pool-slurm$SLURM_JOB_ID.log\"' \\\n";
  s += "  " + shell_quote(in.run_dir + "/logs/sys/node");
  for (const auto& a : in.pool_argv) s += " " + shell_quote(a);
  s += hpc::walltime_end_flag(limit) + "\n";
  return s;
}

std::uint64_t parse_job_id(std::string_view out) {
  while (!out.empty() && (out.front() == ' ' || out.front() == '\n')) out.remove_prefix(1);
  std::uint64_t id = 0;
  auto [p, ec] = std::from_chars(out.data(), out.data() + out.size(), id);
  if (ec != std::errc{} || p == out.data()) return 0;
  if (p != out.data() + out.size() && *p != ';' && *p != '\n' && *p != ' ') return 0;
  return id;
}

std::map<std::uint64_t, std::string> parse_squeue(std::string_view text) {
  std::map<std::uint64_t, std::string> states;
  for (std::size_t pos = 0; pos < text.size();) {
    auto nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    auto sp = line.find(' ');
    if (sp == std::string_view::npos) continue;
    std::uint64_t id = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + sp, id);
    if (ec != std::errc{} || p != line.data() + sp) continue;
    std::string_view state = line.substr(sp + 1);
    while (!state.empty() && (state.back() == ' ' || state.back() == '\r')) state.remove_suffix(1);
    while (!state.empty() && state.front() == ' ') state.remove_prefix(1);
    if (state.empty()) continue;
    states[id] = std::string(state);
  }
  return states;
}

bool is_active(std::string_view state) {
  static constexpr std::array<std::string_view, 13> kEnded = {
      "",         "COMPLETING",   "COMPLETED", "CANCELLED",     "FAILED",
      "TIMEOUT",  "PREEMPTED",    "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
      "DEADLINE", "SPECIAL_EXIT", "REVOKED"};
  // "CANCELLED by 0" is how some versions print it.
  auto word = state.substr(0, state.find(' '));
  return std::find(kEnded.begin(), kEnded.end(), word) == kEnded.end();
}

BlockPolicy::BlockPolicy(std::uint32_t nodes, std::uint32_t min_nodes, std::uint32_t max_nodes)
    : nodes_(std::max(1u, nodes)),
      min_(min_nodes > 0 ? min_nodes : nodes_),
      max_(std::max(max_nodes > 0 ? max_nodes : nodes_, nodes_)) {}

std::uint32_t BlockPolicy::replacements(std::uint32_t active, std::uint32_t submitted) const {
  // Each branch: nothing when enough are pending or running, nothing once the budget is spent;
  // else as many as bring `active` back to min_nodes, within the budget.
  if (active >= min_) return 0;
  if (submitted >= max_) return 0;
  return std::min(min_ - active, max_ - submitted);
}

std::string check_blocks(const config::LauncherSettings& s, std::uint32_t instance_count) {
  const std::uint32_t nodes = s.nodes > 0 ? s.nodes : std::max(1u, instance_count);
  if (s.max_nodes > 0 && s.max_nodes < nodes) {
    return fmt::format("fanout.max_nodes (--max-nodes): expected >= nodes (got {} < {})",
                       s.max_nodes, nodes);
  }
  if (s.min_nodes > nodes) {
    return fmt::format("fanout.min_nodes (--min-nodes): expected <= nodes (got {} > {})",
                       s.min_nodes, nodes);
  }
  return {};
}

std::string end_advice(std::uint64_t id, std::string_view state,
                       const config::LauncherSettings& l) {
  const auto word = state.substr(0, state.find(' '));
  if (word == "COMPLETED" && !l.walltime.empty()) {
    // A pool ends its job by itself before the fanout job is over only when it left for the
    // walltime (pool/walltime.hpp): it drains a margin before the end.
    return fmt::format(
        "; pool job {} ended by itself: its pool left before its walltime (fanout.walltime {}): "
        "raise it, or allow replacement pool jobs with --max-nodes",
        id, l.walltime);
  }
  if (word != "TIMEOUT") return {};
  const std::string limit = l.walltime.empty()
                                ? "the partition's default time limit (set fanout.walltime)"
                                : "its walltime (fanout.walltime " + l.walltime + ")";
  return fmt::format(
      "; pool job {} reached {}: raise it, or allow replacement pool jobs with --max-nodes", id,
      limit);
}

std::string describe_jobs(const std::vector<std::uint64_t>& ids,
                          const std::map<std::uint64_t, std::string>& states) {
  std::string s = ids.size() == 1 ? "slurm job" : "slurm jobs";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto it = states.find(ids[i]);
    const std::string st = it == states.end() || it->second.empty() ? "GONE" : it->second;
    s += fmt::format("{} {} {}", i == 0 ? "" : ",", ids[i], st);
  }
  return s;
}

}  // namespace fanout::client::slurm
