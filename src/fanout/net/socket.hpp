// ZeroMQ wrappers: net/ is the only module that includes zmq.hpp (tools/check_layering.sh holds
// it to that). net/ moves frames; it knows nothing of what they mean (protocol/ does).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/util/expected.hpp"

namespace fanout::net {

// One ZeroMQ context per process. Declare it before the sockets that use it: destroying a
// context while its sockets are open blocks. Not copyable.
class Context final {
 public:
  Context();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  // The zmq::context_t, for net/ only.
  [[nodiscard]] void* raw() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A received message: the peer's routing id (ROUTER sockets only) and the payload frame.
struct Message {
  std::string peer{};
  std::string frame{};
  bool well_formed = true;  // false when the peer sent an unexpected number of parts
  // The fingerprint of the peer's Curve key (ZAP User-Id), filled only by a socket made by
  // bind_secure for Role::Pool on a Curve endpoint; empty otherwise.
  std::string user_id{};
};

enum class SendResult : std::uint8_t {
  Sent,
  WouldBlock,   // the peer's queue is at its high-water mark; try again later
  Unreachable,  // ROUTER: no such peer (disconnected); the message was not queued
};

// A ROUTER or DEALER socket with linger 0, ROUTER_MANDATORY (and no ROUTER_HANDOVER) on
// routers, and high-water marks sized for the credit-based flow control above it. Used by one
// thread only.
class Socket final {
 public:
  enum class Kind : std::uint8_t { Router, Dealer };
  // `identity` sets the routing id of a DEALER (empty: assigned by the peer).
  // Throws Failure when ZeroMQ refuses (bad endpoint, address in use).
  Socket(Context& ctx, Kind kind, const std::string& identity = {});
  ~Socket();
  Socket(Socket&&) noexcept;
  Socket& operator=(Socket&&) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Binds and returns the resolved endpoint ("tcp://127.0.0.1:41234" for "tcp://127.0.0.1:*").
  [[nodiscard]] std::string bind(const std::string& endpoint);
  void connect(const std::string& endpoint);
  void disconnect(const std::string& endpoint);
  // A connection whose handshake (greeting, Curve and ZAP) has not completed within `timeout` is
  // closed. Applies to connections accepted by later bind() calls only.
  void set_handshake_timeout(std::chrono::milliseconds timeout);
  // ZeroMQ's own heartbeat (ZMTP PING, answered by any libzmq peer): a connection that answers
  // nothing for `timeout` is closed, and a ROUTER frees its routing id. Call before bind().
  void set_peer_liveness(std::chrono::milliseconds interval, std::chrono::milliseconds timeout);
  // Lets queued messages go out for up to `linger` after close (default 0: dropped).
  void set_linger(std::chrono::milliseconds linger);

  // DEALER: sends one frame. ROUTER: sends `frame` to `peer`.
  SendResult send(std::string_view frame, bool dont_wait = true);
  SendResult send_to(std::string_view peer, std::string_view frame, bool dont_wait = true);

  // Receives one message without blocking; false when none is waiting.
  bool recv(Message& out);

  // recv() fills Message::user_id from then on (one metadata lookup per message).
  void set_read_user_id(bool on) noexcept;

  [[nodiscard]] void* raw() const noexcept;
  [[nodiscard]] Kind kind() const noexcept { return kind_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Kind kind_;
};

// Waits on sockets and plain file descriptors. Items are registered once; wait() fills revents.
class Poller final {
 public:
  Poller();
  ~Poller();
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;
  // Returns the item's index.
  std::size_t add(const Socket& s);
  std::size_t add_fd(int fd);
  // Replaces the fd list after the socket items (fds change as workers come and go).
  void set_fds(const std::vector<int>& fds);
  // Blocks up to `timeout` (negative: forever). Returns the number of ready items.
  int wait(std::chrono::milliseconds timeout);
  [[nodiscard]] bool readable(std::size_t index) const;
  [[nodiscard]] std::size_t socket_count() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fanout::net
