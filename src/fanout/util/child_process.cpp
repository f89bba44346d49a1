// ChildProcess: fork/exec with fd remapping, and reaping that never leaves zombies.
#include "fanout/util/child_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

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
  }
  return *this;
}

namespace {

// Opens `path` for the child and moves it onto `target`. Only async-signal-safe calls.
void redirect(const std::string& path, int target, int flags) {
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) ::_exit(126);
  if (fd != target) {
    ::dup2(fd, target);
    ::close(fd);
  }
}

}  // namespace

Expected<ChildProcess> ChildProcess::spawn(const SpawnOptions& opts) {
  if (opts.argv.empty()) return make_error(ErrorCode::InvalidArgument, "spawn: empty argv");
  // Everything the child needs is prepared before fork: after it only async-signal-safe calls.
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
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = opts.argv;
  std::vector<char*> argv;
  for (auto& s : argv_copy) argv.push_back(s.data());
  argv.push_back(nullptr);
  // Resolve argv[0] through PATH now (execvpe would use the child's PATH, which is the same).
  // Reserved before fork(): after it, the child may not allocate (another thread of the parent,
  // such as a ZeroMQ I/O thread, may hold the malloc lock).
  std::vector<std::pair<int, int>> moved;
  moved.reserve(opts.fd_map.size());
  // Block every signal across fork(): until the child has reset the parent's handlers, a signal
  // sent to it (stop() right after spawn) would run one of them there and be lost. A signal that
  // arrives meanwhile stays pending and is delivered, with its default action, once unblocked.
  sigset_t all;
  sigset_t saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  pid_t pid = ::fork();
  if (pid != 0) ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) return make_error(ErrorCode::Io, std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    if (opts.new_process_group) ::setpgid(0, 0);
    // Restore default dispositions: every handler of the parent, and what it ignored here.
    for (int sig = 1; sig < NSIG; ++sig) {
      struct sigaction sa {};
      if (::sigaction(sig, nullptr, &sa) == 0 && sa.sa_handler != SIG_DFL &&
          sa.sa_handler != SIG_IGN) {
        ::signal(sig, SIG_DFL);
      }
    }
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // Move mapped fds above the target range first so that maps like {3->4, 4->3} work.
    for (const auto& [from, to] : opts.fd_map) {
      int tmp = ::fcntl(from, F_DUPFD, 100);
      moved.emplace_back(tmp, to);
    }
    for (const auto& [tmp, to] : moved) {
      ::dup2(tmp, to);  // dup2 clears FD_CLOEXEC on the target
      ::close(tmp);
    }
    if (opts.stdin_file == "null") {
      redirect("/dev/null", 0, O_RDONLY);
    } else if (!opts.stdin_file.empty()) {
      redirect(opts.stdin_file, 0, O_RDONLY);
    }
    if (!opts.stdout_file.empty()) redirect(opts.stdout_file, 1, O_WRONLY | O_CREAT | O_APPEND);
    if (!opts.stderr_file.empty()) redirect(opts.stderr_file, 2, O_WRONLY | O_CREAT | O_APPEND);
    if (!opts.cwd.empty() && ::chdir(opts.cwd.c_str()) != 0) ::_exit(126);
    ::execvpe(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  return ChildProcess(pid);
}

std::optional<ExitStatus> ChildProcess::poll() {
  if (status_) return status_;
  if (pid_ <= 0) return std::nullopt;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = decode_wait_status(st);
    pid_ = -1;
    return status_;
  }
  if (r < 0 && errno == ECHILD) {
    status_ = ExitStatus{};
    pid_ = -1;
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
      status_ = ExitStatus{};
      pid_ = -1;
      return *status_;
    }
  }
  status_ = decode_wait_status(st);
  pid_ = -1;
  return *status_;
}

void ChildProcess::signal(int sig) noexcept {
  if (pid_ > 0) ::kill(pid_, sig);
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
