// The watch on unauthenticated connections. See connection_guard.hpp.
#include "fanout/net/connection_guard.hpp"

#include <arpa/inet.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <unordered_map>
#include <zmq.hpp>

namespace fanout::net {

namespace {

// What a Curve server sends before READY (RFC 23, RFC 26): the 64-byte greeting and WELCOME, a
// 168-byte command in a frame with a 2-byte header. More has gone out only once the client was
// admitted (READY), or refused (ERROR, after which ZeroMQ closes the connection).
constexpr std::uint64_t kCurveServerHandshakeBytes = 64 + 2 + 168;

constexpr int kEvents = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_ACCEPT_FAILED | ZMQ_EVENT_DISCONNECTED |
                        ZMQ_EVENT_CLOSED | ZMQ_EVENT_MONITOR_STOPPED;

std::atomic<unsigned> g_guards{0};  // tells the monitor endpoints of one process apart

std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

unsigned long long open_files_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  return static_cast<unsigned long long>(rl.rlim_cur);
}

}  // namespace

struct ConnectionGuard::Impl {
  zmq::socket_t pair;
  std::string endpoint;
  // What the serving thread alone touches.
  // Connections accepted and not yet past their handshake: descriptor -> when accepted.
  std::unordered_map<int, std::chrono::steady_clock::time_point> pending{};
  bool warned_cut = false;
  std::uint64_t failures_logged = 0;
  std::chrono::steady_clock::time_point last_failure_log{};
};

ConnectionGuard::ConnectionGuard(Context& ctx, Socket& sock, std::string name, Logger log)
    : name_(std::move(name)), log_(std::move(log)) {
  const std::string ep = "inproc://fanout-guard-" + name_ + "-" + std::to_string(++g_guards);
  if (zmq_socket_monitor(sock.raw(), ep.c_str(), kEvents) != 0) {
    throw Failure(ErrorCode::Io,
                  "monitor of the " + name_ + " socket: " + zmq_strerror(zmq_errno()));
  }
  try {
    auto& zctx = *static_cast<zmq::context_t*>(ctx.raw());
    impl_ = std::make_unique<Impl>(Impl{zmq::socket_t(zctx, zmq::socket_type::pair), ep});
    impl_->pair.set(zmq::sockopt::linger, 0);
    impl_->pair.connect(ep);
  } catch (const zmq::error_t& e) {
    throw Failure(ErrorCode::Io, "monitor of the " + name_ + " socket: " + e.what());
  }
  // The PAIR socket moves to the thread here; thread creation orders the accesses.
  thread_ = std::thread([this] { serve(); });
}

ConnectionGuard::~ConnectionGuard() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

void ConnectionGuard::serve() {
  auto& pending = impl_->pending;
  zmq::pollitem_t item{impl_->pair.handle(), 0, ZMQ_POLLIN, 0};
  while (!stop_.load(std::memory_order_relaxed)) {
    try {
      // Pending connections are checked every 2 ms, or less often when there are many, so that
      // an idle-connection flood costs bounded CPU: what a sender can push between two checks is
      // bounded by the bandwidth times this interval (at most 50 ms).
      const auto interval = pending.empty() ? std::chrono::milliseconds(100)
                                            : std::chrono::milliseconds(std::clamp<long>(
                                                  static_cast<long>(pending.size() / 32), 2, 50));
      (void)zmq::poll(&item, 1, interval);
      // Every event queued so far first, so that a descriptor closed (and perhaps reused) is
      // known before the byte counts are read.
      if (!read_events()) return;
      check_pending();
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      if (e.num() != EINTR) log_->warn("{} socket monitor: {}", name_, e.what());
    }
  }
}

bool ConnectionGuard::read_events() {
  auto& s = impl_->pair;
  zmq::message_t head, where;
  while (s.recv(head, zmq::recv_flags::dontwait)) {
    if (head.more()) (void)s.recv(where, zmq::recv_flags::none);
    if (head.size() < 6) continue;
    std::uint16_t event = 0;
    std::uint32_t value = 0;
    std::memcpy(&event, head.data(), 2);
    std::memcpy(&value, static_cast<const char*>(head.data()) + 2, 4);
    const int fd = static_cast<int>(value);
    switch (event) {
      case ZMQ_EVENT_ACCEPTED:
        impl_->pending[fd] = std::chrono::steady_clock::now();
        break;
      case ZMQ_EVENT_DISCONNECTED:
      case ZMQ_EVENT_CLOSED:
        impl_->pending.erase(fd);
        break;
      case ZMQ_EVENT_ACCEPT_FAILED:
        on_accept_failed(static_cast<int>(value), where.to_string());
        break;
      case ZMQ_EVENT_MONITOR_STOPPED:
        return false;
      default:
        break;
    }
  }
  return true;
}

void ConnectionGuard::on_accept_failed(int err, const std::string& where) {
  const auto n = accept_failures_.fetch_add(1, std::memory_order_relaxed) + 1;
  const auto now = std::chrono::steady_clock::now();
  // The first in full, then at most once a minute with the count since.
  if (impl_->failures_logged == 0 || now - impl_->last_failure_log >= std::chrono::minutes(1)) {
    log_->warn(
        "{} socket {}: cannot accept a connection: {} (open files limit {}); {} "
        "accept failures so far, counted in the stats line",
        name_, where, std::strerror(err), open_files_limit(), n);
    impl_->failures_logged = n;
    impl_->last_failure_log = now;
  }
}

void ConnectionGuard::check_pending() {
  auto& pending = impl_->pending;
  const auto now = std::chrono::steady_clock::now();
  for (auto it = pending.begin(); it != pending.end();) {
    tcp_info ti{};
    socklen_t len = sizeof ti;
    // Not TCP (ipc://), or already gone: nothing to watch.
    if (::getsockopt(it->first, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received) {
      it = pending.erase(it);
      continue;
    }
    if (ti.tcpi_bytes_sent > kCurveServerHandshakeBytes ||
        now - it->second > kHandshakeTimeout + std::chrono::seconds(5)) {
      it = pending.erase(it);  // admitted (READY went out), or closed by ZeroMQ meanwhile
      continue;
    }
    if (ti.tcpi_bytes_received > kMaxUnauthenticatedBytes) {
      cut_connection(it->first, ti.tcpi_bytes_received);
      it = pending.erase(it);
      continue;
    }
    ++it;
  }
}

void ConnectionGuard::cut_connection(int fd, std::uint64_t received) {
  const std::string from = peer_address(fd);
  // Not close(): the descriptor is ZeroMQ's. It sees the connection end and frees it. Linger 0
  // makes that close an abortive one (RST): without it the kernel keeps the connection in
  // FIN-WAIT-2 for tcp_fin_timeout with the peer's send blocked on a zero window, a socket
  // the peer can pin per connection it opens.
  const linger abort{1, 0};
  (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
  (void)::shutdown(fd, SHUT_RDWR);
  const auto n = cut_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (!impl_->warned_cut) {
    impl_->warned_cut = true;
    log_->warn(
        "{} socket: cut a connection from {} that sent {} bytes before authenticating "
        "(at most {} allowed; further ones are counted in the stats line, {} so far)",
        name_, from, received, kMaxUnauthenticatedBytes, n);
  }
}

}  // namespace fanout::net
