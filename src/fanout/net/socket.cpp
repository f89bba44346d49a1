// ZeroMQ wrappers.
#include "fanout/net/socket.hpp"

#include <zmq.hpp>

#include "fanout/protocol/messages.hpp"

namespace fanout::net {

namespace {
// Credit-based flow control above this layer bounds what is in flight per peer (pool capacity,
// client window), so these marks are only reached when a peer stops reading; sends then report
// WouldBlock rather than silently dropping (ROUTER_MANDATORY).
constexpr int kHighWaterMark = 100000;
}  // namespace

struct Context::Impl {
  zmq::context_t ctx{1};
};

Context::Context() : impl_(std::make_unique<Impl>()) {}
Context::~Context() = default;
void* Context::raw() const noexcept { return &impl_->ctx; }

struct Socket::Impl {
  zmq::socket_t sock;
  bool read_user_id = false;
};

Socket::Socket(Context& ctx, Kind kind, const std::string& identity) : kind_(kind) {
  try {
    auto& zctx = *static_cast<zmq::context_t*>(ctx.raw());
    impl_ = std::make_unique<Impl>(Impl{zmq::socket_t(
        zctx, kind == Kind::Router ? zmq::socket_type::router : zmq::socket_type::dealer)});
    auto& s = impl_->sock;
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::sndhwm, kHighWaterMark);
    s.set(zmq::sockopt::rcvhwm, kHighWaterMark);
    // A larger frame would be refused after decoding anyway: ZeroMQ drops the connection as soon
    // as a message's header announces more, before its bytes are read into memory.
    s.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(proto::kMaxFrameBytes));
    if (kind == Kind::Router) {
      s.set(zmq::sockopt::router_mandatory, 1);
      // No ROUTER_HANDOVER: with it, a second connection naming a connected peer's routing id
      // takes that id over, receives what is sent to the peer and leaves the peer's connection
      // open but deaf (docs/security.md). Without it the second connection is ignored; a peer
      // whose old connection is dead frees its id when ZeroMQ's heartbeat closes that connection
      // (set_peer_liveness), and a pool whose Register goes unanswered reconnects.
      s.set(zmq::sockopt::router_handover, 0);
    } else if (!identity.empty()) {
      s.set(zmq::sockopt::routing_id, identity);
    }
  } catch (const zmq::error_t& e) {
    throw Failure(ErrorCode::Io, std::string("zmq socket: ") + e.what());
  }
}

Socket::~Socket() = default;
Socket::Socket(Socket&&) noexcept = default;
Socket& Socket::operator=(Socket&&) noexcept = default;

std::string Socket::bind(const std::string& endpoint) {
  try {
    impl_->sock.bind(endpoint);
    return impl_->sock.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    throw Failure(ErrorCode::Io, "bind " + endpoint + ": " + e.what());
  }
}

void Socket::connect(const std::string& endpoint) {
  try {
    impl_->sock.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw Failure(ErrorCode::InvalidArgument, "connect " + endpoint + ": " + e.what());
  }
}

void Socket::disconnect(const std::string& endpoint) {
  try {
    impl_->sock.disconnect(endpoint);
  } catch (const zmq::error_t&) {
    // Not connected: nothing to undo.
  }
}

void Socket::set_handshake_timeout(std::chrono::milliseconds timeout) {
  impl_->sock.set(zmq::sockopt::handshake_ivl, static_cast<int>(timeout.count()));
}

void Socket::set_peer_liveness(std::chrono::milliseconds interval,
                               std::chrono::milliseconds timeout) {
  impl_->sock.set(zmq::sockopt::heartbeat_ivl, static_cast<int>(interval.count()));
  impl_->sock.set(zmq::sockopt::heartbeat_timeout, static_cast<int>(timeout.count()));
}

void Socket::set_linger(std::chrono::milliseconds linger) {
  impl_->sock.set(zmq::sockopt::linger, static_cast<int>(linger.count()));
}

