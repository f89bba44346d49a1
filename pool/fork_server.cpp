// See fork_server.hpp.
#include "pool/fork_server.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "fanout/util/fd.hpp"

namespace fanout::pool {

bool wants_fork_server(const proto::JobSpec& spec) {
  if (spec.runtime != "python") return false;
  for (const auto& kv : spec.env) {
    if (kv == "FANOUT_WORKER_START=spawn") return false;
  }
  return true;
}

namespace {

// A listening socket on an abstract name (nothing in the file system to remove), unique to this
// pool process and job.
Expected<UniqueFd> listen_on(const std::string& name) {
  UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.get() < 0) return make_error(ErrorCode::Io, std::string("socket: ") + std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), len) < 0 || ::listen(s.get(), 256) < 0) {
    return make_error(ErrorCode::Io, "fork server socket @" + name + ": " + std::strerror(errno));
  }
  return s;
}

}  // namespace

Expected<ForkServer> ForkServer::start(const WorkerLaunch& first, std::uint64_t job_id) {
  static std::atomic<unsigned> counter{0};
  ForkServer f;
  f.name_ = "fanout-fork-" + std::to_string(::getpid()) + "-" + std::to_string(job_id) + "-" +
            std::to_string(counter.fetch_add(1));
  auto listener = listen_on(f.name_);
  if (!listener) return Unexpected{listener.error()};
  // The server's fd 4 reads a pipe only this pool writes to: its EOF tells the server that the
  // pool is gone (even by SIGKILL), so that no server outlives its pool.
  auto alive = make_pipe();
  if (!alive) return Unexpected{alive.error()};
  SpawnOptions so;
  so.argv = first.argv;
  so.env_set = first.env;
  so.env_set.emplace_back("FANOUT_FORK_SERVER", "1");
  so.cwd = first.cwd;
  so.stdin_file = "null";
  so.stdout_file = first.stdout_file;
  so.stderr_file = first.stderr_file;
  so.fd_map = {{listener->get(), 3}, {alive->read.get(), 4}};
  so.kill_group = true;
  auto child = ChildProcess::spawn(so);
  if (!child) return Unexpected{child.error()};
  f.proc_ = std::move(*child);
  f.pool_alive_ = std::move(alive->write);
  // The pool's copy of the listener is closed here: when the server ends, proxies waiting on it
  // are refused and start their worker themselves.
  return f;
}

WorkerLaunch ForkServer::via(WorkerLaunch l, const std::string& worker_bin) const {
  std::vector<std::string> argv = {worker_bin, "fork-via", name_, "--"};
  argv.insert(argv.end(), l.argv.begin(), l.argv.end());
  l.argv = std::move(argv);
  return l;
}

}  // namespace fanout::pool
