// The Slurm launcher's decisions, without I/O (unit-tested in tests/unit/client/slurm_test.cpp):
// the batch script of a pool job, what `squeue` says, and when to submit replacements (the
// block policy). client/launch/slurm_launcher.* does the I/O. See docs/cluster.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/config/job_spec.hpp"

namespace fanout::client::slurm {

// `s` in single quotes for /bin/sh (a quote inside becomes '\'').
[[nodiscard]] std::string shell_quote(std::string_view s);

// What one pool job's batch script is made of.
struct ScriptInput {
  std::string job_name{};                // the fanout job's name (sbatch --job-name=fanout-NAME)
  std::string run_dir{};                 // the run folder (absolute): output and pool logs
  config::LauncherSettings launch{};     // partition, account, ..., worker_init
  std::vector<std::string> pool_argv{};  // fanout-pool and its flags (PoolCommand::argv)
};

// The batch script of one pool job: one node, `#SBATCH` lines from the settings (then
// scheduler_options as written), worker_init, then `srun` running the pool once per node of
// the allocation, named after the job and node, logging to
// <run_dir>/logs/sys/node/<node>/pool-slurm<JOBID>.log. The job's own output goes to
// <run_dir>/slurm/pools-<JOBID>.out.
[[nodiscard]] std::string batch_script(const ScriptInput& in);

// The job id that `sbatch --parsable` printed ("123" or "123;cluster"); 0 when there is none.
[[nodiscard]] std::uint64_t parse_job_id(std::string_view sbatch_stdout);

// `squeue -h -t all -o "%i %T"` lines → state by job id ("RUNNING", "PENDING", ...). Lines that
// do not parse are skipped. Array or het-job ids ("12_1", "12+0") are skipped too.
[[nodiscard]] std::map<std::uint64_t, std::string> parse_squeue(std::string_view text);

// Whether a pool job in `state` still holds or waits for a node: PENDING, CONFIGURING, RUNNING,
// SUSPENDED, REQUEUED, RESIZING and the like. COMPLETING, COMPLETED, CANCELLED, FAILED,
// TIMEOUT, PREEMPTED, NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE (and a job squeue no
// longer lists: "") have ended, or are ending.
[[nodiscard]] bool is_active(std::string_view state);

// How many pool jobs are submitted, and when: Parsl's init_blocks / min_blocks / max_blocks
// with one node per block. `nodes` at the start; while the job runs, a pool job that ended
// (scancel, walltime, preemption, a node failure) is replaced as long as fewer than `min_nodes`
// are pending or running and fewer than `max_nodes` have been submitted in all, so a job whose
// pools keep dying does not submit forever.
class BlockPolicy final {
 public:
  // min_nodes 0: nodes; max_nodes 0: nodes (no replacement). Caller ensures
  // min_nodes <= nodes <= max_nodes when given (check_blocks()).
  BlockPolicy(std::uint32_t nodes, std::uint32_t min_nodes, std::uint32_t max_nodes);

  // Blocks to submit at the start.
  [[nodiscard]] std::uint32_t initial() const { return nodes_; }
  // Blocks to submit now, with `active` pending or running and `submitted` so far.
  [[nodiscard]] std::uint32_t replacements(std::uint32_t active, std::uint32_t submitted) const;
  [[nodiscard]] std::uint32_t min_nodes() const { return min_; }
  [[nodiscard]] std::uint32_t max_nodes() const { return max_; }

 private:
  std::uint32_t nodes_, min_, max_;
};

// The node counts after defaults (nodes: `instance_count` when not given), or an error saying
// which key is out of line: "fanout.max_nodes: expected >= nodes (got 1 < 2)". "" when fine.
[[nodiscard]] std::string check_blocks(const config::LauncherSettings& s,
                                       std::uint32_t instance_count);

// What the "every pool job ended" message adds for the last pool job's final `state`: for
// TIMEOUT, that it ran out of time and which key sets that ("; pool job 12 reached its walltime
// (fanout.walltime 00:01:00): raise it, or allow replacements with --max-nodes"); for COMPLETED
// with fanout.walltime set, that its pool left before the walltime; "" otherwise.
[[nodiscard]] std::string end_advice(std::uint64_t id, std::string_view state,
                                     const config::LauncherSettings& l);

// One line for progress and `fanout status`: "slurm job 12 RUNNING, 13 PENDING".
[[nodiscard]] std::string describe_jobs(const std::vector<std::uint64_t>& ids,
                                        const std::map<std::uint64_t, std::string>& states);

}  // namespace fanout::client::slurm
