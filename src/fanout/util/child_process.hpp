// ChildProcess: a started program that is always reaped. Move-only; the destructor sends SIGTERM,
// waits a grace period, then SIGKILLs and reaps, so a ChildProcess never leaves a zombie.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fanout/util/expected.hpp"

namespace fanout {

struct SpawnOptions {
  std::vector<std::string> argv{};                             // argv[0] is searched in PATH
  std::vector<std::pair<std::string, std::string>> env_set{};  // added to the parent's env
  std::string cwd{};                                           // empty: inherit
  std::string stdin_file{};                   // empty: inherit (/dev/null if "null")
  std::string stdout_file{};                  // empty: inherit; else appended
  std::string stderr_file{};                  // empty: inherit; else appended
  std::vector<std::pair<int, int>> fd_map{};  // {parent fd, child fd}
  bool new_process_group = false;
  // The child leads a new process group (as new_process_group) that is its own: signal() and
  // stop() reach the whole group, and once the child has ended and been reaped, whatever is left
  // of its group (children it started and did not wait for) is SIGKILLed.
  bool kill_group = false;
  // The CPUs the child may run on (sched_setaffinity); empty: the parent's. The child starts
  // with this mask, before its program runs, so no thread of it ever runs elsewhere.
  std::vector<int> cpus{};
};

// How a child ended: exit code, or the terminating signal.
struct ExitStatus {
  int code = -1;   // >= 0 when exited normally
  int signal = 0;  // > 0 when killed by a signal
  [[nodiscard]] bool success() const noexcept { return code == 0 && signal == 0; }
  [[nodiscard]] std::string describe() const;
};

class ChildProcess final {
 public:
  ChildProcess() = default;
  ChildProcess(ChildProcess&& o) noexcept
      : pid_(std::exchange(o.pid_, -1)),
        status_(std::move(o.status_)),
        grace_(o.grace_),
        group_(o.group_) {}
  ChildProcess& operator=(ChildProcess&& o) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { stop(); }

  // Starts a program with posix_spawnp: every signal unblocked and at its default disposition,
  // in a new process group if asked, fds remapped and files opened as `opts` says. Error{Io}
  // "cannot run <argv[0]>...: <why>" when nothing could be started: the program is not found or
  // not executable, a redirect file or `cwd` cannot be opened.
  [[nodiscard]] static Expected<ChildProcess> spawn(const SpawnOptions& opts);

  [[nodiscard]] bool valid() const noexcept { return pid_ > 0; }
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }

  // Non-blocking: the exit status if the child has ended (reaping it), else nullopt.
  std::optional<ExitStatus> poll();
  // Waits up to `timeout` for the child to end.
  std::optional<ExitStatus> wait_for(std::chrono::milliseconds timeout);
  // Blocks until the child ends.
  ExitStatus wait();
  // Sends `sig` if the child still runs (to its whole group with SpawnOptions::kill_group).
  void signal(int sig) noexcept;
  // SIGTERM, wait up to the grace period, SIGKILL, reap. Returns how it ended. Idempotent.
  ExitStatus stop();
  void set_grace(std::chrono::milliseconds grace) noexcept { grace_ = grace; }
  // Gives up ownership: the child is no longer stopped or reaped by this object.
  [[nodiscard]] pid_t release() noexcept { return std::exchange(pid_, -1); }

 private:
  ChildProcess(pid_t pid, bool group) noexcept : pid_(pid), group_(group) {}
  // The child was reaped: records how it ended and, with kill_group, kills what is left of its
  // group (the group id stays the reaped pid's while any member lives, so it names no other).
  void reaped(ExitStatus st) noexcept;
  pid_t pid_ = -1;
  std::optional<ExitStatus> status_{};
  std::chrono::milliseconds grace_{2000};
  bool group_ = false;  // SpawnOptions::kill_group
};

// Decodes a waitpid() status word.
ExitStatus decode_wait_status(int status) noexcept;

}  // namespace fanout
