// `fanout keygen`: makes the key folder of CurveZMQ keys, or adds a client's or pool's key to it.
// See docs/security.md.
#pragma once

#include <string>
#include <vector>

namespace fanout::client {

struct KeygenOptions {
  std::string dir{};  // empty: $FANOUT_KEYS, else ~/.config/fanout/keys
  // Client and pool keys to add (the folder is made first if need be).
  std::vector<std::string> add_client{};
  std::vector<std::string> add_pool{};
};

// Makes the folder (interchange, client and pool keys, the latter two authorised) or adds the
// named keys, and prints what it wrote and how to use it. Returns 0, or 2 when a key exists
// already or a file cannot be written (the message names it).
int keygen(const KeygenOptions& opts);

}  // namespace fanout::client
