// The ssh launcher's I/O: one ssh child per pool. See ssh_launcher.hpp.
#include "client/launch/ssh_launcher.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <thread>

#include "client/launch/batch_launcher.hpp"
#include "client/launch/embedded.hpp"
#include "client/launch/ssh_script.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

SshLauncher::SshLauncher(Options opts, Logger log)
    : o_(std::move(opts)),
      log_(std::move(log)),
      policy_(o_.nodes, o_.launch.min_nodes, o_.launch.max_nodes),
      dir_(o_.run_dir + "/ssh"),
      lost_(o_.launch.hosts.size(), 0) {
  if (auto e = ssh::check_hosts(o_.launch.hosts); !e.empty()) {
    throw Failure(ErrorCode::InvalidArgument, e);
  }
  if (auto r = make_dirs(dir_); !r) throw Failure(r.error());
}

SshLauncher::~SshLauncher() {
  if (!detached_) release();
}

void SshLauncher::start(const PoolCommand& pool, std::uint32_t blocks) {
  pool_ = pool;
  // The pool binary on the hosts: fanout.pool_command, else this client's own fanout-pool (the
  // same path on a shared filesystem, as the batch launchers assume).
  if (!o_.launch.pool_command.empty() && !pool_.argv.empty()) {
    pool_.argv[0] = o_.launch.pool_command;
  }
  for (std::uint32_t i = 0; i < blocks; ++i) {
    std::vector<std::uint32_t> run(o_.launch.hosts.size(), 0);
    for (const auto& b : blocks_) run[b.host] += b.ended ? 0 : 1;
    launch(ssh::pick_host(run, lost_));
  }
}

void SshLauncher::launch(std::size_t host) {
  const std::string& dest = o_.launch.hosts[host];
  const std::string node = ssh::node_of(dest);
  Block b;
  b.host = host;
  b.number = static_cast<std::uint32_t>(blocks_.size()) + 1;
  const std::string base = fmt::format("{}/{}-ssh{}", dir_, node, b.number);
  b.out = base + ".out";
  const std::string script = ssh::remote_script({.cwd = o_.cwd,
                                                 .run_dir = o_.run_dir,
                                                 .worker_init = o_.launch.worker_init,
                                                 .pool_argv = pool_.argv,
                                                 .node = node,
                                                 .block = b.number,
                                                 .workers = pool_.workers});
  write_script(base + ".sh", script);
  auto pipe = make_pipe();
  if (!pipe) throw Failure(pipe.error());
  SpawnOptions so;
  so.argv = ssh::ssh_argv(dest, o_.launch.ssh_options, script);
  so.fd_map = {{pipe->read.get(), 0}};
  so.stdout_file = b.out;
  so.stderr_file = b.out;
  so.new_process_group = true;  // Ctrl-C reaches the client only; it stops the job in order
  auto child = ChildProcess::spawn(so);
  if (!child) throw Failure(child.error());
  b.ssh = std::move(*child);
  b.stdin_write = std::move(pipe->write);
  log_->info("started pool {} on {} over ssh (pid {}, output {})", b.number, dest, b.ssh.pid(),
             b.out);
  blocks_.push_back(std::move(b));
}

std::uint32_t SshLauncher::running() const {
  std::uint32_t n = 0;
  for (const auto& b : blocks_) n += b.ended ? 0 : 1;
  return n;
}

