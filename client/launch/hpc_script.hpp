// The PBS (Pro and Torque), LSF and HTCondor launchers' decisions, without I/O (unit-tested in
// tests/unit/client/hpc_test.cpp): the files of a pool job, what the submit and status commands
// print, and which states still hold a node. client/launch/hpc_launcher.* does the I/O. See
// docs/cluster.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/config/job_spec.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::client::hpc {

enum class Scheduler : std::uint8_t { Pbs, Lsf, Condor };

// The scheduler of launcher `kind` ("pbs", "lsf", "condor"); nullopt for another.
[[nodiscard]] std::optional<Scheduler> scheduler_of(std::string_view kind);
// "pbs", "lsf", "condor": the launcher's name, and the run folder's subfolder for its files.
[[nodiscard]] std::string_view name_of(Scheduler s);

// What one pool job's files are made of (as slurm::ScriptInput).
struct ScriptInput {
  std::string job_name{};                // the fanout job's name
  std::string run_dir{};                 // the run folder (absolute): output and pool logs
  config::LauncherSettings launch{};     // queue, account, walltime, ..., worker_init
  std::vector<std::string> pool_argv{};  // fanout-pool and its flags (PoolCommand::argv)
  std::string node_script{};             // where node_script() is written (absolute)
};

// Whether the one-line values every batch script (Slurm, Grid Engine, PBS, LSF, HTCondor) writes
// into its directive and comment lines hold no control character: a newline in a job name, a run
// folder or a setting such as `partition` would start a line of its own, a shell command or a
// directive of the writer's choosing. (scheduler_options and worker_init are lines by design;
// pool arguments are shell-quoted.) Error{InvalidArgument} naming the value, the character and
// its position.
[[nodiscard]] Expected<void> check_script_values(std::string_view job_name,
                                                 std::string_view run_dir,
                                                 const config::LauncherSettings& launch);

// Seconds in a time limit as Slurm writes it ("30", "01:30:00", "2-00:00:00"; what
// fanout.walltime takes); 0 for "infinite"/"unlimited" or text that is not one.
[[nodiscard]] std::uint64_t walltime_seconds(std::string_view s);

// How every batch script tells its pools when the allocation ends without a signal: the script
// notes its start (kWalltimeStart, after the scheduler's directive lines) and each pool gets
// walltime_end_flag(seconds), " --walltime-end \"$((start + 3600))\"" ("" for 0 seconds: no limit
// known, no flag). The pool takes the earlier of this and SLURM_JOB_END_TIME (docs/cluster.md).
inline constexpr std::string_view kWalltimeStart =
    "start=$(date +%s)  # the allocation's end is start + walltime (fanout-pool --walltime-end)\n";
[[nodiscard]] std::string walltime_end_flag(std::uint64_t seconds);

// The script each node of a pool job runs (all three schedulers): worker_init, then fanout-pool
// named after the node and the scheduler's job id, logging to
// <run_dir>/logs/sys/node/<node>/pool-<scheduler><JOBID>.log. HTCondor passes the cluster and
// process numbers as $1 and $2.
[[nodiscard]] std::string node_script(Scheduler s, const ScriptInput& in);

// The file handed to the submit command: for PBS and LSF a batch script (#PBS / #BSUB lines from
// the settings, then scheduler_options as written, then node_script run once on each of the
// job's nodes: directly for one node, else through pbsdsh or blaunch); for HTCondor a submit
// description (executable node_script, request_cpus/memory/gpus, scheduler_options, `queue
// nodes_per_block`).
[[nodiscard]] std::string submit_file(Scheduler s, const ScriptInput& in);

// The command that submits `file`; `stdin_file` is set where the file goes on standard input
// (bsub reads #BSUB lines only from a script on its standard input).
struct Command {
  std::vector<std::string> argv{};
  std::string stdin_file{};
};
[[nodiscard]] Command submit_command(Scheduler s, const std::string& file);
// The command that lists the states of `ids`.
[[nodiscard]] Command status_command(Scheduler s, const std::vector<std::string>& ids);
// The command that removes `ids`.
[[nodiscard]] Command cancel_command(Scheduler s, const std::vector<std::string>& ids);

// The job id the submit command printed: qsub's "1234.server" (kept whole), bsub's "Job <1234>
// is submitted to queue <normal>." ("1234"), condor_submit's "1 job(s) submitted to cluster
// 42." ("42"); "" when there is none.
[[nodiscard]] std::string parse_submit(Scheduler s, std::string_view out);

// The states the status command printed, by the key of each job's id (key_of()): qstat -f's
// `job_state` letters (Q, R, H, E, F, C, ...), bjobs -w's STAT words (PEND, RUN, DONE, EXIT,
// ...), condor_q -af:j JobStatus numbers as words (IDLE, RUNNING, HELD, COMPLETED, REMOVED, ...;
// a cluster takes the state of its first process still active, else of its last). A job the
// error output says is unknown or finished ("qstat: Unknown Job Id 12.srv", "Job <12> is not
// found") maps to "". Lines that do not parse are skipped.
[[nodiscard]] std::map<std::string, std::string> parse_status(Scheduler s, std::string_view out,
                                                              std::string_view err);

// The key a job id is known by in parse_status(): PBS's sequence number ("1234" of
// "1234.server.domain", as qstat may print the server's full name), else the id.
[[nodiscard]] std::string key_of(Scheduler s, std::string_view id);

// Whether a pool job in `state` still holds or waits for a node ("": no longer listed: ended).
[[nodiscard]] bool is_active(Scheduler s, std::string_view state);

}  // namespace fanout::client::hpc
