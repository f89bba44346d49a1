// UniqueFd: an owned file descriptor, closed on destruction.
#pragma once

#include <sys/types.h>

#include <span>
#include <string_view>
#include <utility>

#include "fanout/util/expected.hpp"

namespace fanout {

class UniqueFd final {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

// A pipe with close-on-exec ends: read end, write end.
struct Pipe {
  UniqueFd read;
  UniqueFd write;
};
[[nodiscard]] Expected<Pipe> make_pipe();

// Writes all of `data`, retrying on EINTR and short writes. Blocking.
[[nodiscard]] Expected<void> write_all(int fd, std::string_view data);

// One sendmsg() of `data` on the unix socket `sock` with the descriptors `fds` attached
// (SCM_RIGHTS), with MSG_NOSIGNAL and `flags`, retried on EINTR. Returns the bytes sent (a stream
// socket may take fewer: the rest goes by plain writes, without the descriptors), or -1 with
// errno set.
[[nodiscard]] ssize_t send_with_fds(int sock, std::string_view data, std::span<const int> fds,
                                    int flags = 0);

// Makes `fd` non-blocking.
void set_nonblocking(int fd);

}  // namespace fanout
