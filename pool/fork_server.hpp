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

// An interpreter a pool starts before any job (fanout-pool --warm-python): the shim loaded and
// waiting on a socket, it becomes the first Python job's fork server when that job's start fits
// it (fits()), so that the job's first workers do not wait for an interpreter to start.
class WarmInterpreter final {
 public:
  // Starts `python` -u SHIM_DIR/fanout_worker.py with FANOUT_WARM_PYTHON=1, the shim's folder on
  // PYTHONPATH as a worker's launch has it, stdin /dev/null and the pool's stdout and stderr.
  // Error{Io} when it cannot be started.
  [[nodiscard]] static Expected<WarmInterpreter> start(const std::string& python,
                                                       const std::string& shim_dir);
  WarmInterpreter(WarmInterpreter&&) noexcept = default;
  WarmInterpreter& operator=(WarmInterpreter&&) noexcept = default;
  ~WarmInterpreter() = default;  // the ChildProcess stops it; so does closing the socket

  // True when a fork server started with `first` may be this interpreter instead: the same
  // interpreter and shim, and an environment that differs from this one's only in variables an
  // interpreter does not read at its start (any but PYTHON*, LD_*, LC_*, MALLOC_*, LANG,
  // LANGUAGE, HOME, PATH, TZ and GLIBC_TUNABLES). Else `why` says what differs.
  [[nodiscard]] bool fits(const WorkerLaunch& first, std::string& why) const;
  [[nodiscard]] pid_t pid() const noexcept { return proc_.pid(); }

 private:
  friend class ForkServer;
  WarmInterpreter() = default;
  ChildProcess proc_{};
  UniqueFd control_{};     // the pool's end of the server's fd 3
  UniqueFd pool_alive_{};  // the write end of its fd 4, never written
  std::vector<std::string> argv_{};
  std::string pythonpath_{};
};

class ForkServer final {
 public:
  // Starts the server with `first`'s command line, folder, environment and log files (its
  // module's top level runs once, with the first worker's environment), listening on a fresh
  // abstract unix socket. Error{Io} when it cannot be started.
  [[nodiscard]] static Expected<ForkServer> start(const WorkerLaunch& first, std::uint64_t job_id);
  // The same server, made of `warm` (which fits(first)): it is sent `first`'s folder, log files,
  // arguments and environment with a fresh listening socket. Error{Io} when it cannot be sent
  // (the warm interpreter has ended, say); `warm` is then stopped.
  [[nodiscard]] static Expected<ForkServer> adopt(WarmInterpreter&& warm, const WorkerLaunch& first,
                                                  std::uint64_t job_id);
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
