// Which address the pools connect to when --interchange-address is not given
// (client/launch/pool_address.hpp): loopback never, down interfaces skipped, the first usable IPv4
// address in getifaddrs(3) order, and a clear error naming why there is none.
#include "client/launch/pool_address.hpp"

#include <doctest/doctest.h>
#include <net/if.h>
#include <sys/socket.h>

#include <string>
#include <vector>

using fanout::client::choose_pool_address;
using fanout::client::InterfaceAddress;

namespace {

constexpr unsigned kUp = IFF_UP | IFF_RUNNING;
constexpr unsigned kLoopback = IFF_UP | IFF_RUNNING | IFF_LOOPBACK;

InterfaceAddress v4(const std::string& name, unsigned flags, const std::string& addr) {
  return {.name = name, .family = AF_INET, .flags = flags, .address = addr};
}
InterfaceAddress v6(const std::string& name, unsigned flags, const std::string& addr) {
  return {.name = name, .family = AF_INET6, .flags = flags, .address = addr};
}
// getifaddrs lists an AF_PACKET entry for each interface too, without an address we use.
InterfaceAddress link(const std::string& name, unsigned flags) {
  return {.name = name, .family = AF_PACKET, .flags = flags};
}

bool has(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

}  // namespace

TEST_CASE("loopback only: an error asking for --interchange-address") {
  auto r = choose_pool_address(
      {link("lo", kLoopback), v4("lo", kLoopback, "127.0.0.1"), v6("lo", kLoopback, "::1")});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == fanout::ErrorCode::NotFound);
  CHECK(has(r.error().message, "no network interface but loopback is up"));
  CHECK(has(r.error().message, "--interchange-address (fanout.interchange_address)"));
  CHECK_FALSE(has(r.error().message, "down:"));
}

TEST_CASE("no interfaces at all: the same error") {
  auto r = choose_pool_address({});
  REQUIRE_FALSE(r);
  CHECK(has(r.error().message, "no network interface but loopback is up"));
}

TEST_CASE("down interfaces are skipped, and named when nothing else is up") {
  SUBCASE("a later interface that is up is chosen") {
    auto r = choose_pool_address({v4("lo", kLoopback, "127.0.0.1"),
                                  v4("eth0", IFF_BROADCAST, "10.0.0.5"),
                                  v4("eth1", kUp, "192.168.1.7")});
    REQUIRE(r);
    CHECK(*r == "192.168.1.7");
  }
  SUBCASE("only down ones: the error names them, once each") {
    auto r = choose_pool_address({v4("lo", kLoopback, "127.0.0.1"), link("eth0", 0),
                                  v4("eth0", 0, "10.0.0.5"), v4("ib0", IFF_RUNNING, "10.1.0.5")});
    REQUIRE_FALSE(r);
    CHECK(has(r.error().message, "no network interface but loopback is up (down: eth0, ib0)"));
    CHECK(has(r.error().message, "--interchange-address"));
  }
}

TEST_CASE("the first usable IPv4 address in the order listed is picked") {
  auto r = choose_pool_address({link("lo", kLoopback), link("eth0", kUp),
                                v4("lo", kLoopback, "127.0.0.1"), v6("eth0", kUp, "fe80::1"),
                                v4("eth0", kUp, "10.0.0.5"), v4("eth1", kUp, "10.0.1.5")});
  REQUIRE(r);
  CHECK(*r == "10.0.0.5");
  // Another loopback address (127.0.1.1 on an interface flagged loopback) is never chosen.
  auto r2 = choose_pool_address({v4("lo", kLoopback, "127.0.1.1"), v4("eth1", kUp, "10.0.1.5")});
  REQUIRE(r2);
  CHECK(*r2 == "10.0.1.5");
}

TEST_CASE("an IPv4 entry without an address is not usable") {
  auto r = choose_pool_address({v4("tun0", kUp, ""), v4("eth0", kUp, "10.0.0.5")});
  REQUIRE(r);
  CHECK(*r == "10.0.0.5");
}

TEST_CASE("IPv6 only: an error naming the IPv6 addresses") {
  auto r = choose_pool_address({v4("lo", kLoopback, "127.0.0.1"), link("eth0", kUp),
                                v6("eth0", kUp, "2001:db8::5"), v6("eth0", kUp, "fe80::5")});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == fanout::ErrorCode::NotFound);
  CHECK(has(r.error().message, "only IPv6 (eth0 2001:db8::5, eth0 fe80::5)"));
  CHECK(has(r.error().message, "--interchange-address (fanout.interchange_address)"));
}
