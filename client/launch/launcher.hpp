// Where the pools of a private interchange run: the Launcher interface and LocalLauncher (child
// processes on this host, the embedded default). SlurmLauncher (client/launch/slurm_launcher.hpp)
// puts them on a cluster's nodes; ssh or Kubernetes launchers would follow the same shape. Neither
// the interchange nor the pool knows about launchers: a pool is the same `fanout-pool` command
// wherever it runs, and a lost one is the interchange's usual pool loss. See docs/cluster.md.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fanout/util/child_process.hpp"
#include "fanout/util/log.hpp"

namespace fanout::client {

// The command every pool runs: `fanout-pool` and the flags that reach the interchange, without
// --name, --node and --log-file (each launcher names its pools and their logs).
struct PoolCommand {
  std::vector<std::string> argv{};
  std::uint32_t workers = 0;  // per pool, when known: pools on one node number workers apart
};

// The job's load as the interchange last reported it (JobProgress), for a launcher that scales
// its blocks (docs/cluster.md, section 6).
struct Load {
  std::uint64_t job_id = 0;
  std::uint64_t backlog = 0;                                 // mini-batches waiting for a slot
  std::uint64_t in_flight = 0;                               // mini-batches held by pools
  std::vector<std::pair<std::string, double>> idle_pools{};  // pool name, seconds it held nothing
  std::string db{};  // the store, where a batch launcher records its pool jobs
};

// A set of "blocks" of pools (one block: one local pool, or one batch job of one node). Owned by
// Embedded; not thread-safe.
class Launcher {
 public:
  virtual ~Launcher() = default;
  // Starts the first `blocks` blocks running `pool`. Throws Failure naming what failed (a
  // child that cannot be spawned, a batch system that refuses the job, with its message).
  virtual void start(const PoolCommand& pool, std::uint32_t blocks) = 0;
  // Called often from the client's loop (cheap: a launcher that has to ask a batch system does
  // so at its own cadence). Replaces blocks when its policy says so. Returns "" while pools run
  // or may still come, else why none will (every pool ended), naming the logs to read.
  virtual std::string poll() = 0;
  // Releases every block now (the job is over: its pools were told to stop). Returns once they
  // have ended, or after a bounded wait.
  virtual void release() = 0;
  // Releases every block without waiting for the pools to stop by themselves (they never served:
  // the interchange they were started for went away). By default release().
  virtual void release_now() { release(); }
  // The job's load, each time the interchange reports it: a launcher scaling its blocks decides
  // on it (at its own cadence). Nothing by default.
  virtual void observe(const Load& load) { (void)load; }
  // Leaves the blocks running (the client exits, the job goes on without it).
  virtual void detach() = 0;
  // A shell command that releases the blocks, for a watchdog that outlives the client
  // (--exit-with-client); "" when nothing needs doing (local pools exit with the interchange).
  [[nodiscard]] virtual std::string release_command() const = 0;
  // Process ids of the pools on this host (for `fanout perf`); empty when they run elsewhere.
  [[nodiscard]] virtual std::vector<pid_t> pids() const { return {}; }
};

// The fanout-pool options that keep the logs/user/*/<node>/processNNN folders of local pool
// `index` (0-based) apart from the others': --first-process when the client knows the count of
// `workers` per pool, else --pool-index (the pools count theirs). Empty for the first pool then.
[[nodiscard]] std::vector<std::string> numbering_args(std::uint32_t index, std::uint32_t workers);

// Today's embedded pools: `blocks` child processes on this host, each in its own process group,
// logging to <run_dir>/logs/sys/node/<host>/poolNN.log.
class LocalLauncher final : public Launcher {
 public:
  LocalLauncher(std::string run_dir, Logger log);
  ~LocalLauncher() override { release(); }
  void start(const PoolCommand& pool, std::uint32_t blocks) override;
  std::string poll() override;
  void release() override;
  void release_now() override;
  void detach() override;
  [[nodiscard]] std::string release_command() const override { return {}; }
  [[nodiscard]] std::vector<pid_t> pids() const override;

 private:
  std::string run_dir_;
  Logger log_;
  std::vector<ChildProcess> pools_;
  std::vector<std::string> logs_;
};

}  // namespace fanout::client
