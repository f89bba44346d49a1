// HpcLauncher: the pools of a `fanout run --launcher pbs|lsf|condor` as batch jobs of PBS (Pro or
// Torque), LSF or HTCondor (submit, status, cancel commands). The decisions are in
// hpc_script.hpp; the block policy is Slurm's (slurm::BlockPolicy). See docs/cluster.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "client/launch/hpc_script.hpp"
#include "client/launch/launcher.hpp"
#include "client/launch/slurm_script.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/util/clock.hpp"

namespace fanout::client {

// Pool jobs of one fanout job. Files, in <run_dir>/<scheduler>/: the submit file (pools.pbs,
// pools.lsf or pools.sub, kept), pool-node.sh (what each node runs), job_ids (one submitted id a
// line) and the jobs' output. Releases its jobs when destroyed unless detached. Not
// thread-safe; owned by Embedded.
class HpcLauncher final : public Launcher {
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

  void start(const PoolCommand& pool, std::uint32_t blocks) override;
  std::string poll() override;
  void release() override;
  void detach() override { detached_ = true; }
  [[nodiscard]] std::string release_command() const override;

 private:
  // Submits one pool job; throws Failure with the submit command's message when refused.
  void submit();
  // Asks the scheduler (every few seconds at most) and reports a change of states.
  void refresh(bool now);
  [[nodiscard]] std::uint32_t active() const;
  [[nodiscard]] std::string describe() const;

  Options o_;
  Logger log_;
  slurm::BlockPolicy policy_;
  std::string name_, dir_, submit_file_, node_script_, ids_file_;
  std::vector<std::string> ids_{};
  std::map<std::string, std::string> states_{};  // by id as submitted
  std::map<std::string, int> missing_{};         // refreshes in a row that did not list the job
  Clock::time_point next_refresh_{};
  std::string shown_{};
  bool detached_ = false;
  bool released_ = false;
};

}  // namespace fanout::client
