// The guarded HTTP server. See http_server.hpp.
#include "fanout/net/http_server.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "fanout/util/error.hpp"
#include "fanout/util/fd.hpp"

namespace fanout::net {

namespace {

using Clock = std::chrono::steady_clock;

// Numeric address and port of a socket address.
std::pair<std::string, int> numeric(const sockaddr_storage& sa) {
  char host[NI_MAXHOST] = "";
  char serv[NI_MAXSERV] = "";
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&sa), sizeof(sa), host, sizeof(host), serv,
                  sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return {"?", 0};
  }
  return {host, std::atoi(serv)};
}

UniqueFd listen_on(const std::string& host, int port) {
  const std::string where = fmt::format("{}:{}", host, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    throw Failure(ErrorCode::Io, fmt::format("{}: cannot resolve: {}", where, gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(res, freeaddrinfo);
  std::string why = "no address";
  for (const addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      why = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd.get(), 128) == 0) return fd;
    why = std::strerror(errno);
  }
  throw Failure(ErrorCode::Io, fmt::format("{}: cannot listen: {}", where, why));
}

}  // namespace

struct HttpServer::Impl {
  enum class Phase { Reading, Queued, Writing };
  struct Conn {
    UniqueFd fd{};
    std::string peer{}, local{};
    int peer_port = 0, local_port = 0;
    Phase phase = Phase::Reading;
    Clock::time_point deadline{};  // the head's while Reading, the answer's while Writing
    std::string in{};
    HeadScanner scanner{};
    std::string out{};
    std::size_t sent = 0;
  };

  HttpLimits limits;
  Handler handler;
  UniqueFd listener;
  UniqueFd wake;  // an eventfd: stop() and finished answers wake the reading thread
  int port = 0;
  std::atomic<bool> stopping{false};

  // Reading thread only. Ids grow with each accept, so the map's order is the age order.
  std::map<std::uint64_t, Conn> conns;
  std::map<std::string, std::size_t> per_peer;
  std::uint64_t next_id = 1;
  Clock::time_point accept_paused_until{};

  // Shared with the workers, under mu.
  std::mutex mu;
  std::condition_variable work_cv;
  std::deque<std::pair<std::uint64_t, HttpHead>> work;
  std::vector<std::pair<std::uint64_t, std::string>> done;
  bool workers_stop = false;
  std::vector<std::thread> workers;

