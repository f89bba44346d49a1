// net::HttpServer's pure part: where a head ends, its limits, its request line and Host, and
// which Host names are the loopback (src/fanout/net/http_head.hpp).
#include "fanout/net/http_head.hpp"

#include <doctest/doctest.h>

#include <string>

using fanout::net::HeadScanner;
using fanout::net::HeadState;
using fanout::net::HttpHead;
using fanout::net::HttpLimits;

TEST_CASE("net.http_head.a_head_ends_at_its_blank_line") {
  HttpLimits limits;
  HeadScanner s;
  std::string in = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  CHECK(s.feed(in, limits) == HeadState::Incomplete);
  in += "\r";
  CHECK(s.feed(in, limits) == HeadState::Incomplete);
  in += "\nextra";
  REQUIRE(s.feed(in, limits) == HeadState::Complete);
  CHECK(s.end() == in.size() - 5);
}

TEST_CASE("net.http_head.a_head_byte_by_byte_is_scanned_once") {
  HttpLimits limits;
  HeadScanner s;
  const std::string head = "GET /x HTTP/1.1\r\nA: 1\r\nB: 2\r\n\r\n";
  std::string in;
  for (std::size_t i = 0; i + 1 < head.size(); ++i) {
    in += head[i];
    CHECK(s.feed(in, limits) == HeadState::Incomplete);
  }
  in += head.back();
  CHECK(s.feed(in, limits) == HeadState::Complete);
  CHECK(s.end() == head.size());
}

TEST_CASE("net.http_head.limits_stop_a_head_before_it_ends") {
  HttpLimits limits;
  limits.max_head_bytes = 100;
  limits.max_header_lines = 3;
  SUBCASE("too many bytes without a blank line") {
    HeadScanner s;
    const std::string in = "GET / HTTP/1.1\r\nX: " + std::string(100, 'a');
    CHECK(s.feed(in, limits) == HeadState::TooLarge);
  }
  SUBCASE("a blank line past the byte limit") {
    HeadScanner s;
    const std::string in =
        "GET / HTTP/1.1\r\nX: " + std::string(90, 'a') + "\r\n\r\n" + std::string(30, 'b');
    CHECK(s.feed(in, limits) == HeadState::TooLarge);
  }
  SUBCASE("too many header lines") {
    HeadScanner s;
    CHECK(s.feed("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n", limits) == HeadState::Incomplete);
    CHECK(s.feed("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n", limits) ==
          HeadState::TooManyLines);
  }
  SUBCASE("as many header lines as allowed") {
    HeadScanner s;
    CHECK(s.feed("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits) == HeadState::Complete);
  }
}

TEST_CASE("net.http_head.parse_reads_the_request_line_and_host") {
  HttpHead h;
  REQUIRE(parse_head("GET /jobs/1?x=2 HTTP/1.1\r\nAccept: */*\r\nhOsT:  localhost:80 \r\n\r\n", h));
  CHECK(h.method == "GET");
  CHECK(h.target == "/jobs/1?x=2");
  CHECK(h.host == "localhost:80");
  REQUIRE(parse_head("HEAD / HTTP/1.0\r\n\r\n", h));
  CHECK(h.host.empty());
  for (const char* bad : {"GET /\r\n\r\n", " / HTTP/1.1\r\n\r\n", "GET  HTTP/1.1\r\n\r\n",
                          "GET / SMTP\r\n\r\n", "GET / HTTP/1.1 x\r\n\r\n", "\r\n\r\n"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_head(bad, h));
  }
}

TEST_CASE("net.http_head.loopback_host_names") {
  for (const char* ok : {"127.0.0.1", "127.0.0.1:8470", "127.1.2.3:1", "localhost", "LOCALHOST:80",
                         "[::1]", "[::1]:8470"}) {
    CAPTURE(ok);
    CHECK(fanout::net::is_loopback_host(ok));
  }
  for (const char* no : {"", "rebind.example", "rebind.example:8470", "127.0.0.1.rebind.example",
                         "localhost.rebind.example:80", "10.0.0.1:80", "128.0.0.1", "127.0.0.256",
                         "127.0.0", "127.0.0.1:", "127.0.0.1:x", "[::1", "[::2]:80", "[::1]x",
                         "localhost:80:80", "0.0.0.0:8470", "[::]:8470"}) {
    CAPTURE(no);
    CHECK_FALSE(fanout::net::is_loopback_host(no));
  }
}

TEST_CASE("net.http_head.response_closes_and_counts_its_body") {
  const std::string r = fanout::net::http_response(431, "text/plain", "too big\n");
  CHECK(r.rfind("HTTP/1.1 431 Request Header Fields Too Large\r\n", 0) == 0);
  CHECK(r.find("Content-Length: 8\r\n") != std::string::npos);
  CHECK(r.find("Connection: close\r\n") != std::string::npos);
  CHECK(r.ends_with("\r\n\r\ntoo big\n"));
  CHECK(fanout::net::http_response(200, "text/plain", "x", true).ends_with("\r\n\r\n"));
}
