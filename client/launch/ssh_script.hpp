// The ssh launcher's decisions, without I/O (unit-tested in tests/unit/client/ssh_test.cpp): the
// host list checked, the script each host runs, the ssh command line, and which host a pool goes
// to. client/launch/ssh_launcher.* does the I/O. See docs/cluster.md, "ssh".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fanout::client::ssh {

// "" when every host of fanout.hosts (--hosts) is one an ssh command line takes as its
// destination (`host`, `user@host`, not starting with '-', no white space or quotes), else what
// is wrong: "fanout.hosts (--hosts): expected at least one host" or "... host 2: expected ...".
[[nodiscard]] std::string check_hosts(const std::vector<std::string>& hosts);

// The node name a host's pool and log folder take: the host without its `user@`.
[[nodiscard]] std::string node_of(std::string_view host);

// What the script on one host is made of.
struct ScriptInput {
  std::string cwd{};                     // the client's working directory (shared filesystem)
  std::string run_dir{};                 // absolute: the pool log goes under logs/sys/node/
  std::string worker_init{};             // shell lines run before the pool
  std::vector<std::string> pool_argv{};  // fanout-pool (as on the host) and its flags
  std::string node{};                    // node_of(host)
  std::uint32_t block = 1;               // this pool's number in the job, from 1
  std::uint32_t workers = 0;             // per pool when known (numbers workers apart)
};

// The /bin/sh script one host runs: cd to the client's folder, worker_init, then the pool in
// the background, named <node>-ssh<block>, logging to
// <run_dir>/logs/sys/node/<node>/pool-ssh<block>.log; a watcher that sends the pool SIGTERM once
// the script's stdin (ssh's) reaches its end, which is how the client ends the pool, and how a
// pool ends when the client or its ssh dies; the script exits with the pool's status.
[[nodiscard]] std::string remote_script(const ScriptInput& in);

// The ssh command that runs `script` on `host`: the user's `options` first (ssh takes the first
// value of an option, so they override what follows), then no tty, BatchMode (never a password
// prompt), a connect timeout and keep-alives (a host cut off ends its ssh within about 30 s),
// then `exec /bin/sh -c '<script>'` for the host's login shell.
[[nodiscard]] std::vector<std::string> ssh_argv(const std::string& host,
                                                const std::vector<std::string>& options,
                                                const std::string& script);

// Where the next pool goes, as an index into the host list: the host with the fewest pools lost
// so far (a host whose pool was lost is tried last), then the fewest running, then the first
// listed. `running` and `lost` are per host, the list's size (not empty).
[[nodiscard]] std::size_t pick_host(const std::vector<std::uint32_t>& running,
                                    const std::vector<std::uint32_t>& lost);

}  // namespace fanout::client::ssh
