// File descriptor helpers.
#include "fanout/util/fd.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace fanout {

void UniqueFd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Expected<Pipe> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return make_error(ErrorCode::Io, std::string("pipe2: ") + std::strerror(errno));
  }
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

ssize_t send_with_fds(int sock, std::string_view data, std::span<const int> fds, int flags) {
  iovec iov{const_cast<char*>(data.data()), data.size()};
  const std::size_t space = CMSG_SPACE(sizeof(int) * fds.size());
  std::vector<cmsghdr> ctrl((space + sizeof(cmsghdr) - 1) / sizeof(cmsghdr) + 1);
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = ctrl.data();
  mh.msg_controllen = space;
  cmsghdr* c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  ssize_t sent = ::sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
  while (sent < 0 && errno == EINTR) sent = ::sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
  return sent;
}

Expected<void> write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(ErrorCode::Io, std::string("write: ") + std::strerror(errno));
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

}  // namespace fanout