std::string SshLauncher::poll() {
  if (released_ || detached_ || blocks_.empty()) return {};
  for (auto& b : blocks_) {
    if (b.ended) continue;
    auto st = b.ssh.poll();
    if (!st) continue;
    // The ssh child ended: the pool exited, or the host, the link or sshd went away. Either
    // way that pool is gone (the interchange gives its work to the others).
    b.ended = true;
    b.stdin_write.reset();
    ++lost_[b.host];
    log_->warn("pool {} on {} ended ({}); see {}", b.number, o_.launch.hosts[b.host],
               st->describe(), b.out);
    if (!o_.quiet) {
      std::fprintf(stderr, "fanout: ssh pool %u on %s ended (%s); see %s\n", b.number,
                   o_.launch.hosts[b.host].c_str(), st->describe().c_str(), b.out.c_str());
    }
  }
  const std::uint32_t act = running();
  const std::uint32_t more = policy_.replacements(act, static_cast<std::uint32_t>(blocks_.size()));
  if (more > 0) {
    try {
      start(pool_, more);
      if (!o_.quiet) {
        std::fprintf(stderr, "fanout: started %u replacement ssh pool(s) (%zu of --max-nodes %u)\n",
                     more, blocks_.size(), policy_.max_nodes());
      }
    } catch (const Failure& f) {
      log_->warn("replacement ssh pool: {}", f.what());
    }
    return {};
  }
  if (act > 0) return {};
  const Block& b = blocks_.back();
  return fmt::format(
      "every ssh pool ended and --max-nodes {} allows no replacement; pool logs under "
      "{}/logs/sys/node/, the last ssh's output in {}:{}",
      policy_.max_nodes(), o_.run_dir, b.out, tail_of(b.out, 10));
}

bool SshLauncher::wait_all(std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    bool all = true;
    for (auto& b : blocks_) {
      if (!b.ended && b.ssh.poll()) b.ended = true;
      all = all && b.ended;
    }
    if (all) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void SshLauncher::close_inputs() {
  for (auto& b : blocks_) b.stdin_write.reset();
}

void SshLauncher::release() {
  if (released_ || detached_) return;
  released_ = true;
  // The pools were told to stop (or their interchange is gone): most exit by themselves.
  if (!wait_all(std::chrono::seconds(5))) {
    // The end of its stdin makes each remaining host's watcher send its pool SIGTERM (the
    // pool's own drain and leave), and the script, then ssh, exit after it.
    close_inputs();
    (void)wait_all(std::chrono::seconds(15));
  }
  close_inputs();
  for (auto& b : blocks_) {
    b.ssh.set_grace(std::chrono::milliseconds(2000));
    b.ssh.stop();  // a host that cannot be reached: ssh gives up on it
  }
}

void SshLauncher::release_now() {
  if (released_ || detached_) return;
  released_ = true;
  close_inputs();
  (void)wait_all(std::chrono::seconds(5));
  for (auto& b : blocks_) {
    b.ssh.set_grace(std::chrono::milliseconds(500));
    b.ssh.stop();
  }
}

void SshLauncher::detach() {
  if (detached_) return;
  detached_ = true;
  // The holder keeps each running ssh's stdin open until every ssh has ended; were the pipes
  // closed with this client, the remote watchers would stop the pools the job still needs.
  SpawnOptions h;
  std::string pids;
  int fd = 3;
  for (auto& b : blocks_) {
    if (b.ended || !b.stdin_write.valid()) continue;
    h.fd_map.emplace_back(b.stdin_write.get(), fd++);
    pids += fmt::format(" {}", b.ssh.pid());
  }
  if (!pids.empty()) {
    h.argv = {"/bin/sh", "-c",
              fmt::format("while :; do a=0; for p in{}; do kill -0 $p 2>/dev/null && a=1; done; "
                          "[ $a = 1 ] || exit 0; sleep 2; done",
                          pids)};
    h.stdin_file = "null";
    h.stdout_file = "/dev/null";
    h.stderr_file = "/dev/null";
    h.new_process_group = true;
    auto p = ChildProcess::spawn(h);
    if (p) {
      (void)p->release();
    } else {
      log_->warn("ssh pools: cannot keep their input open after this client exits: {}",
                 p.error().message);
    }
  }
  for (auto& b : blocks_) {
    (void)b.ssh.release();
    b.stdin_write.reset();
  }
}

}  // namespace fanout::client
