// What a `fanout run` does, decided before anything is done: where the store and the run folder
// are, how the embedded interchange listens (ipc, tcp, Curve keys), the interchange's and the
// pools' command lines, which launcher starts the pools, and how a run that found the store
// owned by another interchange (a guest) connects to it. Pure: no I/O; the caller gathers the
// facts it needs and executes the plan (run_job, Embedded). Unit-tested in
// tests/unit/client/run_plan_test.cpp.
#pragma once

#include <ctime>
#include <string>
#include <vector>

#include "client/launch/run_settings.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/net/security.hpp"
#include "fanout/protocol/ready_file.hpp"

namespace fanout::client {

// What the caller found in the environment for plan_paths().
struct RunFacts {
  std::string cwd{};         // the working directory, absolute
  std::string default_db{};  // default_db_path(): $FANOUT_DB, else under XDG_DATA_HOME or HOME
  std::time_t now = 0;       // names the run folder
  long pid = 0;              // names the run folder
};

// Where a run keeps its store and its run folder.
struct RunPaths {
  std::string db{};  // absolute
  // --interchange: a shared interchange owns the store and the run folders, on its host; this
  // client makes neither and learns their paths when the job is accepted.
  bool shared = false;
  // Absolute. Empty when a shared interchange chooses it (no fanout.run_dir was given).
  std::string run_dir{};
  // Make <run_dir>/logs, restrict the run folder and create the store as the owner's only.
  bool make_folders = false;
  [[nodiscard]] std::string log_dir() const {
    return run_dir.empty() ? std::string() : run_dir + "/logs";
  }
};

// The store is `fanout.db` (else facts.default_db) made absolute against facts.cwd, since a bare
// `--db NAME` has no folder and its runs/ belongs beside it. The run folder is
// `<fanout.run_dir or the store's folder/runs>/<run_folder_name>`, absolute because the
// interchange refuses a relative log folder.
[[nodiscard]] RunPaths plan_paths(const config::JobConfig& cfg, const RunOverrides& ov,
                                  const RunFacts& facts);

// What the caller found in the environment for plan_interchange().
struct EmbeddedFacts {
  std::string interchange_bin{};  // find_binary("FANOUT_INTERCHANGE_BIN", ...)
  std::string pool_bin{};         // find_binary("FANOUT_POOL_BIN", ...)
  std::string ipc_dir{};          // Transport::Ipc: the private 0700 folder made for this run
  bool keys_exist = false;        // Transport::Curve: rs.keys_dir holds the interchange's key
};

// What to do about the Curve key folder before the interchange starts.
enum class KeysAction : std::uint8_t {
  None,
  MakeFresh,  // keys of this run only (<run_dir>/keys): remove what is there, make new ones
  Make,       // the user's key folder has none yet: make it as `fanout keygen` would
};

// The private interchange of a run, and how this client and its pools reach it.
struct InterchangePlan {
  std::string sys_dir{};     // <run_dir>/logs/sys, made first
  std::string ready_file{};  // <run_dir>/interchange.ready
  std::string log_file{};    // <sys_dir>/interchange.log, its log and its stderr
  std::vector<std::string> argv{};
  net::Security security{};                  // what this client connects with
  std::vector<std::string> pool_security{};  // the pools' flags for the same
  KeysAction keys = KeysAction::None;        // on security.keys_dir
};

// The interchange's command line: the store `db`, its ready file and log, exit when idle, the
// heartbeats, log level, window and --reopen-failed of `rs`, `--write-root /` (a private
// interchange writes where its user could), and the endpoints of rs.transport: ipc:// sockets in
// facts.ipc_dir (no keys: no other user can enter the folder), loopback TCP with --insecure, or
// Curve with the keys of rs.keys_dir (made when missing) or of this run (<run_dir>/keys). A
// rs.pool_address adds a tcp:// pool endpoint on that address.
[[nodiscard]] InterchangePlan plan_interchange(const RunSettings& rs, const std::string& db,
                                               const std::string& run_dir,
                                               const EmbeddedFacts& facts);

// How a guest (a run whose interchange found the store owned by another live one) and its pools
// connect to that owner: as its ready file says (security insecure or curve with its keys;
// ipc needs nothing).
struct GuestSecurity {
  net::Security security{};
  std::vector<std::string> pool_flags{};
};
[[nodiscard]] GuestSecurity plan_guest(const proto::ReadyFile& owner);

// The pool endpoint a pool connects to: one bound to a wildcard address (tcp://0.0.0.0:P,
// tcp://*:P) is reached by this host's name; any other is used as published.
[[nodiscard]] std::string pool_endpoint_for(const std::string& published, const std::string& host);

// The pools' command line: the interchange's pool endpoint, prefetch, poll, --exit-on-lost, the
// heartbeats and log level of `rs`, --workers unless 0 (a node's cores), the security flags,
// --python when rs.python names one, --warm-python for a Python job that forks its workers, the
// resource monitor's interval when set, and the memory and recycling flags when set
// (docs/resources.md).
[[nodiscard]] std::vector<std::string> plan_pool_argv(const RunSettings& rs,
                                                      const std::string& pool_bin,
                                                      const std::string& pool_endpoint,
                                                      const std::vector<std::string>& security);

// Which launcher starts the pools: Slurm batch jobs for rs.launch.kind "slurm", Grid Engine jobs
// for "sge", PBS, LSF or HTCondor ones for "pbs", "lsf", "condor" (Hpc), else local child
// processes; ssh children for "ssh" (one pool per host).
enum class LauncherKind : std::uint8_t { Local, Slurm, Sge, Hpc, Ssh };
[[nodiscard]] LauncherKind plan_launcher(const RunSettings& rs);

}  // namespace fanout::client
