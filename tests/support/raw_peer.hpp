// A raw ZeroMQ DEALER for tests that play a hostile or hand-made peer: it sends arbitrary bytes,
// bypassing net:: and protocol:: on purpose.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace fanout::test {

class RawDealer final {
 public:
  explicit RawDealer(const std::string& endpoint);
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

}  // namespace fanout::test
