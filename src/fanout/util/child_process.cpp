// ChildProcess: posix_spawn with fd remapping, and reaping that never leaves zombies.
#include "fanout/util/child_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "fanout/util/fd.hpp"

extern char** environ;

namespace fanout {

std::string ExitStatus::describe() const {
  if (signal > 0) return fmt::format("killed by signal {} ({})", signal, ::strsignal(signal));
  return fmt::format("exit code {}", code);
}

ExitStatus decode_wait_status(int status) noexcept {
  ExitStatus st;
  if (WIFEXITED(status)) {
    st.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    st.signal = WTERMSIG(status);
  }
  return st;
}

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  if (this != &o) {
    stop();
    pid_ = std::exchange(o.pid_, -1);
    status_ = std::move(o.status_);
    grace_ = o.grace_;
    group_ = o.group_;
  }
  return *this;
}

namespace {

// posix_spawn's attributes and file actions, destroyed on every path.
struct SpawnAttr {
  posix_spawnattr_t a{};
  SpawnAttr() { ::posix_spawnattr_init(&a); }
  ~SpawnAttr() { ::posix_spawnattr_destroy(&a); }
  SpawnAttr(const SpawnAttr&) = delete;
  SpawnAttr& operator=(const SpawnAttr&) = delete;
};
struct FileActions {
  posix_spawn_file_actions_t fa{};
  FileActions() { ::posix_spawn_file_actions_init(&fa); }
  ~FileActions() { ::posix_spawn_file_actions_destroy(&fa); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
};

// What the child is told when something other than exec fails.
std::string spawn_what(const SpawnOptions& opts) {
  std::string what = opts.argv[0];
  if (!opts.cwd.empty()) what += " in " + opts.cwd;
  for (const auto* f : {&opts.stdin_file, &opts.stdout_file, &opts.stderr_file}) {
    if (f->empty() || *f == "null" || (f == &opts.stderr_file && *f == opts.stdout_file)) continue;
    what += ", " + *f;
  }
  return what;
}

// The parent's environment with opts.env_set applied over it, as KEY=VALUE strings.
std::vector<std::string> child_environment(const SpawnOptions& opts) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    bool overridden = false;
    for (const auto& [k, v] : opts.env_set) {
      if (kv.size() > k.size() && kv.substr(0, k.size()) == k && kv[k.size()] == '=') {
        overridden = true;
        break;
      }
    }
    if (!overridden) env_strings.emplace_back(kv);
  }
  for (const auto& [k, v] : opts.env_set) env_strings.push_back(k + "=" + v);
  return env_strings;
}

// Signal mask and dispositions of a fresh program, and the process group opts ask for.
void set_signals_and_group(SpawnAttr& attr, const SpawnOptions& opts) {
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  // Every signal unblocked, and every disposition the default (what the parent ignores, such as
  // SIGPIPE, too; exec resets the handled ones): the child starts as a fresh program would. Only
  // an ignored SIGHUP is inherited, as nohup(1) means it to be.
  sigset_t none;
  sigemptyset(&none);
  ::posix_spawnattr_setsigmask(&attr.a, &none);
  sigset_t all;
  sigfillset(&all);
  sigdelset(&all, SIGKILL);
  sigdelset(&all, SIGSTOP);
  sigdelset(&all, SIGHUP);
  ::posix_spawnattr_setsigdefault(&attr.a, &all);
  if (opts.new_process_group || opts.kill_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    ::posix_spawnattr_setpgroup(&attr.a, 0);
  }
  ::posix_spawnattr_setflags(&attr.a, flags);
}

// Sets the calling thread's CPU affinity to `cpus` for its lifetime, then restores it: a child
// spawned meanwhile (posix_spawn's clone runs on this thread) inherits the mask through exec.
class ThreadAffinity final {
 public:
  explicit ThreadAffinity(const std::vector<int>& cpus) {
    if (cpus.empty()) return;
    CPU_ZERO(&saved_);
    if (::sched_getaffinity(0, sizeof(saved_), &saved_) != 0) {
      error_ = errno;
      return;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    for (const int c : cpus) {
      if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
    }
    if (::sched_setaffinity(0, sizeof(set), &set) != 0) {
      error_ = errno;
      return;
    }
    set_ = true;
  }
  ~ThreadAffinity() {
    if (set_) (void)::sched_setaffinity(0, sizeof(saved_), &saved_);
  }
  ThreadAffinity(const ThreadAffinity&) = delete;
  ThreadAffinity& operator=(const ThreadAffinity&) = delete;
  [[nodiscard]] int error() const noexcept { return error_; }

 private:
  cpu_set_t saved_{};
  bool set_ = false;
  int error_ = 0;
};

}  // namespace

