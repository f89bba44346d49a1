// The rules of net/security and net/keys: which endpoints are encrypted, where --insecure is
// accepted, and how key files are written and refused. See docs/security.md.
#include "fanout/net/security.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include "fanout/net/keys.hpp"
#include "scratch_dir.hpp"

using namespace fanout;
using net::Security;

TEST_CASE("net.security.loopback_endpoints") {
  for (const char* ep : {"tcp://127.0.0.1:5555", "tcp://127.0.0.1:*", "tcp://127.1.2.3:1",
                         "tcp://localhost:80", "tcp://[::1]:5555", "tcp://eth0;127.0.0.1:9"}) {
    CAPTURE(ep);
    CHECK(net::is_loopback_endpoint(ep));
  }
  for (const char* ep : {"tcp://0.0.0.0:5555", "tcp://*:5555", "tcp://10.0.0.1:1",
                         "tcp://127.example.com:1", "tcp://1127.0.0.1:1", "tcp://127.0.0:1",
                         "tcp://[::]:1", "ipc:///tmp/x", "tcp://localhost.evil:1"}) {
    CAPTURE(ep);
    CHECK(!net::is_loopback_endpoint(ep));
  }
}

TEST_CASE("net.security.curve_on_every_tcp_endpoint_unless_insecure_on_loopback") {
  CHECK(net::wants_curve("tcp://0.0.0.0:1", Security{}).value());
  CHECK(net::wants_curve("tcp://127.0.0.1:1", Security{}).value());
  CHECK(!net::wants_curve("ipc:///tmp/fo-x/client", Security{}).value());
  CHECK(!net::wants_curve("inproc://x", Security{}).value());
  Security insecure;
  insecure.insecure = true;
  CHECK(!net::wants_curve("tcp://127.0.0.1:1", insecure).value());
  auto open = net::wants_curve("tcp://0.0.0.0:1", insecure);
  REQUIRE(!open.has_value());
  CHECK(open.error().code == ErrorCode::InvalidArgument);
  CHECK(open.error().message.find("tcp://0.0.0.0:1") != std::string::npos);
}

TEST_CASE("net.keys.folder_round_trip_and_modes") {
  test::ScratchDir dir;
  const std::string keys = dir.file("keys");
  REQUIRE(net::make_key_folder(keys).has_value());
  struct stat st {};
  REQUIRE(::stat(keys.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  auto pair = net::read_secret_key(net::secret_key_path(keys, "pool"));
  REQUIRE(pair.has_value());
  CHECK(pair->public_key.size() == 40);
  CHECK(pair->secret_key.size() == 40);
  CHECK(net::read_public_key(net::public_key_path(keys, "pool")).value() == pair->public_key);
  CHECK(net::read_public_key(net::authorized_pools_dir(keys) + "/pool.key").value() ==
        pair->public_key);
  // Never overwritten.
  CHECK(!net::make_key_folder(keys).has_value());
  SUBCASE("a secret key others can read is refused, naming the file and the fix") {
    const std::string file = net::secret_key_path(keys, "client");
    REQUIRE(::chmod(file.c_str(), 0644) == 0);
    auto r = net::read_secret_key(file);
    REQUIRE(!r.has_value());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message.find("chmod 600 " + file) != std::string::npos);
  }
  SUBCASE("bad names and files") {
    CHECK(!net::add_key(keys, "../x", "pool").has_value());
    CHECK(!net::add_key(keys, "interchange", "client").has_value());
    CHECK(!net::add_key(keys, "ok", "admin").has_value());
    const std::string junk = dir.file("junk.key");
    {
      std::FILE* f = std::fopen(junk.c_str(), "w");
      std::fputs("curve\n    public-key = \"short\"\n", f);
      std::fclose(f);
    }
    auto r = net::read_public_key(junk);
    REQUIRE(!r.has_value());
    CHECK(r.error().message.find(junk) != std::string::npos);
  }
}