SendResult Socket::send(std::string_view frame, bool dont_wait) {
  try {
    auto r = impl_->sock.send(zmq::const_buffer(frame.data(), frame.size()),
                              dont_wait ? zmq::send_flags::dontwait : zmq::send_flags::none);
    return r ? SendResult::Sent : SendResult::WouldBlock;
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return SendResult::Unreachable;
    throw Failure(ErrorCode::Io, std::string("zmq send: ") + e.what());
  }
}

SendResult Socket::send_to(std::string_view peer, std::string_view frame, bool dont_wait) {
  auto flags = dont_wait ? zmq::send_flags::dontwait : zmq::send_flags::none;
  try {
    auto r = impl_->sock.send(zmq::const_buffer(peer.data(), peer.size()),
                              flags | zmq::send_flags::sndmore);
    if (!r) return SendResult::WouldBlock;
    // Once the first part is queued, ZeroMQ guarantees the rest of the message is accepted.
    impl_->sock.send(zmq::const_buffer(frame.data(), frame.size()), flags);
    return SendResult::Sent;
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return SendResult::Unreachable;
    throw Failure(ErrorCode::Io, std::string("zmq send: ") + e.what());
  }
}

bool Socket::recv(Message& out) {
  out.peer.clear();
  out.frame.clear();
  out.well_formed = true;
  if (!impl_->read_user_id) out.user_id.clear();
  zmq::message_t part;
  auto r = impl_->sock.recv(part, zmq::recv_flags::dontwait);
  if (!r) return false;
  // ROUTER: [peer][frame]; DEALER: [frame]. Anything else is drained and marked malformed.
  if (kind_ == Kind::Router) {
    out.peer.assign(static_cast<const char*>(part.data()), part.size());
    if (!part.more()) {
      out.well_formed = false;
      return true;
    }
    (void)impl_->sock.recv(part, zmq::recv_flags::none);  // later parts arrive atomically
  }
  out.frame.assign(static_cast<const char*>(part.data()), part.size());
  if (impl_->read_user_id) {
    // The metadata of the connection the message came on, set by the ZAP handler.
    const char* uid = zmq_msg_gets(part.handle(), "User-Id");
    if (uid != nullptr) {
      out.user_id.assign(uid);
    } else {
      out.user_id.clear();
    }
  }
  while (part.more()) {
    (void)impl_->sock.recv(part, zmq::recv_flags::none);
    out.well_formed = false;
  }
  return true;
}

void Socket::set_read_user_id(bool on) noexcept { impl_->read_user_id = on; }

void* Socket::raw() const noexcept { return impl_->sock.handle(); }

struct Poller::Impl {
  std::vector<zmq::pollitem_t> items;
  std::size_t sockets = 0;
};

Poller::Poller() : impl_(std::make_unique<Impl>()) {}
Poller::~Poller() = default;

std::size_t Poller::add(const Socket& s) {
  FANOUT_ASSERT(impl_->sockets == impl_->items.size());  // sockets are registered before fds
  impl_->items.push_back(zmq::pollitem_t{s.raw(), 0, ZMQ_POLLIN, 0});
  return impl_->sockets++;
}

std::size_t Poller::add_fd(int fd) {
  impl_->items.push_back(zmq::pollitem_t{nullptr, fd, ZMQ_POLLIN, 0});
  return impl_->items.size() - 1;
}

void Poller::set_fds(const std::vector<int>& fds) {
  impl_->items.resize(impl_->sockets);
  for (int fd : fds) impl_->items.push_back(zmq::pollitem_t{nullptr, fd, ZMQ_POLLIN, 0});
}

int Poller::wait(std::chrono::milliseconds timeout) {
  for (auto& it : impl_->items) it.revents = 0;
  try {
    return zmq::poll(impl_->items.data(), impl_->items.size(), timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return 0;
    throw Failure(ErrorCode::Io, std::string("zmq poll: ") + e.what());
  }
}

bool Poller::readable(std::size_t index) const {
  return index < impl_->items.size() && (impl_->items[index].revents & (ZMQ_POLLIN | ZMQ_POLLERR));
}

std::size_t Poller::socket_count() const noexcept { return impl_->sockets; }

}  // namespace fanout::net