Expected<ChildProcess> ChildProcess::spawn(const SpawnOptions& opts) {
  if (opts.argv.empty()) return make_error(ErrorCode::InvalidArgument, "spawn: empty argv");
  // posix_spawn (glibc: clone(CLONE_VM | CLONE_VFORK) + exec) instead of fork + exec from a
  // multithreaded process: nothing of the parent's runs in the child between the two, so no
  // lock another thread held (malloc, ZeroMQ) can be met there, and glibc blocks every signal
  // across the clone.
  std::vector<std::string> env_strings = child_environment(opts);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = opts.argv;
  std::vector<char*> argv;
  for (auto& s : argv_copy) argv.push_back(s.data());
  argv.push_back(nullptr);

  SpawnAttr attr;
  set_signals_and_group(attr, opts);

  FileActions fa;
  // fd_map: each source is first duplicated here above the target range, close-on-exec, so that
  // maps like {3->4, 4->3} work; the child's dup2 onto the target clears close-on-exec there.
  std::vector<UniqueFd> staged;
  staged.reserve(opts.fd_map.size());
  for (const auto& [from, to] : opts.fd_map) {
    const int tmp = ::fcntl(from, F_DUPFD_CLOEXEC, 100);
    if (tmp < 0) {
      return make_error(ErrorCode::Io, fmt::format("spawn {}: fd {}: {}", opts.argv[0], from,
                                                   std::strerror(errno)));
    }
    staged.emplace_back(tmp);
    ::posix_spawn_file_actions_adddup2(&fa.fa, tmp, to);
  }
  if (opts.stdin_file == "null") {
    ::posix_spawn_file_actions_addopen(&fa.fa, 0, "/dev/null", O_RDONLY, 0);
  } else if (!opts.stdin_file.empty()) {
    ::posix_spawn_file_actions_addopen(&fa.fa, 0, opts.stdin_file.c_str(), O_RDONLY, 0);
  }
  const int append = O_WRONLY | O_CREAT | O_APPEND;
  if (!opts.stdout_file.empty()) {
    ::posix_spawn_file_actions_addopen(&fa.fa, 1, opts.stdout_file.c_str(), append, 0644);
  }
  if (!opts.stderr_file.empty()) {
    ::posix_spawn_file_actions_addopen(&fa.fa, 2, opts.stderr_file.c_str(), append, 0644);
  }
  if (!opts.cwd.empty()) ::posix_spawn_file_actions_addchdir_np(&fa.fa, opts.cwd.c_str());

  const ThreadAffinity affinity(opts.cpus);
  if (affinity.error() != 0) {
    return make_error(ErrorCode::Io,
                      fmt::format("cannot run {}: CPU affinity: {}", spawn_what(opts),
                                  std::strerror(affinity.error())));
  }
  pid_t pid = -1;
  // argv[0] is searched in the parent's PATH (as execvpe did with the same environment).
  const int rc = ::posix_spawnp(&pid, argv[0], &fa.fa, &attr.a, argv.data(), envp.data());
  if (rc != 0) {
    // glibc reports a failed file action or exec here: nothing was started.
    return make_error(ErrorCode::Io,
                      fmt::format("cannot run {}: {}", spawn_what(opts), std::strerror(rc)));
  }
  return ChildProcess(pid, opts.kill_group);
}

void ChildProcess::reaped(ExitStatus st) noexcept {
  const pid_t group = pid_;
  status_ = st;
  pid_ = -1;
  // A member left behind would outlive the job (a grandchild started with `&`, or by fork()
  // from a worker), and may hold the child's pipes open.
  if (group_ && group > 0) ::kill(-group, SIGKILL);
}

std::optional<ExitStatus> ChildProcess::poll() {
  if (status_) return status_;
  if (pid_ <= 0) return std::nullopt;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    reaped(decode_wait_status(st));
    return status_;
  }
  if (r < 0 && errno == ECHILD) {
    reaped(ExitStatus{});
    return status_;
  }
  return std::nullopt;
}

std::optional<ExitStatus> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto step = std::chrono::milliseconds(1);
  while (true) {
    if (auto st = poll()) return st;
    if (pid_ <= 0) return std::nullopt;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(step);
    step = std::min(step * 2, std::chrono::milliseconds(20));
  }
}

ExitStatus ChildProcess::wait() {
  if (status_) return *status_;
  if (pid_ <= 0) return ExitStatus{};
  int st = 0;
  while (::waitpid(pid_, &st, 0) < 0) {
    if (errno != EINTR) {
      reaped(ExitStatus{});
      return *status_;
    }
  }
  reaped(decode_wait_status(st));
  return *status_;
}

void ChildProcess::signal(int sig) noexcept {
  if (pid_ > 0) ::kill(group_ ? -pid_ : pid_, sig);
}

ExitStatus ChildProcess::stop() {
  if (status_) return *status_;
  if (pid_ <= 0) return ExitStatus{};
  if (auto st = poll()) return *st;
  signal(SIGTERM);
  if (auto st = wait_for(grace_)) return *st;
  signal(SIGKILL);
  return wait();
}

}  // namespace fanout
