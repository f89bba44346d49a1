// What an unauthenticated network peer can make the interchange hold: a watch on a Curve ROUTER
// socket's connections that cuts those sending more than a handshake before they authenticate,
// and reports accept failures. See docs/security.md ("Unauthenticated peers").
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "fanout/net/socket.hpp"
#include "fanout/util/log.hpp"

namespace fanout::net {

// ZeroMQ reads a frame of up to ZMQ_MAXMSGSIZE (proto::kMaxFrameBytes) into memory before the
// Curve handshake and ZAP can refuse the sender, and applies one limit before and after
// authentication. A Curve client sends under 1 KiB before it is admitted (greeting, HELLO,
// INITIATE): a connection that has received more than this before the server sent READY is cut.
inline constexpr std::uint64_t kMaxUnauthenticatedBytes = 64 * 1024;
// How long a connection may take to complete its handshake (ZMQ_HANDSHAKE_IVL on the
// interchange's sockets) before ZeroMQ closes it: what an idle unauthenticated connection costs a
// descriptor for.
inline constexpr std::chrono::milliseconds kHandshakeTimeout{5000};

// Watches the connections of `sock`, a ROUTER bound as a Curve server (bind_secure), from its own
// thread through a ZeroMQ socket monitor. Every few milliseconds (up to 50 with many
// connections pending) it reads the kernel's byte counts (TCP_INFO) of each connection still in
// its handshake, and shuts down one that received more than kMaxUnauthenticatedBytes while the
// server had sent no more than its side of a Curve handshake before READY; ZeroMQ then closes it
// and frees what it buffered. Accept failures (no descriptors left) are logged at WARN, the
// first in full and then at most once a minute, and counted. Create it on the thread that owns
// `sock`, before `sock` binds; destroy it before `sock` and the Context. Counters: any thread.
class ConnectionGuard final {
 public:
  // `name` tells the socket apart in logs ("client", "pool"). Throws Failure when the monitor
  // cannot be set up.
  ConnectionGuard(Context& ctx, Socket& sock, std::string name, Logger log);
  ~ConnectionGuard();
  ConnectionGuard(const ConnectionGuard&) = delete;
  ConnectionGuard& operator=(const ConnectionGuard&) = delete;

  // Connections cut for sending too much before authenticating, since the start.
  [[nodiscard]] std::uint64_t cut() const noexcept { return cut_.load(std::memory_order_relaxed); }
  // Connections ZeroMQ could not accept (EMFILE, ENFILE, ...), since the start.
  [[nodiscard]] std::uint64_t accept_failures() const noexcept {
    return accept_failures_.load(std::memory_order_relaxed);
  }

 private:
  void serve();
  bool read_events();  // false once the monitor stopped
  void on_accept_failed(int err, const std::string& where);
  void check_pending();
  void cut_connection(int fd, std::uint64_t received);

  struct Impl;
  std::string name_;
  Logger log_;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> cut_{0};
  std::atomic<std::uint64_t> accept_failures_{0};
  std::thread thread_;
};

}  // namespace fanout::net
