// RawDealer. See raw_peer.hpp.
#include "raw_peer.hpp"

#include <zmq.hpp>

namespace fanout::test {

struct RawDealer::Impl {
  zmq::context_t ctx{1};
  zmq::socket_t sock{ctx, zmq::socket_type::dealer};
};

RawDealer::RawDealer(const std::string& endpoint) : impl_(std::make_unique<Impl>()) {
  impl_->sock.set(zmq::sockopt::linger, 0);
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

}  // namespace fanout::test
