// The plan of a `fanout run` (client/launch/run_plan.hpp), one rule per test case: where the
// store and the run folder go, how the embedded interchange listens, the interchange's and the
// pools' command lines, the launcher, and how a guest reaches the store's owner.
#include "client/launch/run_plan.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "client/launch/launcher.hpp"

using fanout::client::EmbeddedFacts;
using fanout::client::KeysAction;
using fanout::client::LauncherKind;
using fanout::client::numbering_args;
using fanout::client::plan_guest;
using fanout::client::plan_interchange;
using fanout::client::plan_launcher;
using fanout::client::plan_paths;
using fanout::client::plan_pool_argv;
using fanout::client::pool_endpoint_for;
using fanout::client::RunFacts;
using fanout::client::RunOverrides;
using fanout::client::RunSettings;
using fanout::client::Transport;
using fanout::config::JobConfig;
using Argv = std::vector<std::string>;

namespace {

constexpr std::time_t kNov25 = 1764114896;  // 2025-11-25 23:54:56 UTC

const RunFacts kFacts{.cwd = "/home/u/work",
                      .default_db = "/home/u/.local/share/fanout/fanout.db",
                      .now = kNov25,
                      .pid = 4242};

JobConfig job(const std::string& name = "score") {
  JobConfig c;
  c.name = name;
  return c;
}

const EmbeddedFacts kBins{.interchange_bin = "/bin/fanout-interchange",
                          .pool_bin = "/bin/fanout-pool",
                          .ipc_dir = "/tmp/fanout-ipc-x"};

// The value after `flag` in argv; "" when the flag is absent or last.
std::string after(const Argv& argv, const std::string& flag) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? std::string() : *(it + 1);
}

bool has(const Argv& argv, const std::string& flag) {
  return std::find(argv.begin(), argv.end(), flag) != argv.end();
}

}  // namespace

// ---- paths ----

TEST_CASE("client.run_plan.store_defaults_to_the_user_store_when_the_job_names_none") {
  CHECK(plan_paths(job(), RunOverrides{}, kFacts).db == kFacts.default_db);
}

TEST_CASE("client.run_plan.a_relative_store_is_made_absolute_against_the_working_directory") {
  JobConfig c = job();
  c.fanout.db = "my.db";
  CHECK(plan_paths(c, RunOverrides{}, kFacts).db == "/home/u/work/my.db");
}

TEST_CASE("client.run_plan.run_folder_goes_under_runs_beside_the_store_named_after_the_job") {
  const auto p = plan_paths(job(), RunOverrides{}, kFacts);
  CHECK(p.run_dir == "/home/u/.local/share/fanout/runs/score-20251125-235456-4242");
  CHECK(p.log_dir() == p.run_dir + "/logs");
  CHECK(p.make_folders);
  CHECK_FALSE(p.shared);
}

TEST_CASE("client.run_plan.run_folder_name_is_sanitised_into_one_path_component") {
  const auto p = plan_paths(job("a/b c"), RunOverrides{}, kFacts);
  CHECK(p.run_dir == "/home/u/.local/share/fanout/runs/a_b_c-20251125-235456-4242");
}

TEST_CASE("client.run_plan.fanout_run_dir_is_the_root_of_the_run_folder_made_absolute") {
  JobConfig c = job();
  c.fanout.run_dir = "out/../runs";
  CHECK(plan_paths(c, RunOverrides{}, kFacts).run_dir ==
        "/home/u/work/runs/score-20251125-235456-4242");
}

TEST_CASE("client.run_plan.a_shared_interchange_chooses_the_run_folder_and_nothing_is_made") {
  const auto p = plan_paths(job(), RunOverrides{.interchange = "tcp://ix:5555"}, kFacts);
  CHECK(p.shared);
  CHECK(p.run_dir.empty());
  CHECK(p.log_dir().empty());
  CHECK_FALSE(p.make_folders);
}

TEST_CASE("client.run_plan.a_shared_interchange_uses_the_run_dir_the_job_file_names") {
  JobConfig c = job();
  c.fanout.run_dir = "/shared/runs";
  const auto p = plan_paths(c, RunOverrides{.interchange = "tcp://ix:5555"}, kFacts);
  CHECK(p.run_dir == "/shared/runs/score-20251125-235456-4242");
  CHECK_FALSE(p.make_folders);
}

// ---- the interchange ----

