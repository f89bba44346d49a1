// HpcLauncher: the pools of a `fanout run --launcher pbs|lsf|condor` as batch jobs of PBS (Pro or
// Torque), LSF or HTCondor (submit, status, cancel commands). The decisions are in
// hpc_script.hpp; the block policy is Slurm's (slurm::BlockPolicy). See docs/cluster.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/launch/batch_launcher.hpp"
#include "client/launch/hpc_script.hpp"
#include "client/launch/launcher.hpp"
#include "client/launch/slurm_script.hpp"
#include "fanout/config/job_spec.hpp"

namespace fanout::client {

// Pool jobs of one fanout job. Files, in <run_dir>/<scheduler>/: the submit file (pools.pbs,
// pools.lsf or pools.sub, kept), pool-node.sh (what each node runs), job_ids (one submitted id a
// line) and the jobs' output. Releases its jobs when destroyed unless detached. Not
// thread-safe; owned by Embedded.
class HpcLauncher final : public BatchLauncher {
 public:
  struct Options {
    hpc::Scheduler scheduler = hpc::Scheduler::Pbs;
    config::LauncherSettings launch{};
    std::uint32_t nodes = 1;  // pool jobs at the start (after defaults)
    std::string job_name{};
    std::string run_dir{};
    bool quiet = false;  // no "pool jobs:" lines on stderr
  };
  HpcLauncher(Options opts, Logger log);
  ~HpcLauncher() override;

 private:
  void write_scripts(const PoolCommand& pool) override;
  // Throws Failure with the submit command's message when refused.
  [[nodiscard]] std::string submit_job() override;
  [[nodiscard]] std::optional<std::map<std::string, std::string>> query_states() override;
  [[nodiscard]] bool is_active(const std::string& state) const override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::vector<std::string> cancel_command(
      const std::vector<std::string>& ids) const override;
  // The scheduler's name ("pbs: <error>").
  [[nodiscard]] std::string cancel_label() const override { return name_; }
  [[nodiscard]] std::optional<EndNote> end_note() override;

  hpc::Scheduler scheduler_;
  std::string name_, node_script_;
};

}  // namespace fanout::client
