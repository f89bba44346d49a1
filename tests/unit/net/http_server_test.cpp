// net::HttpServer over real loopback sockets, with small limits: what passes a limit is answered
// by the server itself and closed, a newcomer displaces the oldest slow head, and a complete
// head is answered beside slow ones (src/fanout/net/http_server.hpp).
#include "fanout/net/http_server.hpp"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fanout/util/fd.hpp"

using fanout::UniqueFd;
using fanout::net::HttpHead;
using fanout::net::HttpLimits;
using fanout::net::HttpServer;

namespace {

UniqueFd connect_to(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
  timeval tv{.tv_sec = 20, .tv_usec = 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

void send_all(int fd, const std::string& s) {
  CHECK(::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()));
}

// Everything the server sends until it closes (or 20 s pass).
std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, n);
  return out;
}

// A server with `limits` on a free loopback port, serving on a thread of its own; its handler
// answers 200 with the target.
struct Served {
  explicit Served(HttpLimits limits)
      : server("127.0.0.1", 0, limits,
               [](const HttpHead& h) {
                 return fanout::net::http_response(200, "text/plain", "got " + h.target);
               }),
        thread([this] { server.serve(); }) {}
  ~Served() {
    server.stop();
    thread.join();
  }
  HttpServer server;
  std::thread thread;
};

HttpLimits small_limits() {
  HttpLimits l;
  l.max_head_bytes = 1024;
  l.max_header_lines = 8;
  l.head_timeout = std::chrono::milliseconds(500);
  l.max_per_peer = 4;
  l.max_connections = 8;
  return l;
}

}  // namespace

TEST_CASE("net.http_server.answers_a_complete_head_and_closes") {
  Served s(small_limits());
  auto c = connect_to(s.server.port());
  send_all(c.get(), "GET /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  const std::string r = read_all(c.get());
  CHECK(r.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(r.ends_with("got /x?y=1"));
}

TEST_CASE("net.http_server.a_head_past_a_limit_gets_431_and_is_closed") {
  Served s(small_limits());
  SUBCASE("bytes") {
    auto c = connect_to(s.server.port());
    send_all(c.get(), "GET / HTTP/1.1\r\nX: " + std::string(2000, 'a'));
    CHECK(read_all(c.get()).rfind("HTTP/1.1 431 ", 0) == 0);
  }
  SUBCASE("lines") {
    auto c = connect_to(s.server.port());
    std::string head = "GET / HTTP/1.1\r\n";
    for (int i = 0; i < 9; ++i) head += "X: 1\r\n";
    send_all(c.get(), head);
    CHECK(read_all(c.get()).rfind("HTTP/1.1 431 ", 0) == 0);
  }
}

TEST_CASE("net.http_server.a_slow_head_gets_408_at_the_timeout") {
  Served s(small_limits());
  auto c = connect_to(s.server.port());
  const auto t0 = std::chrono::steady_clock::now();
  send_all(c.get(), "GET / HTTP/1.1\r\n");
  CHECK(read_all(c.get()).rfind("HTTP/1.1 408 ", 0) == 0);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(450));
}

TEST_CASE("net.http_server.a_newcomer_displaces_the_oldest_slow_head_of_its_peer") {
  HttpLimits l = small_limits();
  l.head_timeout = std::chrono::seconds(30);
  Served s(l);
  std::vector<UniqueFd> slow;
  for (int i = 0; i < 4; ++i) {
    slow.push_back(connect_to(s.server.port()));
    send_all(slow.back().get(), "GET / HTTP/1.1\r\n");
  }
  // The server has seen all four before the fifth comes (each answered its first line).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto c = connect_to(s.server.port());
  send_all(c.get(), "GET /new HTTP/1.1\r\n\r\n");
  CHECK(read_all(c.get()).ends_with("got /new"));
  // The oldest was closed without an answer; the others still wait.
  CHECK(read_all(slow[0].get()).empty());
  char b = 0;
  CHECK(::recv(slow[1].get(), &b, 1, MSG_DONTWAIT) < 0);
}

TEST_CASE("net.http_server.a_complete_head_is_answered_beside_slow_ones") {
  HttpLimits l = small_limits();
  l.head_timeout = std::chrono::seconds(30);
  l.max_per_peer = 64;
  l.max_connections = 64;
  l.workers = 1;
  Served s(l);
  std::vector<UniqueFd> slow;
  for (int i = 0; i < 32; ++i) {
    slow.push_back(connect_to(s.server.port()));
    send_all(slow.back().get(), "GET / HTTP/1.1\r\nX: 1\r\n");
  }
  auto c = connect_to(s.server.port());
  send_all(c.get(), "GET /ok HTTP/1.1\r\n\r\n");
  CHECK(read_all(c.get()).ends_with("got /ok"));
}
