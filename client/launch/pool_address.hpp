// Which address of this host the pools on other nodes connect to, when --interchange-address
// (fanout.interchange_address) is not given: a decision over the host's interfaces, no I/O
// (unit-tested in tests/unit/client/pool_address_test.cpp). interchange_address() in
// client/launch/slurm_launcher.cpp lists the interfaces with getifaddrs(3) and asks this.
#pragma once

#include <string>
#include <vector>

#include "fanout/util/expected.hpp"

namespace fanout::client {

// One address of one interface, as getifaddrs(3) lists it.
struct InterfaceAddress {
  std::string name{};     // "eth0"
  int family = 0;         // AF_INET, AF_INET6, AF_PACKET, ... (0: no address)
  unsigned flags = 0;     // IFF_UP, IFF_LOOPBACK, ... of the interface
  std::string address{};  // numeric: "10.0.0.5", "fe80::1"; "" for other families
};

// The first IPv4 address, in the order listed, of an interface that is up and not loopback.
// Error{NotFound} asking for --interchange-address otherwise, saying why: no interface but
// loopback is up (naming those that are down), or only IPv6 addresses (naming them; an IPv6
// address is used only when given).
[[nodiscard]] Expected<std::string> choose_pool_address(const std::vector<InterfaceAddress>& list);

}  // namespace fanout::client
