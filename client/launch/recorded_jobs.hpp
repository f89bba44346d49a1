// What `fanout status` and `fanout cancel` do with the pool jobs a run folder records, for every
// scheduler launcher (slurm, sge, pbs, lsf, condor): the launcher whose folder holds job_ids is
// rebuilt and asked with its own status and cancel commands (BatchLauncher). See docs/cluster.md.
#pragma once

#include <string>

namespace fanout::client {

// The run folder's pool jobs and their states ("sge job 12 r, 13 GONE"); "" when the run used
// no scheduler launcher.
[[nodiscard]] std::string pool_jobs_status_line(const std::string& run_dir);

// The same as keys of `fanout status --json`'s object, from one query of the scheduler:
// "pool_jobs":{"scheduler":"sge","jobs":[{"id":"12","state":"r"}]} (state "" once the scheduler
// no longer lists the job), and for Slurm also "slurm_jobs":[{"id":812,"state":"RUNNING"}], the
// key it had before; "" when the run used no scheduler launcher.
[[nodiscard]] std::string pool_jobs_json_keys(const std::string& run_dir);

// Cancels the run folder's pool jobs that still hold or wait for a node, with the scheduler's
// cancel command, and waits (bounded) until the scheduler lets them go. Returns what it
// cancelled ("sge job(s) 12, 13"); "" when nothing.
std::string release_pool_jobs(const std::string& run_dir);

}  // namespace fanout::client
