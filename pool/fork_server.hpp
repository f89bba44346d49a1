// The pool's side of fanout.worker_start: fork (docs/resources.md): one fork server per Python
// job, an interpreter running pool/python/fanout_worker.py that imports the entry script once and
// forks each worker from it; the pool starts each worker as a small proxy (pool/fork_proxy.hpp)
// that asks the server for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fanout/protocol/messages.hpp"
#include "fanout/util/child_process.hpp"
#include "fanout/util/expected.hpp"
#include "fanout/util/fd.hpp"
#include "pool/worker.hpp"

namespace fanout::pool {

// True when the job's workers are to be forked from a server: a Python job whose environment
// does not say FANOUT_WORKER_START=spawn (fanout.worker_start sets it).
[[nodiscard]] bool wants_fork_server(const proto::JobSpec& spec);

class ForkServer final {
 public:
  // Starts the server with `first`'s command line, folder, environment and log files (its
  // module's top level runs once, with the first worker's environment), listening on a fresh
  // abstract unix socket. Error{Io} when it cannot be started.
  [[nodiscard]] static Expected<ForkServer> start(const WorkerLaunch& first, std::uint64_t job_id);
  ForkServer(ForkServer&&) noexcept = default;
  ForkServer& operator=(ForkServer&&) noexcept = default;
  ~ForkServer() = default;  // the ChildProcess stops the server (its workers are not its group)

  // The exit status once the server has ended (reaped here), else nullopt.
  [[nodiscard]] std::optional<ExitStatus> ended() { return proc_.poll(); }
  // `l` rewritten to start the worker through the proxy: fanout-worker fork-via NAME -- argv.
  [[nodiscard]] WorkerLaunch via(WorkerLaunch l, const std::string& worker_bin) const;

 private:
  ForkServer() = default;
  ChildProcess proc_{};
  UniqueFd pool_alive_{};  // the write end of the server's fd 4, never written
  std::string name_{};
};

}  // namespace fanout::pool
