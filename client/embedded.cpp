// The embedded default: a private interchange and local pools. See embedded.hpp.
#include "client/embedded.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <thread>

#include "fanout/net/keys.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

std::string find_binary(const char* env, const char* name, const char* build_subdir) {
  if (const char* e = std::getenv(env); e != nullptr && *e != '\0') return e;
  const std::string self = self_dir();
  for (const std::string& cand : {self + "/" + name, self + "/../" + build_subdir + "/" + name}) {
    if (fs::exists(cand)) return fs::path(cand).lexically_normal().string();
  }
  return name;  // from PATH
}

std::string ready_value(const std::string& text, std::string_view key) {
  for (std::size_t pos = 0; pos < text.size();) {
    auto nl = text.find('\n', pos);
    std::string_view line = std::string_view(text).substr(pos, nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == '=') {
      return std::string(line.substr(key.size() + 1));
    }
  }
  return {};
}

std::string tail_of(const std::string& path, std::size_t lines) {
  auto text = read_file(path);
  if (!text) return {};
  std::string s = *text;
  std::size_t pos = s.size();
  for (std::size_t n = 0; n <= lines && pos > 0; ++n) {
    pos = s.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
  }
  return s.substr(pos);
}

// The private interchange and pools of the embedded default.
Embedded::Embedded(const RunSettings& rs, const std::string& db, const std::string& run_dir,
                   Logger log)
    : log_(std::move(log)) {
  const std::string sys_dir = run_dir + "/logs/sys";
  (void)make_dirs(sys_dir);
  ready_ = run_dir + "/interchange.ready";
  std::error_code ec;
  fs::remove(ready_, ec);
  ix_log_ = sys_dir + "/interchange.log";
  SpawnOptions so;
  // Flags the interchange and the pools take alike: heartbeats, log level and log file.
  auto common_flags = [&](std::vector<std::string>& argv, const std::string& log_file) {
    for (const std::string& a :
         {std::string("--heartbeat-period-ms"), std::to_string(rs.heartbeat_period_ms),
          std::string("--heartbeat-threshold-ms"), std::to_string(rs.heartbeat_threshold_ms),
          std::string("--log-level"), rs.log_level, std::string("--log-file"), log_file}) {
      argv.push_back(a);
    }
  };
  so.argv = {find_binary("FANOUT_INTERCHANGE_BIN", "fanout-interchange", "interchange"),
             "--db",
             db,
             "--ready-file",
             ready_,
             "--exit-when-idle"};
  common_flags(so.argv, ix_log_);
  if (rs.window > 0) {
    so.argv.push_back("--window");
    so.argv.push_back(std::to_string(rs.window));
  }
  if (rs.reopen_failed > 0) {
    so.argv.push_back("--reopen-failed");
    so.argv.push_back(std::to_string(rs.reopen_failed));
  }
  // Where the interchange listens, and the flags the pools need to reach it.
  std::vector<std::string> security_flags;
  switch (rs.transport) {
    case Transport::Ipc: {
      // No other local user can enter the folder, so nothing needs keys.
      auto dir = net::make_private_ipc_dir();
      if (!dir) throw Failure(dir.error());
      ipc_dir_ = *dir;
      for (const std::string& a :
           {std::string("--client-endpoint"), "ipc://" + ipc_dir_ + "/client",
            std::string("--pool-endpoint"), "ipc://" + ipc_dir_ + "/pool"}) {
        so.argv.push_back(a);
      }
      break;
    }
    case Transport::Tcp:
      security_.insecure = true;
      security_flags = {"--insecure"};
      break;
    case Transport::Curve:
      security_.keys_dir = run_dir + "/keys";
      fs::remove_all(security_.keys_dir, ec);
      if (auto r = net::make_key_folder(security_.keys_dir); !r) throw Failure(r.error());
      security_flags = {"--keys", security_.keys_dir};
      break;
  }
  so.argv.insert(so.argv.end(), security_flags.begin(), security_flags.end());
  so.stdin_file = "null";
  so.stderr_file = ix_log_;
  {
    std::random_device rd;
    token_ = fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
  }
  so.env_set.emplace_back("FANOUT_SHUTDOWN_TOKEN", token_);
  so.new_process_group = true;  // Ctrl-C reaches the client only; it stops the job in order
  auto ix = ChildProcess::spawn(so);
  if (!ix) throw Failure(ix.error());
  ix_ = std::move(*ix);
  // Wait for the endpoints.
  auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!fs::exists(ready_)) {
    if (auto st = ix_.poll()) {
      throw Failure(ErrorCode::Runtime, "the interchange exited at start (" + st->describe() +
                                            "):" + tail_of(ix_log_, 10));
    }
    if (Clock::now() > deadline) {
      throw Failure(ErrorCode::Runtime,
                    "the interchange did not start within 30 s: see " + ix_log_);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto text = read_file(ready_).value();
  client_ep_ = ready_value(text, "client");
  pool_ep_ = ready_value(text, "pool");
  const std::string node = host_name();
  const std::string node_dir = sys_dir + "/node/" + node;
  (void)make_dirs(node_dir);
  for (std::uint32_t i = 0; i < rs.pools; ++i) {
    SpawnOptions ps;
    const std::string plog = fmt::format("{}/pool{:02}.log", node_dir, i + 1);
    ps.argv = {find_binary("FANOUT_POOL_BIN", "fanout-pool", "pool"),
               "--interchange",
               pool_ep_,
               "--name",
               fmt::format("{}-{}-pool{:02}", node, ::getpid(), i + 1),
               "--workers",
               std::to_string(rs.workers),
               "--prefetch",
               std::to_string(rs.prefetch),
               "--poll-ms",
               std::to_string(rs.poll_ms),
               "--exit-on-lost"};
    common_flags(ps.argv, plog);
    ps.argv.insert(ps.argv.end(), security_flags.begin(), security_flags.end());
    if (!rs.python.empty()) {
      ps.argv.push_back("--python");
      ps.argv.push_back(rs.python);
    }
    if (rs.resource_monitor_interval_s > 0) {
      ps.argv.push_back("--resource-monitor-interval");
      ps.argv.push_back(fmt::format("{}", rs.resource_monitor_interval_s));
    }
    ps.stdin_file = "null";
    ps.stderr_file = plog;
    ps.new_process_group = true;
    auto p = ChildProcess::spawn(ps);
    if (!p) throw Failure(p.error());
    pools_.push_back(std::move(*p));
    pool_logs_.push_back(plog);
  }
}

void Embedded::stop() {
  for (auto& p : pools_) p.set_grace(std::chrono::milliseconds(3000));
  ix_.set_grace(std::chrono::milliseconds(3000));
  (void)ix_.wait_for(std::chrono::seconds(5));  // it exits by itself once told / idle
  ix_.stop();
  for (auto& p : pools_) {
    (void)p.wait_for(std::chrono::seconds(3));
    p.stop();
  }
  // The interchange removed its socket files when it closed them; the folder goes too.
  if (!ipc_dir_.empty() && !detached_) {
    std::error_code ec;
    fs::remove_all(ipc_dir_, ec);
    ipc_dir_.clear();
  }
}

void Embedded::detach() {
  detached_ = true;
  (void)ix_.release();
  for (auto& p : pools_) (void)p.release();
  pools_.clear();
}

std::vector<pid_t> Embedded::pool_pids() const {
  std::vector<pid_t> pids;
  for (const auto& p : pools_) pids.push_back(p.pid());
  return pids;
}

std::string Embedded::dead_child() {
  if (auto st = ix_.poll()) {
    return "the interchange exited (" + st->describe() + "):" + tail_of(ix_log_, 10);
  }
  // A pool that exits is lost to the interchange, which gives its work to the others; with
  // none left nothing would ever run the job, and following it would wait forever.
  if (pools_.empty()) return {};
  std::string last;
  for (std::size_t i = 0; i < pools_.size(); ++i) {
    auto st = pools_[i].poll();
    if (!st) return {};
    last = fmt::format("{} ({})", pool_logs_[i], st->describe());
  }
  return fmt::format("every pool exited, the last one logging to {}:{}", last,
                     tail_of(pool_logs_.back(), 10));
}

}  // namespace fanout::client
