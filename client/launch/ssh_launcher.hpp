// SshLauncher: the pools of a `fanout run --launcher ssh --hosts h1,h2`: one `fanout-pool` per
// host, each started over its own `ssh HOST` (as GNU parallel's --sshlogin) and connecting back to
// the job's interchange over TCP with Curve keys, as the batch launchers' pools do. The
// decisions are in ssh_script.hpp; the replacement budget is the batch launchers'
// (slurm::BlockPolicy: --nodes, --min-nodes, --max-nodes). See docs/cluster.md, "ssh".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "client/launch/launcher.hpp"
#include "client/launch/slurm_script.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/util/child_process.hpp"
#include "fanout/util/fd.hpp"

namespace fanout::client {

// The ssh children of one fanout job, each holding the write end of its ssh's stdin: closing it
// ends that host's pool (the remote script's watcher), and so does this client's death. Files,
// in <run_dir>/ssh/: <node>-ssh<N>.out (what ssh and the remote shell printed) and
// <node>-ssh<N>.sh (the script that host ran, kept to read). Releases its pools when destroyed
// unless detached. Not thread-safe; owned by Embedded.
class SshLauncher final : public Launcher {
 public:
  struct Options {
    config::LauncherSettings launch{};  // hosts, ssh_options, pool_command, worker_init, counts
    std::uint32_t nodes = 1;            // pools at the start
    std::string run_dir{};
    std::string cwd{};   // where each host's pool starts (the shared-filesystem assumption)
    bool quiet = false;  // no "fanout: ssh pool ..." lines on stderr
  };
  SshLauncher(Options opts, Logger log);
  ~SshLauncher() override;
  SshLauncher(const SshLauncher&) = delete;
  SshLauncher& operator=(const SshLauncher&) = delete;

  // Starts `blocks` pools over ssh, on the hosts in turn (pick_host). Throws Failure when ssh
  // cannot be run at all; a host that refuses shows as that pool ending.
  void start(const PoolCommand& pool, std::uint32_t blocks) override;
  // Notices ended ssh children (the pool exited, the host or the link went away) and starts
  // replacements on the other hosts within --max-nodes.
  std::string poll() override;
  // Waits (bounded) for the pools, which were told to stop, to exit; then closes each ssh's
  // stdin (the remote watcher sends the pool SIGTERM), waits again, and stops what is left.
  void release() override;
  void release_now() override;
  // Hands the stdin pipes to a small holder process that keeps them open while any ssh runs, so
  // the pools outlive this client as the job needs.
  void detach() override;
  // "": the client's death closes every ssh's stdin, which ends the pools by itself.
  [[nodiscard]] std::string release_command() const override { return {}; }

 private:
  struct Block {
    std::size_t host = 0;
    std::uint32_t number = 0;  // from 1, over the job
    std::string out{};         // ssh's output file
    ChildProcess ssh{};
    UniqueFd stdin_write{};
    bool ended = false;
  };
  void launch(std::size_t host);
  void close_inputs();
  // Waits up to `limit` for every ssh child to end; true when they all did.
  bool wait_all(std::chrono::milliseconds limit);
  [[nodiscard]] std::uint32_t running() const;

  Options o_;
  Logger log_;
  slurm::BlockPolicy policy_;
  std::string dir_;
  PoolCommand pool_{};
  std::vector<Block> blocks_{};
  std::vector<std::uint32_t> lost_{};  // per host
  bool released_ = false;
  bool detached_ = false;
};

}  // namespace fanout::client
