// The Grid Engine launcher's decisions, without I/O (unit-tested in
// tests/unit/client/sge_test.cpp): the job script of a pool job, what `qsub -terse` and `qstat`
// print, and which states still hold a slot. client/launch/sge_launcher.* does the I/O; the block
// policy is Slurm's (slurm_script.hpp). See docs/cluster.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/config/job_spec.hpp"

namespace fanout::client::sge {

// What one pool job's script is made of.
struct ScriptInput {
  std::string job_name{};                // the fanout job's name (qsub -N fanout-NAME)
  std::string run_dir{};                 // the run folder (absolute): output and pool logs
  config::LauncherSettings launch{};     // queue (partition), project (account), ..., worker_init
  std::vector<std::string> pool_argv{};  // fanout-pool and its flags (PoolCommand::argv)
};

// The job script of one pool job: `#$` lines from the settings (-pe smp cores_per_node,
// -l h_rt= walltime, -q partition, -P account, then scheduler_options as written), worker_init,
// then the pool, named after the node and job id, logging to
// <run_dir>/logs/sys/node/<node>/pool-sge<JOB_ID>.log. The job's own output (stdout and stderr
// joined) goes to <run_dir>/sge/pools-<JOB_ID>.out.
[[nodiscard]] std::string job_script(const ScriptInput& in);

// A Slurm-style time limit ("30", "1:30:00", "2-00:00:00", as fanout.walltime is written) as
// Grid Engine's h_rt reads it ("0:30:00", "1:30:00", "48:00:00"); "" when it does not parse.
[[nodiscard]] std::string h_rt(std::string_view walltime);

// The job id that `qsub -terse` printed ("123", or "123.1-4:1" for an array); 0 when none.
[[nodiscard]] std::uint64_t parse_job_id(std::string_view qsub_stdout);

// Plain `qstat` lines (job-ID prior name user state ...) → state by job id ("r", "qw", "Eqw",
// "dr", ...). The header, the dashes and lines that do not parse are skipped; an array job's
// task lines give the job the first state listed.
[[nodiscard]] std::map<std::uint64_t, std::string> parse_qstat(std::string_view text);

// Whether a pool job in `state` still holds or waits for a slot: listed by qstat, not being
// deleted ("d") and not in error ("E": Eqw never runs without qmod -cj). "" (no longer listed)
// has ended.
[[nodiscard]] bool is_active(std::string_view state);

// One line for progress: "sge job 12 r, 13 qw" (GONE for a job qstat no longer lists).
[[nodiscard]] std::string describe_jobs(const std::vector<std::uint64_t>& ids,
                                        const std::map<std::uint64_t, std::string>& states);

}  // namespace fanout::client::sge
