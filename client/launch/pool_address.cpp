// The address pools connect to, chosen from this host's interfaces. See pool_address.hpp.
#include "client/launch/pool_address.hpp"

#include <net/if.h>
#include <sys/socket.h>

#include <algorithm>

#include "fanout/util/error.hpp"

namespace fanout::client {

namespace {

void add_name(std::vector<std::string>& names, const std::string& name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
}

std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s;
}

}  // namespace

Expected<std::string> choose_pool_address(const std::vector<InterfaceAddress>& list) {
  std::vector<std::string> down, ipv6;
  for (const auto& a : list) {
    if ((a.flags & IFF_LOOPBACK) != 0) continue;
    if ((a.flags & IFF_UP) == 0) {
      add_name(down, a.name);
      continue;
    }
    if (a.family == AF_INET && !a.address.empty()) return a.address;
    if (a.family == AF_INET6 && !a.address.empty()) ipv6.push_back(a.name + " " + a.address);
  }
  const std::string ask = "; give --interchange-address (fanout.interchange_address)";
  if (!ipv6.empty()) {
    return make_error(ErrorCode::NotFound,
                      "no IPv4 address on an interface that is up, only IPv6 (" + join(ipv6) +
                          "), which fanout does not choose by itself" + ask);
  }
  return make_error(ErrorCode::NotFound,
                    "no network interface but loopback is up" +
                        (down.empty() ? std::string() : " (down: " + join(down) + ")") +
                        ", so no node could reach the interchange" + ask);
}

}  // namespace fanout::client
