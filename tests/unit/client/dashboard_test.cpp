// fanout dashboard: --listen parsing and the token check (client/commands/dashboard.hpp).
#include "client/commands/dashboard.hpp"

#include <doctest/doctest.h>

#include <string>

using fanout::client::parse_listen;
using fanout::client::token_matches;

TEST_CASE("client.dashboard.listen_accepts_host_port") {
  struct Case {
    const char* in;
    const char* host;
    int port;
    bool loopback;
  };
  for (const Case& c :
       {Case{"127.0.0.1:8470", "127.0.0.1", 8470, true}, Case{"127.1.2.3:0", "127.1.2.3", 0, true},
        Case{"localhost:80", "localhost", 80, true}, Case{"[::1]:8470", "::1", 8470, true},
        Case{"0.0.0.0:8470", "0.0.0.0", 8470, false},
        Case{"10.0.0.5:65535", "10.0.0.5", 65535, false}, Case{"[::]:8470", "::", 8470, false}}) {
    CAPTURE(c.in);
    auto a = parse_listen(c.in);
    REQUIRE(a);
    CHECK(a->host == c.host);
    CHECK(a->port == c.port);
    CHECK(a->loopback == c.loopback);
  }
}

TEST_CASE("client.dashboard.listen_rejects_near_misses") {
  for (const char* in : {"", "8470", ":8470", "127.0.0.1", "127.0.0.1:", "127.0.0.1:http",
                         "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:123456"}) {
    CAPTURE(in);
    auto a = parse_listen(in);
    REQUIRE_FALSE(a);
    CHECK(a.error().code == fanout::ErrorCode::InvalidArgument);
    CHECK(a.error().message.find("--listen") != std::string::npos);
  }
}

TEST_CASE("client.dashboard.token_must_match_exactly") {
  CHECK(token_matches("s3cret", "s3cret"));
  CHECK_FALSE(token_matches("s3cre", "s3cret"));
  CHECK_FALSE(token_matches("s3cret!", "s3cret"));
  CHECK_FALSE(token_matches("S3cret", "s3cret"));
  CHECK_FALSE(token_matches("", "s3cret"));
  CHECK_FALSE(token_matches("", ""));  // no token configured: nothing matches (not used then)
}
