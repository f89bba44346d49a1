// SgeLauncher: the pools of a `fanout run --launcher sge` as Grid Engine jobs, one host each
// (qsub, qstat, qdel). The decisions are in sge_script.hpp; the block policy (--nodes,
// --min-nodes, --max-nodes) is the Slurm launcher's. See docs/cluster.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/launch/batch_launcher.hpp"
#include "client/launch/launcher.hpp"
#include "client/launch/sge_script.hpp"
#include "client/launch/slurm_script.hpp"
#include "fanout/config/job_spec.hpp"

namespace fanout::client {

// Pool jobs of one fanout job. Files, in <run_dir>/sge/: pools.sh (the job script, kept),
// job_ids (one submitted id a line), pools-<JOB_ID>.out (each job's output). Releases its jobs
// when destroyed unless detached. Not thread-safe; owned by Embedded.
class SgeLauncher final : public BatchLauncher {
 public:
  SgeLauncher(Options opts, Logger log);
  ~SgeLauncher() override;

 private:
  void write_scripts(const PoolCommand& pool) override;
  // qsub; throws Failure with qsub's message when refused.
  [[nodiscard]] std::string submit_job() override;
  // qstat, which lists pending and running jobs only.
  [[nodiscard]] std::optional<std::map<std::string, std::string>> query_states() override;
  [[nodiscard]] bool is_active(const std::string& state) const override;
  // Every job qstat still lists, Eqw ones too.
  [[nodiscard]] bool holds(const std::string& state) const override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::vector<std::string> cancel_command(
      const std::vector<std::string>& ids) const override;
  [[nodiscard]] std::optional<EndNote> end_note() override;
};

}  // namespace fanout::client
