// See fork_server.hpp.
#include "pool/fork_server.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "fanout/util/fd.hpp"
#include "pool/launch.hpp"

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

// A name for a server's socket, unique to this pool process, job and server.
std::string fresh_name(std::uint64_t job_id) {
  static std::atomic<unsigned> counter{0};
  return "fanout-fork-" + std::to_string(::getpid()) + "-" + std::to_string(job_id) + "-" +
         std::to_string(counter.fetch_add(1));
}

// Variables an interpreter, or the C library under it, reads when it starts (the module search
// path, the locale and so the streams' encoding, the user's site folder, the dynamic linker and
// malloc): an interpreter started with other values is not the one the job would get. Others
// are read by a module when it is imported, which for the job's modules happens after the warm
// interpreter has taken the job's environment.
bool read_at_start(const std::string& name) {
  for (const char* prefix : {"PYTHON", "LD_", "LC_", "MALLOC_"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  for (const char* exact : {"LANG", "LANGUAGE", "HOME", "PATH", "TZ", "GLIBC_TUNABLES"}) {
    if (name == exact) return true;
  }
  return false;
}

}  // namespace

Expected<WarmInterpreter> WarmInterpreter::start(const std::string& python,
                                                 const std::string& shim_dir) {
  WarmInterpreter w;
  w.argv_ = {python, "-u", shim_dir + "/fanout_worker.py"};
  w.pythonpath_ = merged_pythonpath("", shim_dir, std::getenv("PYTHONPATH"));
  int sv[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
    return make_error(ErrorCode::Io, std::string("socketpair: ") + std::strerror(errno));
  }
  UniqueFd ours(sv[0]);
  UniqueFd theirs(sv[1]);
  auto alive = make_pipe();
  if (!alive) return Unexpected{alive.error()};
  SpawnOptions so;
  so.argv = w.argv_;
  so.env_set = {{"PYTHONPATH", w.pythonpath_}, {"FANOUT_WARM_PYTHON", "1"}};
  so.stdin_file = "null";
  so.fd_map = {{theirs.get(), 3}, {alive->read.get(), 4}};
  so.kill_group = true;
  auto child = ChildProcess::spawn(so);
  if (!child) return Unexpected{child.error()};
  w.proc_ = std::move(*child);
  w.control_ = std::move(ours);
  w.pool_alive_ = std::move(alive->write);
  return w;
}

bool WarmInterpreter::fits(const WorkerLaunch& first, std::string& why) const {
  if (first.argv.size() < argv_.size() ||
      !std::equal(argv_.begin(), argv_.end(), first.argv.begin())) {
    why = "the job's workers run " + (first.argv.empty() ? std::string("?") : first.argv[0]) +
          (first.argv.size() > 2 ? " " + first.argv[2] : std::string()) + ", not " + argv_[0] +
          " " + argv_[2];
    return false;
  }
  for (const auto& [name, value] : first.env) {
    if (!read_at_start(name)) continue;
    const char* mine = name == "PYTHONPATH" ? pythonpath_.c_str() : std::getenv(name.c_str());
    if (mine == nullptr || value != mine) {
      why = "the job sets " + name + ", which an interpreter reads at its start";
      return false;
    }
  }
  return true;
}

Expected<ForkServer> ForkServer::adopt(WarmInterpreter&& warm, const WorkerLaunch& first,
                                       std::uint64_t job_id) {
  WarmInterpreter w = std::move(warm);  // on every error below, its destructor stops it
  if (auto st = w.proc_.poll()) {
    return make_error(ErrorCode::Io, "the warm interpreter has ended (" + st->describe() + ")");
  }
  ForkServer f;
  f.name_ = fresh_name(job_id);
  auto listener = listen_on(f.name_);
  if (!listener) return Unexpected{listener.error()};
  // What fanout_worker.py's _read_warm_request reads: the length, then the fields NUL-separated.
  std::string body = first.cwd + '\0' + first.stdout_file + '\0' + first.stderr_file + '\0' +
                     std::to_string(first.argv.size() - w.argv_.size());
  for (std::size_t i = w.argv_.size(); i < first.argv.size(); ++i) body += '\0' + first.argv[i];
  for (const auto& [name, value] : first.env) body += '\0' + name + '=' + value;
  body += std::string(1, '\0') + "FANOUT_FORK_SERVER=1";
  const std::uint64_t n = body.size();
  std::string msg(sizeof n, '\0');
  std::memcpy(msg.data(), &n, sizeof n);
  msg += body;
  // One write that must take it all: the socket is empty and its buffer far larger than a
  // start, and a pool never waits on an interpreter.
  const int fd = listener->get();
  const ssize_t sent =
      send_with_fds(w.control_.get(), msg, std::span<const int>(&fd, 1), MSG_DONTWAIT);
  if (sent < 0) {
    return make_error(ErrorCode::Io,
                      std::string("cannot reach the warm interpreter: ") + std::strerror(errno));
  }
  if (static_cast<std::size_t>(sent) != msg.size()) {
    return make_error(ErrorCode::Io, "the warm interpreter took " + std::to_string(sent) + " of " +
                                         std::to_string(msg.size()) + " bytes of the job's start");
  }
  f.proc_ = std::move(w.proc_);
  f.pool_alive_ = std::move(w.pool_alive_);
  // The pool's copies of the control socket and the listener close here: the listener lives on
  // in the message until the server takes it, and with the server after that.
  return f;
}

Expected<ForkServer> ForkServer::start(const WorkerLaunch& first, std::uint64_t job_id) {
  ForkServer f;
  f.name_ = fresh_name(job_id);
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
