// A raw ZeroMQ DEALER for tests that play a hostile or hand-made peer: it sends arbitrary bytes,
// bypassing net:: and protocol:: on purpose.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace fanout::test {

class RawDealer final {
 public:
  // On a tcp:// endpoint the peer is a Curve client with key `key_name` of `keys_dir` (default:
  // test_keys_dir(), whose `peer` key both ports admit); an empty `key_name` makes it a
  // plaintext peer. A non-empty `routing_id` is the DEALER's routing id (as a pool's --name).
  explicit RawDealer(const std::string& endpoint, const std::string& key_name = "peer",
                     const std::string& keys_dir = {}, const std::string& routing_id = {});
  ~RawDealer();
  RawDealer(const RawDealer&) = delete;
  RawDealer& operator=(const RawDealer&) = delete;
  void send(const std::string& frame);
  void send_multipart(const std::vector<std::string>& parts);
  // One frame received within `ms`, or "".
  std::string recv_within(int ms);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// `count` DEALER connections, alternately to each of `endpoints`, each a Curve client with a
// fresh key pair that no folder authorises (a peer making a new key per connection). They keep
// retrying until destroyed.
class FreshKeyPeers final {
 public:
  FreshKeyPeers(const std::vector<std::string>& endpoints, unsigned count);
  ~FreshKeyPeers();
  FreshKeyPeers(const FreshKeyPeers&) = delete;
  FreshKeyPeers& operator=(const FreshKeyPeers&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fanout::test
