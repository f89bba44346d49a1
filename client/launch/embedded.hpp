// The embedded default of `fanout run`: a private interchange started as a child process (on
// ipc:// in a private folder by default) and its pools, started through a Launcher (local child
// processes, or Slurm jobs: client/launch/launcher.hpp), all stopped at the end. Owned by run_job;
// not thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/launch/launcher.hpp"
#include "client/launch/run_plan.hpp"
#include "client/launch/run_settings.hpp"
#include "fanout/net/security.hpp"
#include "fanout/protocol/messages.hpp"
#include "fanout/protocol/ready_file.hpp"
#include "fanout/util/child_process.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/log.hpp"

namespace fanout::client {

// The path of a sibling binary: $ENV, beside this executable, the build tree, else PATH.
std::string find_binary(const char* env, const char* name, const char* build_subdir);

// The last `lines` lines of a text file, for error messages ("" if unreadable).
std::string tail_of(const std::string& path, std::size_t lines);

class Embedded final {
 public:
  // Starts the interchange on the store `db` (waiting for its endpoints) and `rs.pools` pools
  // through the launcher `rs.launch` names (client/launch/launcher.hpp), logging into
  // `run_dir`/logs/sys, listening as `rs.transport` says. Throws Failure naming the log to read
  // when a child cannot start, or the folder or key that could not be made, or what the batch
  // system said.
  Embedded(const RunSettings& rs, const std::string& db, const std::string& run_dir, Logger log);
  ~Embedded() { stop(); }
  Embedded(const Embedded&) = delete;
  Embedded& operator=(const Embedded&) = delete;

  // Waits for the children to exit by themselves (they were told to), then stops them, and
  // removes the ipc:// folder unless detached.
  void stop();
  // stop(), for a guest() whose owner went away before this run's job was accepted: its pools
  // never served, so they are stopped without waiting for them to exit by themselves.
  void abandon();
  // Stops the interchange and pools at once, for a run refused before its job was submitted (its
  // entry script failed the check that ran meanwhile): nothing of theirs is waited for.
  void stop_unused();
  // Leaves the children running on their own (the client exits, the job goes on): the
  // interchange exits once its jobs end, and tells its pools to stop.
  void detach();
  // Describes the interchange's death, or that every pool exited (and the launcher will start
  // no other), with the log tail; "" while the interchange runs and pools run or may come.
  std::string dead_child();
  // The job's progress as the interchange sent it: passed on to the launcher (elastic pool jobs).
  void observe(const proto::JobProgress& p);
  // The interchange is gone: the private one exited, or the store's owner this run attached to
  // no longer holds the store.
  bool interchange_exited();
  // This run found the store owned by another live interchange and uses it (its own pools
  // connect there; there is no private interchange to stop).
  [[nodiscard]] bool guest() const { return guest_; }
  // The pid of the store's owner a guest() uses (0 otherwise).
  [[nodiscard]] pid_t owner_pid() const { return owner_pid_; }
  [[nodiscard]] const std::string& client_endpoint() const { return client_ep_; }
  // What a client connecting to client_endpoint() uses (net::connect_secure).
  [[nodiscard]] const net::Security& security() const { return security_; }
  // The secret a Shutdown to this private interchange must carry (empty for a guest()).
  [[nodiscard]] const std::string& shutdown_token() const { return token_; }
  // Process ids of the interchange and of each pool (for `fanout perf`'s CPU accounting).
  [[nodiscard]] pid_t interchange_pid() const { return ix_.pid(); }
  [[nodiscard]] std::vector<pid_t> pool_pids() const;

 private:
  void start_watchdog();
  // Makes the Curve key folder as the plan says. Throws Failure naming the folder.
  void make_keys(const InterchangePlan& plan);
  // Starts the interchange of `plan` and waits for its ready file, or for the store's owner's
  // when it exits kExitStoreOwned (then guest_). Throws Failure naming its log on a failed start.
  proto::ReadyFile start_interchange(const InterchangePlan& plan);

  Logger log_;
  std::string ready_, ix_log_, client_ep_, pool_ep_, token_;
  net::Security security_{};
  std::string ipc_dir_{};  // Transport::Ipc: removed by stop() unless detached
  bool detached_ = false;
  std::string db_{};
  bool guest_ = false;
  pid_t owner_pid_ = 0;
  // What the store's owner published, once it did; nullopt when it went away (start a private
  // interchange again). Throws Failure after `deadline`.
  std::optional<proto::ReadyFile> owner_endpoints(Clock::time_point deadline);
  ChildProcess ix_;
  std::unique_ptr<Launcher> launcher_;
  ChildProcess watchdog_;  // --exit-with-client: releases the pools if the client dies
};

}  // namespace fanout::client
