// The ssh launcher's decisions, without I/O. See ssh_script.hpp.
#include "client/launch/ssh_script.hpp"

#include <fmt/format.h>

#include "client/launch/slurm_script.hpp"

namespace fanout::client::ssh {

std::string check_hosts(const std::vector<std::string>& hosts) {
  if (hosts.empty()) {
    return "fanout.hosts (--hosts): expected at least one host for launcher ssh (got none)";
  }
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const std::string& h = hosts[i];
    const auto at = h.find('@');
    const bool bad = h.empty() || h.front() == '-' ||
                     h.find_first_of(" \t\n\"'\\;&|$`") != std::string::npos ||
                     at + 1 == h.size() || at == 0;
    if (bad) {
      return fmt::format(
          "fanout.hosts (--hosts): host {}: expected a host name or user@host (got '{}')", i + 1,
          h);
    }
  }
  return {};
}

std::string node_of(std::string_view host) {
  const auto at = host.find('@');
  return std::string(at == std::string_view::npos ? host : host.substr(at + 1));
}

std::string remote_script(const ScriptInput& in) {
  using slurm::shell_quote;
  const std::string tag = fmt::format("ssh{}", in.block);
  const std::string node_dir = in.run_dir + "/logs/sys/node/" + in.node;
  std::string s = fmt::format("cd {} || exit 1\n", shell_quote(in.cwd));
  if (!in.worker_init.empty()) {
    s += in.worker_init;
    if (s.back() != '\n') s += '\n';
  }
  s += fmt::format("mkdir -p {} || exit 1\n", shell_quote(node_dir));
  // ssh's stdin is kept on fd 3 for the watcher only; the pool reads nothing.
  s += "exec 3<&0 </dev/null\n";
  for (const auto& a : in.pool_argv) s += shell_quote(a) + " ";
  s += fmt::format("--node {} --name {} --log-file {}", shell_quote(in.node),
                   shell_quote(in.node + "-" + tag),
                   shell_quote(node_dir + "/pool-" + tag + ".log"));
  if (in.workers > 0) s += fmt::format(" --first-process {}", (in.block - 1) * in.workers + 1);
  s += " 3<&- &\np=$!\n";
  // The end of stdin: the client closed it (release), or the client or its ssh died.
  s += "(while read -r _ <&3; do :; done; kill -TERM $p) >/dev/null 2>&1 &\n";
  s += "w=$!\nexec 3<&-\nwait $p\ns=$?\nkill $w 2>/dev/null\nexit $s\n";
  return s;
}

std::vector<std::string> ssh_argv(const std::string& host, const std::vector<std::string>& options,
                                  const std::string& script) {
  std::vector<std::string> argv = {"ssh"};
  argv.insert(argv.end(), options.begin(), options.end());
  for (const char* o : {"BatchMode=yes", "ConnectTimeout=10", "ServerAliveInterval=5",
                        "ServerAliveCountMax=3", "LogLevel=ERROR"}) {
    argv.insert(argv.end(), {"-o", o});
  }
  argv.insert(argv.end(), {"-T", "--", host, "exec /bin/sh -c " + slurm::shell_quote(script)});
  return argv;
}

std::size_t pick_host(const std::vector<std::uint32_t>& running,
                      const std::vector<std::uint32_t>& lost) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < running.size(); ++i) {
    if (lost[i] < lost[best] || (lost[i] == lost[best] && running[i] < running[best])) best = i;
  }
  return best;
}

}  // namespace fanout::client::ssh
