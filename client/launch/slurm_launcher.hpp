// SlurmLauncher: the pools of a `fanout run --launcher slurm` as Slurm batch jobs, one node each
// (sbatch, squeue, scancel). The decisions are in slurm_script.hpp; `fanout status` and `cancel`
// rebuild it from the run folder (recorded_jobs.hpp). See docs/cluster.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/launch/batch_launcher.hpp"
#include "client/launch/launcher.hpp"
#include "client/launch/run_settings.hpp"
#include "client/launch/slurm_script.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::client {

// Pool jobs of one fanout job. Files, in <run_dir>/slurm/: pools.sbatch (the batch script, kept),
// job_ids (one submitted id a line), pools-<JOBID>.out (each job's output). Releases its jobs
// when destroyed unless detached. Not thread-safe; owned by Embedded.
class SlurmLauncher final : public BatchLauncher {
 public:
  SlurmLauncher(Options opts, Logger log);
  ~SlurmLauncher() override;

 private:
  void write_scripts(const PoolCommand& pool) override;
  // sbatch; throws Failure with sbatch's message when refused.
  [[nodiscard]] std::string submit_job() override;
  // squeue.
  [[nodiscard]] std::optional<std::map<std::string, std::string>> query_states() override;
  [[nodiscard]] bool is_active(const std::string& state) const override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::vector<std::string> cancel_command(
      const std::vector<std::string>& ids) const override;
  // Waits a while for a COMPLETING job's final state, then advises on walltime.
  [[nodiscard]] std::optional<EndNote> end_note() override;
  // scancel --signal=TERM: the job's pools drain and leave, and the job completes.
  [[nodiscard]] std::vector<std::string> drain_command(const std::string& id) const override;
  // The pools are named <node>-slurm<JOBID>-<PROCID> (slurm_script.cpp).
  [[nodiscard]] bool runs_in(const std::string& pool, const std::string& id) const override;

  Clock::time_point settle_until_{};  // how long to wait for a COMPLETING job's final state
};

// Completes `rs` for a launcher other than local before anything starts: the node counts are
// checked (check_blocks), and the address the pools connect to is found (interchange_address).
// Error{InvalidArgument} naming the key or flag; a no-op for the local launcher.
[[nodiscard]] Expected<void> prepare_launcher(RunSettings& rs, const config::JobConfig& cfg,
                                              const RunOverrides& ov);

// Where the pools connect to: `given`, else what choose_pool_address() (pool_address.hpp) picks
// from getifaddrs(3): the first non-loopback IPv4 address of an interface that is up.
// Error{NotFound} asking for --interchange-address when there is none.
[[nodiscard]] Expected<std::string> interchange_address(const std::string& given);

}  // namespace fanout::client