  void poke() noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake.get(), &one, sizeof(one));
  }

  void work_loop() {
    for (;;) {
      std::pair<std::uint64_t, HttpHead> job;
      {
        std::unique_lock lk(mu);
        work_cv.wait(lk, [&] { return workers_stop || !work.empty(); });
        if (workers_stop) return;
        job = std::move(work.front());
        work.pop_front();
      }
      std::string answer;
      try {
        answer = handler(job.second);
      } catch (const std::exception& e) {
        answer = http_response(500, "text/plain", fmt::format("500: {}\n", e.what()));
      }
      {
        std::lock_guard lk(mu);
        done.emplace_back(job.first, std::move(answer));
      }
      poke();
    }
  }

  void close_conn(std::map<std::uint64_t, Conn>::iterator it) {
    if (auto p = per_peer.find(it->second.peer); p != per_peer.end() && --p->second == 0) {
      per_peer.erase(p);
    }
    conns.erase(it);
  }

  // Starts sending `bytes` on `c`; the answer to a head past a limit as much as a handler's.
  void answer(Conn& c, std::string bytes, Clock::time_point now) {
    c.phase = Phase::Writing;
    c.out = std::move(bytes);
    c.sent = 0;
    c.in.clear();
    c.in.shrink_to_fit();
    c.deadline = now + limits.write_timeout;
  }

  void refuse(Conn& c, int status, std::string_view why, Clock::time_point now) {
    answer(c, http_response(status, "text/plain", fmt::format("{}: {}\n", status, why)), now);
  }

  // Closes the oldest connection still sending its head, of `peer` or of anyone when `peer` is
  // null: the slowest peers are the ones a newcomer displaces. False when there is none.
  bool evict_oldest_reading(const std::string* peer) {
    for (auto it = conns.begin(); it != conns.end(); ++it) {
      if (it->second.phase == Phase::Reading && (peer == nullptr || it->second.peer == *peer)) {
        close_conn(it);
        return true;
      }
    }
    return false;
  }

  void admit(UniqueFd fd, const sockaddr_storage& from, Clock::time_point now) {
    auto [peer, peer_port] = numeric(from);
    // A full table makes room by its slowest head; if every connection is past its head (being
    // answered, each for a bounded time), the newcomer is the one refused.
    const auto known = per_peer.find(peer);  // no entry is made for a peer refused here
    const std::size_t held = known == per_peer.end() ? 0 : known->second;
    if (held >= limits.max_per_peer && !evict_oldest_reading(&peer)) return;
    if (conns.size() >= limits.max_connections && !evict_oldest_reading(nullptr)) return;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len);
    auto [local_addr, local_port] = numeric(local);
    Conn c;
    c.fd = std::move(fd);
    c.peer = peer;
    c.peer_port = peer_port;
    c.local = std::move(local_addr);
    c.local_port = local_port;
    c.deadline = now + limits.head_timeout;
    ++per_peer[peer];
    conns.emplace(next_id++, std::move(c));
  }

  void accept_all(Clock::time_point now) {
    for (int i = 0; i < 64; ++i) {
      sockaddr_storage from{};
      socklen_t len = sizeof(from);
      UniqueFd fd(accept4(listener.get(), reinterpret_cast<sockaddr*>(&from), &len,
                          SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) {
        // Out of descriptors (or kernel memory): the listener stays readable, so it is left out
        // of the poll for a moment rather than spun on.
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
          accept_paused_until = now + std::chrono::milliseconds(100);
        }
        return;
      }
      admit(std::move(fd), from, now);
    }
  }

  // Reads what arrived; hands a complete head to the workers. False: close the connection.
  bool read_head(std::uint64_t id, Conn& c, Clock::time_point now) {
    char buf[4096];
    const std::size_t room =
        limits.max_head_bytes + 1 - std::min(c.in.size(), limits.max_head_bytes);
    const ssize_t n = ::recv(c.fd.get(), buf, std::min(sizeof(buf), room), 0);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.in.append(buf, static_cast<std::size_t>(n));
    switch (c.scanner.feed(c.in, limits)) {
      case HeadState::Incomplete:
        return true;
      case HeadState::TooLarge:
        refuse(c, 431, fmt::format("the request head is over {} bytes", limits.max_head_bytes),
               now);
        return true;
      case HeadState::TooManyLines:
        refuse(c, 431, fmt::format("over {} header lines", limits.max_header_lines), now);
        return true;
      case HeadState::Complete:
        break;
    }
    HttpHead head;
    if (!parse_head(std::string_view(c.in).substr(0, c.scanner.end()), head)) {
      refuse(c, 400, "expected a request line METHOD TARGET HTTP/1.x", now);
      return true;
    }
    head.peer = c.peer;
    head.peer_port = c.peer_port;
    head.local = c.local;
    head.local_port = c.local_port;
    {
      std::lock_guard lk(mu);
      if (work.size() >= limits.max_queued) {
        refuse(c, 503, "busy: too many requests waiting, try again", now);
        return true;
      }
      work.emplace_back(id, std::move(head));
    }
    work_cv.notify_one();
    c.phase = Phase::Queued;
    c.in.clear();
    c.in.shrink_to_fit();
    return true;
  }

  // Sends what the socket takes. False: the answer is out (or cannot go); close.
  bool write_answer(Conn& c) {
    while (c.sent < c.out.size()) {
      const ssize_t n =
          ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      c.sent += static_cast<std::size_t>(n);
    }
    // Half-close first, and drop what the peer sent beyond its head (up to 64 KiB: a flooding
    // peer cannot keep this thread here), so that closing does not reset the connection before
    // the peer read the answer.
    ::shutdown(c.fd.get(), SHUT_WR);
    char sink[4096];
    for (int i = 0; i < 16 && ::recv(c.fd.get(), sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
    }
    return false;
  }

  void take_answers(Clock::time_point now) {
    std::uint64_t count = 0;
    [[maybe_unused]] auto n = ::read(wake.get(), &count, sizeof(count));
    std::vector<std::pair<std::uint64_t, std::string>> ready;
    {
      std::lock_guard lk(mu);
      ready.swap(done);
    }
    for (auto& [id, bytes] : ready) {
      auto it = conns.find(id);
      if (it == conns.end()) continue;
      answer(it->second, std::move(bytes), now);
      if (!write_answer(it->second)) close_conn(it);
    }
  }

  // The next deadline of any connection, as a poll timeout in milliseconds (-1: none).
  int poll_timeout(Clock::time_point now) const {
    auto next = now < accept_paused_until ? accept_paused_until : Clock::time_point::max();
    for (const auto& [id, c] : conns) {
      if (c.phase != Phase::Queued) next = std::min(next, c.deadline);
    }
    if (next == Clock::time_point::max()) return -1;
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
    return static_cast<int>(std::clamp<std::int64_t>(ms, 0, 60'000));
  }

  void expire(Clock::time_point now) {
    for (auto it = conns.begin(); it != conns.end();) {
      auto cur = it++;
      Conn& c = cur->second;
      if (c.phase == Phase::Queued || now < c.deadline) continue;
      if (c.phase == Phase::Reading) {
        refuse(c, 408, fmt::format("the request head took over {} ms", limits.head_timeout.count()),
               now);
        // One try to send it: a peer that does not read it is not waited for.
        [[maybe_unused]] const bool more = write_answer(c);
      }
      close_conn(cur);
    }
  }

  void serve() {
    std::vector<pollfd> fds;
    std::vector<std::uint64_t> ids;
    while (!stopping.load()) {
      const auto now = Clock::now();
      // A negative descriptor is skipped by poll: the listener while accepting is paused.
      const int listen_fd = now < accept_paused_until ? -1 : listener.get();
      fds.assign({{wake.get(), POLLIN, 0}, {listen_fd, POLLIN, 0}});
      ids.assign(2, 0);
      for (const auto& [id, c] : conns) {
        if (c.phase == Phase::Queued) continue;
        fds.push_back(
            {c.fd.get(), static_cast<short>(c.phase == Phase::Reading ? POLLIN : POLLOUT), 0});
        ids.push_back(id);
      }
      if (::poll(fds.data(), fds.size(), poll_timeout(now)) < 0 && errno != EINTR) break;
      const auto after = Clock::now();
      if (fds[0].revents != 0) take_answers(after);
      for (std::size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        auto it = conns.find(ids[i]);
        if (it == conns.end()) continue;
        Conn& c = it->second;
        const bool keep = c.phase == Phase::Reading ? read_head(it->first, c, after)
                                                    : c.phase != Phase::Writing || write_answer(c);
        // A head past a limit is answered at once, on the same turn.
        if (!keep || (c.phase == Phase::Writing && c.sent == 0 && !write_answer(c))) {
          close_conn(it);
        }
      }
      if (fds[1].revents != 0) accept_all(after);
      expire(after);
    }
  }
};

HttpServer::HttpServer(const std::string& host, int port, HttpLimits limits, Handler handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->limits = limits;
  impl_->handler = std::move(handler);
  impl_->listener = listen_on(host, port);
  impl_->wake = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!impl_->wake.valid()) {
    throw Failure(ErrorCode::Io,
                  fmt::format("{}:{}: eventfd: {}", host, port, std::strerror(errno)));
  }
  sockaddr_storage sa{};
  socklen_t len = sizeof(sa);
  getsockname(impl_->listener.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  impl_->port = numeric(sa).second;
  for (std::size_t i = 0; i < std::max<std::size_t>(1, limits.workers); ++i) {
    impl_->workers.emplace_back([this] { impl_->work_loop(); });
  }
}

HttpServer::~HttpServer() {
  stop();
  {
    std::lock_guard lk(impl_->mu);
    impl_->workers_stop = true;
  }
  impl_->work_cv.notify_all();
  for (auto& t : impl_->workers) t.join();
}

int HttpServer::port() const noexcept { return impl_->port; }

void HttpServer::serve() {
  impl_->serve();
  impl_->conns.clear();
  impl_->per_peer.clear();
}

void HttpServer::stop() noexcept {
  impl_->stopping = true;
  impl_->poke();
}

}  // namespace fanout::net