TEST_CASE("client.run_plan.interchange_runs_on_the_store_with_its_ready_file_and_log") {
  const auto p = plan_interchange(RunSettings{}, "/s/fanout.db", "/r", kBins);
  CHECK(p.argv.front() == "/bin/fanout-interchange");
  CHECK(after(p.argv, "--db") == "/s/fanout.db");
  CHECK(after(p.argv, "--ready-file") == "/r/interchange.ready");
  CHECK(after(p.argv, "--log-file") == "/r/logs/sys/interchange.log");
  CHECK(p.sys_dir == "/r/logs/sys");
  CHECK(has(p.argv, "--exit-when-idle"));
  CHECK(after(p.argv, "--write-root") == "/");
  CHECK(after(p.argv, "--heartbeat-period-ms") == "2000");
  CHECK(after(p.argv, "--heartbeat-threshold-ms") == "10000");
}

TEST_CASE("client.run_plan.metrics_listen_is_passed_only_when_set") {
  CHECK_FALSE(has(plan_interchange(RunSettings{}, "/d", "/r", kBins).argv, "--metrics-listen"));
  RunSettings rs;
  rs.metrics_listen = "127.0.0.1:9464";
  CHECK(after(plan_interchange(rs, "/d", "/r", kBins).argv, "--metrics-listen") ==
        "127.0.0.1:9464");
}

TEST_CASE("client.run_plan.window_and_reopen_failed_are_passed_only_when_set") {
  CHECK_FALSE(has(plan_interchange(RunSettings{}, "/d", "/r", kBins).argv, "--window"));
  CHECK_FALSE(has(plan_interchange(RunSettings{}, "/d", "/r", kBins).argv, "--reopen-failed"));
  const auto p = plan_interchange(RunSettings{.window = 64, .reopen_failed = 7}, "/d", "/r", kBins);
  CHECK(after(p.argv, "--window") == "64");
  CHECK(after(p.argv, "--reopen-failed") == "7");
}

TEST_CASE("client.run_plan.ipc_listens_in_the_private_folder_without_keys") {
  const auto p = plan_interchange(RunSettings{.transport = Transport::Ipc}, "/d", "/r", kBins);
  CHECK(after(p.argv, "--client-endpoint") == "ipc:///tmp/fanout-ipc-x/client");
  CHECK(after(p.argv, "--pool-endpoint") == "ipc:///tmp/fanout-ipc-x/pool");
  CHECK_FALSE(p.security.insecure);
  CHECK(p.security.keys_dir.empty());
  CHECK(p.pool_security.empty());
  CHECK(p.keys == KeysAction::None);
}

TEST_CASE("client.run_plan.tcp_is_plaintext_for_the_client_and_the_pools") {
  const auto p = plan_interchange(RunSettings{.transport = Transport::Tcp}, "/d", "/r", kBins);
  CHECK(p.security.insecure);
  CHECK(p.pool_security == Argv{"--insecure"});
  CHECK(has(p.argv, "--insecure"));
  CHECK_FALSE(has(p.argv, "--client-endpoint"));
}

TEST_CASE("client.run_plan.curve_without_a_key_folder_makes_fresh_keys_in_the_run_folder") {
  const auto p = plan_interchange(RunSettings{.transport = Transport::Curve}, "/d", "/r", kBins);
  CHECK(p.security.keys_dir == "/r/keys");
  CHECK(p.keys == KeysAction::MakeFresh);
  CHECK(p.pool_security == Argv{"--keys", "/r/keys"});
  CHECK(after(p.argv, "--keys") == "/r/keys");
}

TEST_CASE("client.run_plan.curve_with_the_users_key_folder_makes_it_only_when_missing") {
  RunSettings rs{.transport = Transport::Curve, .keys_dir = "/home/u/.fanout/keys"};
  EmbeddedFacts missing = kBins;
  CHECK(plan_interchange(rs, "/d", "/r", missing).keys == KeysAction::Make);
  EmbeddedFacts there = kBins;
  there.keys_exist = true;
  const auto p = plan_interchange(rs, "/d", "/r", there);
  CHECK(p.keys == KeysAction::None);
  CHECK(p.pool_security == Argv{"--keys", "/home/u/.fanout/keys"});
}

TEST_CASE("client.run_plan.a_pool_address_adds_a_tcp_pool_endpoint_on_it") {
  RunSettings rs{.transport = Transport::Curve, .pool_address = "10.0.0.5"};
  const auto p = plan_interchange(rs, "/d", "/r", kBins);
  CHECK(after(p.argv, "--pool-endpoint") == "tcp://10.0.0.5:*");
}

// ---- the pools ----

TEST_CASE("client.run_plan.pools_connect_to_the_pool_endpoint_with_the_run_settings") {
  RunSettings rs;
  rs.prefetch = 3;
  rs.poll_ms = 25;
  rs.workers = 4;
  const auto argv = plan_pool_argv(rs, "/bin/fanout-pool", "ipc:///x/pool", {});
  CHECK(argv.front() == "/bin/fanout-pool");
  CHECK(after(argv, "--interchange") == "ipc:///x/pool");
  CHECK(after(argv, "--prefetch") == "3");
  CHECK(after(argv, "--poll-ms") == "25");
  CHECK(after(argv, "--workers") == "4");
  CHECK(has(argv, "--exit-on-lost"));
  CHECK_FALSE(has(argv, "--python"));
  CHECK_FALSE(has(argv, "--resource-monitor-interval"));
}

