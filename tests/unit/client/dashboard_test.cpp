// fanout dashboard: --listen parsing, the token check and the token file
// (client/commands/dashboard.hpp).
#include "client/commands/dashboard.hpp"

#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

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

TEST_CASE("client.dashboard.token_file_must_be_private_and_hold_one_token") {
  char tmpl[] = "/tmp/fanout-token-test-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  auto make = [&](const std::string& name, const std::string& text, mode_t mode) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  };
  SUBCASE("accepted, without its trailing newline") {
    auto t = fanout::client::read_token_file(make("ok", "abc-123\n", 0600));
    REQUIRE(t);
    CHECK(*t == "abc-123");
    CHECK(fanout::client::read_token_file(make("ro", "xyz", 0400)));
  }
  SUBCASE("refused, naming the option and the file") {
    for (const auto& [name, text, mode] :
         {std::tuple{"group", "abc\n", 0640}, std::tuple{"other", "abc\n", 0604},
          std::tuple{"empty", "\n", 0600}, std::tuple{"spaces", "a b\n", 0600},
          std::tuple{"lines", "abc\ndef\n", 0600}}) {
      CAPTURE(name);
      const std::string path = make(name, text, static_cast<mode_t>(mode));
      auto t = fanout::client::read_token_file(path);
      REQUIRE_FALSE(t);
      CHECK(t.error().code == fanout::ErrorCode::InvalidArgument);
      CHECK(t.error().message.find("--token-file " + path) != std::string::npos);
    }
    const std::string link = dir + "/link";
    REQUIRE(::symlink(make("target", "abc\n", 0600).c_str(), link.c_str()) == 0);
    auto t = fanout::client::read_token_file(link);
    REQUIRE_FALSE(t);
    CHECK(t.error().message.find("symbolic link") != std::string::npos);
    CHECK(fanout::client::read_token_file(dir + "/missing").error().code ==
          fanout::ErrorCode::NotFound);
  }
  std::filesystem::remove_all(dir);
}
