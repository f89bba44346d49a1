// LocalLauncher: the embedded default's pools. See launcher.hpp.
#include "client/launch/launcher.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "client/launch/embedded.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

std::vector<std::string> numbering_args(std::uint32_t index, std::uint32_t workers) {
  if (workers > 0) return {"--first-process", std::to_string(index * workers + 1)};
  // Each pool counts its workers (from its devices or cores): all count the same on this node,
  // so each numbers from its index times that count.
  if (index > 0) return {"--pool-index", std::to_string(index)};
  return {};
}

LocalLauncher::LocalLauncher(std::string run_dir, Logger log)
    : run_dir_(std::move(run_dir)), log_(std::move(log)) {}

void LocalLauncher::start(const PoolCommand& pool, std::uint32_t blocks) {
  const std::string node = host_name();
  const std::string node_dir = run_dir_ + "/logs/sys/node/" + node;
  (void)make_dirs(node_dir);
  for (std::uint32_t i = 0; i < blocks; ++i) {
    SpawnOptions ps;
    const std::string plog = fmt::format("{}/pool{:02}.log", node_dir, i + 1);
    ps.argv = pool.argv;
    for (const std::string& a :
         {std::string("--name"), fmt::format("{}-{}-pool{:02}", node, ::getpid(), i + 1),
          std::string("--log-file"), plog}) {
      ps.argv.push_back(a);
    }
    for (std::string& a : numbering_args(i, pool.workers)) ps.argv.push_back(std::move(a));
    ps.stdin_file = "null";
    ps.stderr_file = plog;
    ps.new_process_group = true;  // Ctrl-C reaches the client only; it stops the job in order
    auto p = ChildProcess::spawn(ps);
    if (!p) throw Failure(p.error());
    pools_.push_back(std::move(*p));
    logs_.push_back(plog);
  }
}

std::string LocalLauncher::poll() {
  // A pool that exits is lost to the interchange, which gives its work to the others; with
  // none left nothing would ever run the job, and following it would wait forever.
  if (pools_.empty()) return {};
  std::string last;
  for (std::size_t i = 0; i < pools_.size(); ++i) {
    auto st = pools_[i].poll();
    if (!st) return {};
    last = fmt::format("{} ({})", logs_[i], st->describe());
  }
  return fmt::format("every pool exited, the last one logging to {}:{}", last,
                     tail_of(logs_.back(), 10));
}

void LocalLauncher::release() {
  for (auto& p : pools_) p.set_grace(std::chrono::milliseconds(3000));
  for (auto& p : pools_) {
    (void)p.wait_for(std::chrono::seconds(3));
    p.stop();
  }
}

void LocalLauncher::release_now() {
  for (auto& p : pools_) p.set_grace(std::chrono::milliseconds(500));
  for (auto& p : pools_) p.stop();
}

void LocalLauncher::detach() {
  for (auto& p : pools_) (void)p.release();
  pools_.clear();
}

std::vector<pid_t> LocalLauncher::pids() const {
  std::vector<pid_t> pids;
  for (const auto& p : pools_) pids.push_back(p.pid());
  return pids;
}

}  // namespace fanout::client