TEST_CASE("client.run_plan.pools_get_the_memory_and_recycling_flags_only_when_set") {
  RunSettings rs;
  const auto plain = plan_pool_argv(rs, "p", "e", {});
  CHECK_FALSE(has(plain, "--mem-per-worker"));
  CHECK_FALSE(has(plain, "--worker-memory-limit"));
  CHECK_FALSE(has(plain, "--max-minibatches-per-worker"));
  rs.mem_per_worker_gib = 1.5;
  rs.worker_memory_limit_bytes = 200ull * 1024 * 1024;
  rs.max_minibatches_per_worker = 3;
  const auto argv = plan_pool_argv(rs, "p", "e", {});
  CHECK(after(argv, "--mem-per-worker") == "1.5");
  CHECK(after(argv, "--worker-memory-limit") == "204800kb");
  CHECK(after(argv, "--max-minibatches-per-worker") == "3");
}

TEST_CASE("client.run_plan.pools_get_warm_python_only_when_the_settings_say") {
  RunSettings rs;
  CHECK_FALSE(has(plan_pool_argv(rs, "p", "e", {}), "--warm-python"));
  rs.warm_python = true;
  CHECK(has(plan_pool_argv(rs, "p", "e", {}), "--warm-python"));
}

TEST_CASE("client.run_plan.pools_of_zero_workers_take_the_nodes_cores") {
  RunSettings rs;
  rs.workers = 0;
  CHECK_FALSE(has(plan_pool_argv(rs, "p", "e", {}), "--workers"));
}

TEST_CASE("client.run_plan.pools_get_the_security_flags_python_and_monitor_interval") {
  RunSettings rs;
  rs.python = "/usr/bin/python3";
  rs.resource_monitor_interval_s = 2.5;
  const auto argv = plan_pool_argv(rs, "p", "e", {"--keys", "/k"});
  CHECK(after(argv, "--keys") == "/k");
  CHECK(after(argv, "--python") == "/usr/bin/python3");
  CHECK(after(argv, "--resource-monitor-interval") == "2.5");
}

TEST_CASE("client.run_plan.a_wildcard_pool_endpoint_is_reached_by_the_host_name") {
  CHECK(pool_endpoint_for("tcp://0.0.0.0:4002", "node7") == "tcp://node7:4002");
  CHECK(pool_endpoint_for("tcp://*:4002", "node7") == "tcp://node7:4002");
  CHECK(pool_endpoint_for("tcp://10.0.0.5:4002", "node7") == "tcp://10.0.0.5:4002");
  CHECK(pool_endpoint_for("ipc:///x/pool", "node7") == "ipc:///x/pool");
}

TEST_CASE("client.run_plan.slurm_launches_pools_as_batch_jobs_anything_else_locally") {
  RunSettings rs;
  CHECK(plan_launcher(rs) == LauncherKind::Local);
  rs.launch.kind = "slurm";
  CHECK(plan_launcher(rs) == LauncherKind::Slurm);
}

// ---- a guest of the store's owner ----

TEST_CASE("client.run_plan.a_guest_connects_as_the_owners_ready_file_says") {
  const auto insecure = plan_guest({.client = "tcp://h:1", .security = "insecure"});
  CHECK(insecure.security.insecure);
  CHECK(insecure.pool_flags == Argv{"--insecure"});
  const auto curve = plan_guest({.client = "tcp://h:1", .security = "curve", .keys = "/k"});
  CHECK(curve.security.keys_dir == "/k");
  CHECK(curve.pool_flags == Argv{"--keys", "/k"});
  const auto ipc = plan_guest({.client = "ipc:///x/client", .security = "ipc"});
  CHECK_FALSE(ipc.security.insecure);
  CHECK(ipc.pool_flags.empty());
}

TEST_CASE("client.run_plan.local_pools_number_their_workers_apart") {
  // A count known to the client: each pool is given its first process number.
  CHECK(numbering_args(0, 3) == Argv{"--first-process", "1"});
  CHECK(numbering_args(1, 3) == Argv{"--first-process", "4"});
  // No count (the pools count theirs from their devices or cores, as on a GPU machine): each
  // pool after the first is told its index, and numbers from index x its count + 1.
  CHECK(numbering_args(0, 0).empty());
  CHECK(numbering_args(1, 0) == Argv{"--pool-index", "1"});
  CHECK(numbering_args(2, 0) == Argv{"--pool-index", "2"});
}
