// See fork_proxy.hpp.
#include "pool/fork_proxy.hpp"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fanout/protocol/exit_codes.hpp"
#include "fanout/util/fd.hpp"

extern char** environ;

namespace fanout::pool {
namespace {

constexpr int kHandedFds = 5;  // 0-2 and the worker pipe's 3 and 4

int connect_to(const std::string& name) {
  const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (name.size() + 1 > sizeof addr.sun_path) {
    ::close(s);
    return -1;
  }
  // An abstract name: nothing in the file system to leave behind.
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::connect(s, reinterpret_cast<sockaddr*>(&addr), len) < 0) {
    ::close(s);
    return -1;
  }
  return s;
}

// pgid NUL cwd NUL cpus NUL KEY=VALUE NUL ..., as fanout_worker.py's _read_fork_request reads it.
std::string request_body() {
  std::string body = std::to_string(::getpid());
  body.push_back('\0');
  std::vector<char> cwd(4096);
  while (::getcwd(cwd.data(), cwd.size()) == nullptr && errno == ERANGE) cwd.resize(cwd.size() * 2);
  body += cwd.data();
  body.push_back('\0');
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    std::string cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
    }
    body += cpus;
  }
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    body.push_back('\0');
    body += *e;
  }
  return body;
}

bool send_request(int s) {
  const std::string body = request_body();
  std::string msg(8, '\0');
  const std::uint64_t n = body.size();
  std::memcpy(msg.data(), &n, sizeof n);  // little-endian on every platform we build for
  msg += body;
  // The fds travel with the first chunk; a stream socket may take the rest in later writes.
  const int fds[kHandedFds] = {0, 1, 2, 3, 4};
  const ssize_t sent = send_with_fds(s, msg, fds);
  if (sent < 0) return false;
  std::size_t off = static_cast<std::size_t>(sent);
  while (off < msg.size()) {
    const ssize_t w = ::send(s, msg.data() + off, msg.size() - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += static_cast<std::size_t>(w);
  }
  return true;
}

// One line from the server ("pid N", "exit C", "signal S"); empty at EOF or an error.
std::string read_line(int s, std::string& buf) {
  while (true) {
    const auto nl = buf.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      return line;
    }
    char tmp[256];
    const ssize_t n = ::read(s, tmp, sizeof tmp);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return {};
    buf.append(tmp, static_cast<std::size_t>(n));
  }
}

[[noreturn]] void exit_like(const std::string& line) {
  int v = 0;
  if (std::sscanf(line.c_str(), "signal %d", &v) == 1) {
    std::signal(v, SIG_DFL);
    sigset_t all;
    sigemptyset(&all);
    sigaddset(&all, v);
    ::sigprocmask(SIG_UNBLOCK, &all, nullptr);
    ::raise(v);
  }
  if (std::sscanf(line.c_str(), "exit %d", &v) == 1) ::_exit(v);
  ::_exit(proto::kExitRuntime);
}

// The server went away after the fork: its status cannot be relayed; wait for the worker to end.
[[noreturn]] void wait_orphan(pid_t pid) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    char b = 0;
    pollfd p{pidfd, POLLIN, 0};
    while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    (void)b;
  }
  std::fprintf(stderr,
               "fanout-worker: the fork server ended before worker %d; its exit status is lost\n",
               static_cast<int>(pid));
  ::_exit(proto::kExitRuntime);
}

}  // namespace

int run_fork_proxy(int argc, char** argv) {
  if (argc < 5 || std::strcmp(argv[3], "--") != 0) {
    std::fprintf(stderr, "usage: fanout-worker fork-via NAME -- PROGRAM [ARGS...]\n");
    return proto::kExitUsage;
  }
  const std::string name = argv[2];
  const int s = connect_to(name);
  if (s >= 0 && send_request(s)) {
    std::string buf;
    const std::string first = read_line(s, buf);
    pid_t pid = 0;
    if (std::sscanf(first.c_str(), "pid %d", &pid) == 1 && pid > 0) {
      // From here the worker is in our group and gets what the pool sends it: we wait for the
      // worker's end and relay its status instead of dying first (a SIGTERM handler in the
      // worker keeps its grace).
      sigset_t stop;
      sigemptyset(&stop);
      for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&stop, sig);
      ::sigprocmask(SIG_BLOCK, &stop, nullptr);
      // The worker holds the pipe now; ours would keep it open past the worker's end.
      ::close(3);
      ::close(4);
      const std::string end = read_line(s, buf);
      if (end.empty()) wait_orphan(pid);
      exit_like(end);
    }
  }
  if (s >= 0) ::close(s);
  std::fprintf(
      stderr, "fanout-worker: the fork server %s could not start this worker; starting %s itself\n",
      name.c_str(), argv[4]);
  ::execvp(argv[4], argv + 4);
  std::fprintf(stderr, "fanout-worker: cannot run %s: %s\n", argv[4], std::strerror(errno));
  return proto::kExitRuntime;
}

}  // namespace fanout::pool
