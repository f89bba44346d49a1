// SgeLauncher: the pools of a `fanout run --launcher sge` as Grid Engine jobs, one host each
// (qsub, qstat, qdel). The decisions are in sge_script.hpp; the block policy (--nodes,
// --min-nodes, --max-nodes) is the Slurm launcher's. See docs/cluster.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "client/launch/launcher.hpp"
#include "client/launch/sge_script.hpp"
#include "client/launch/slurm_script.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/util/clock.hpp"

namespace fanout::client {

// Pool jobs of one fanout job. Files, in <run_dir>/sge/: pools.sh (the job script, kept),
// job_ids (one submitted id a line), pools-<JOB_ID>.out (each job's output). Releases its jobs
// when destroyed unless detached. Not thread-safe; owned by Embedded.
class SgeLauncher final : public Launcher {
 public:
  struct Options {
    config::LauncherSettings launch{};
    std::uint32_t nodes = 1;  // pool jobs at the start (after defaults)
    std::string job_name{};
    std::string run_dir{};
    bool quiet = false;  // no "pool jobs:" lines on stderr
  };
  SgeLauncher(Options opts, Logger log);
  ~SgeLauncher() override;

  void start(const PoolCommand& pool, std::uint32_t blocks) override;
  std::string poll() override;
  void release() override;
  void detach() override { detached_ = true; }
  [[nodiscard]] std::string release_command() const override;

 private:
  // Submits one pool job; throws Failure with qsub's message when refused.
  void submit();
  // Asks qstat (every few seconds at most) and reports a change of states.
  void refresh(bool now);
  [[nodiscard]] std::uint32_t active() const;

  Options o_;
  Logger log_;
  slurm::BlockPolicy policy_;
  std::string dir_, script_, ids_file_;
  std::vector<std::uint64_t> ids_{};
  std::map<std::uint64_t, std::string> states_{};
  std::map<std::uint64_t, int> missing_{};  // refreshes in a row that did not list the job
  Clock::time_point next_refresh_{};
  std::string shown_{};
  bool detached_ = false;
  bool released_ = false;
};

}  // namespace fanout::client
