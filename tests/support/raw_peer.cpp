// RawDealer. See raw_peer.hpp.
#include "raw_peer.hpp"

#include <stdexcept>
#include <zmq.hpp>

#include "fanout/net/keys.hpp"
#include "harness.hpp"

namespace fanout::test {

struct RawDealer::Impl {
  zmq::context_t ctx{1};
  zmq::socket_t sock{ctx, zmq::socket_type::dealer};
};

RawDealer::RawDealer(const std::string& endpoint, const std::string& key_name,
                     const std::string& keys_dir, const std::string& routing_id)
    : impl_(std::make_unique<Impl>()) {
  impl_->sock.set(zmq::sockopt::linger, 0);
  if (!routing_id.empty()) impl_->sock.set(zmq::sockopt::routing_id, routing_id);
  if (endpoint.rfind("tcp://", 0) == 0 && !key_name.empty()) {
    namespace net = fanout::net;
    const std::string dir = keys_dir.empty() ? test_keys_dir() : keys_dir;
    auto server = net::read_public_key(net::public_key_path(dir, "interchange"));
    auto own = net::read_secret_key(net::secret_key_path(dir, key_name));
    if (!server) throw std::runtime_error(server.error().message);
    if (!own) throw std::runtime_error(own.error().message);
    impl_->sock.set(zmq::sockopt::curve_serverkey, *server);
    impl_->sock.set(zmq::sockopt::curve_publickey, own->public_key);
    impl_->sock.set(zmq::sockopt::curve_secretkey, own->secret_key);
  }
  impl_->sock.connect(endpoint);
}

RawDealer::~RawDealer() = default;

void RawDealer::send(const std::string& frame) {
  (void)impl_->sock.send(zmq::buffer(frame), zmq::send_flags::none);
}

void RawDealer::send_multipart(const std::vector<std::string>& parts) {
  for (std::size_t i = 0; i < parts.size(); ++i) {
    (void)impl_->sock.send(zmq::buffer(parts[i]),
                           i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

std::string RawDealer::recv_within(int ms) {
  zmq::pollitem_t item{impl_->sock.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(ms)) <= 0) return {};
  zmq::message_t m;
  if (!impl_->sock.recv(m, zmq::recv_flags::dontwait)) return {};
  return m.to_string();
}

struct FreshKeyPeers::Impl {
  zmq::context_t ctx{1};
  std::vector<zmq::socket_t> socks;
};

FreshKeyPeers::FreshKeyPeers(const std::vector<std::string>& endpoints, unsigned count)
    : impl_(std::make_unique<Impl>()) {
  namespace net = fanout::net;
  auto server = net::read_public_key(net::public_key_path(test_keys_dir(), "interchange"));
  if (!server) throw std::runtime_error(server.error().message);
  for (unsigned i = 0; i < count; ++i) {
    char pub[41], sec[41];
    if (zmq_curve_keypair(pub, sec) != 0) throw std::runtime_error("zmq_curve_keypair failed");
    zmq::socket_t s(impl_->ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::curve_serverkey, *server);
    s.set(zmq::sockopt::curve_publickey, std::string(pub));
    s.set(zmq::sockopt::curve_secretkey, std::string(sec));
    s.connect(endpoints[i % endpoints.size()]);
    impl_->socks.push_back(std::move(s));
  }
}

FreshKeyPeers::~FreshKeyPeers() = default;

}  // namespace fanout::test
