// `fanout keygen`. See keygen.hpp.
#include "client/commands/keygen.hpp"

#include <cstdio>
#include <filesystem>
#include <utility>
#include <vector>

#include "fanout/net/keys.hpp"
#include "fanout/protocol/exit_codes.hpp"

namespace fanout::client {

int keygen(const KeygenOptions& opts) {
  const std::string dir = opts.dir.empty() ? net::default_keys_dir() : opts.dir;
  const bool adding = !opts.add_client.empty() || !opts.add_pool.empty();
  // Adding to a folder that does not exist yet makes the folder first.
  if (!adding || !std::filesystem::exists(net::secret_key_path(dir, "interchange"))) {
    if (auto r = net::make_key_folder(dir); !r) {
      std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
      return proto::kExitUsage;
    }
    std::printf(
        "fanout keygen: wrote %s\n"
        "  interchange.key(_secret)  the interchange's key pair\n"
        "  client.key(_secret)       a client key, authorised in authorized/clients/\n"
        "  pool.key(_secret)         a pool key, authorised in authorized/pools/\n"
        "Secret files are mode 0600 in a 0700 folder. Give each host the files it needs "
        "(docs/security.md):\n"
        "  fanout-interchange --keys %s --client-endpoint tcp://*:5555 --pool-endpoint "
        "tcp://*:5556 --db ...\n"
        "  fanout-pool --keys %s --interchange tcp://HEAD:5556\n"
        "  fanout run job.yaml --keys %s --interchange tcp://HEAD:5555\n",
        dir.c_str(), dir.c_str(), dir.c_str(), dir.c_str());
    if (!adding) return 0;
  }
  std::vector<std::pair<std::string, const char*>> keys;
  for (const auto& name : opts.add_client) keys.emplace_back(name, "client");
  for (const auto& name : opts.add_pool) keys.emplace_back(name, "pool");
  for (const auto& [name, role] : keys) {
    if (auto r = net::add_key(dir, name, role); !r) {
      std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
      return proto::kExitUsage;
    }
    std::printf("fanout keygen: wrote %s and %s, authorised as a %s (use --key %s)\n",
                net::secret_key_path(dir, name).c_str(), net::public_key_path(dir, name).c_str(),
                role, name.c_str());
  }
  return 0;
}

}  // namespace fanout::client
