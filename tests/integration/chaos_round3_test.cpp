// What a chaos run found around crash recovery, each through the real binaries: a pool frozen
// by SIGSTOP past the heartbeat threshold wakes and carries on (it does not take its own freeze
// for the interchange's silence); a `fanout run` whose interchange is gone exits promptly on
// SIGTERM; a user's print loop is capped per log file. (A full logs folder needs root to mount a
// tmpfs: it is in it_storage_failure.)
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

#include "job_fixture.hpp"

using namespace fanout::test;
namespace fs = std::filesystem;

namespace {

// The children of `pid` whose command name is `comm`.
std::vector<pid_t> children_named(pid_t pid, const std::string& comm) {
  std::vector<pid_t> out;
  std::istringstream in(
      read_text("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
  long long c = 0;
  while (in >> c) {
    std::string name = read_text("/proc/" + std::to_string(c) + "/comm");
    while (!name.empty() && name.back() == '\n') name.pop_back();
    if (name == comm) out.push_back(static_cast<pid_t>(c));
  }
  return out;
}

}  // namespace

TEST_CASE("integration.chaos_round3.a_pool_frozen_past_the_threshold_wakes_and_goes_on") {
  TempDir dir("freeze");
  const std::string db = dir / "fanout.db";
  // Heartbeats every 0.5 s, a pool lost after 3 s of silence: the 8 s freeze is well past it.
  make_counting_job(dir.path(), "freeze", 30, "0.3",
                    "fanout:\n  heartbeat_period_ms: 500\n  heartbeat_threshold_ms: 3000\n");
  auto client = start_run(dir / "job.yaml", db, "", dir / "client");
  REQUIRE(wait_until([&] { return read_lines(dir / "runs.txt").size() >= 2; },
                     std::chrono::seconds(60)));
  const auto pools = children_named(client.pid(), "fanout-pool");
  REQUIRE(pools.size() == 1);
  ::kill(pools[0], SIGSTOP);
  std::this_thread::sleep_for(std::chrono::seconds(8));
  ::kill(pools[0], SIGCONT);

  auto st = client.wait_for(std::chrono::seconds(120));
  INFO("client stderr:\n" << read_text(dir / "client.err"));
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  check_rows_once(dir / "out.txt", 30);
}

TEST_CASE("integration.chaos_round3.a_run_whose_interchange_is_gone_exits_on_sigterm") {
  TempDir dir("ixgone");
  const std::string db = dir / "fanout.db";
  make_counting_job(dir.path(), "ix-gone", 6, "60");
  Cluster cl;
  cl.start_interchange(dir.path(), db);
  cl.start_pool(dir.path(), "pool-a", 1);
  auto client = start_run(dir / "job.yaml", db, cl.client_ep, dir / "client");
  REQUIRE(
      wait_until([&] { return !read_text(dir / "runs.txt").empty(); }, std::chrono::seconds(60)));
  cl.interchange.signal(SIGKILL);
  REQUIRE(cl.interchange.wait_for(std::chrono::seconds(10)).has_value());
  const auto t0 = std::chrono::steady_clock::now();
  client.signal(SIGTERM);
  auto st = client.wait_for(std::chrono::seconds(40));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("client stderr:\n" << read_text(dir / "client.err") << "\ntook " << took << " s");
  REQUIRE(st.has_value());
  CHECK(st->code == 3);
  CHECK(read_text(dir / "client.err").find("did not answer") != std::string::npos);
  for (auto& p : cl.pools) p.signal(SIGKILL);
}

TEST_CASE("integration.chaos_round3.a_users_print_loop_is_capped_per_log_file") {
  TempDir dir("logcap");
  const std::string db = dir / "fanout.db";
  make_files(dir / "data", 2);
  // 3 MB on stdout per mini-batch, then a pause in which the pool looks at the file.
  write_file(dir / "src/score.py", R"PY(
import os, sys, time
def run(mini_batch):
    for _ in range(3 * 1024):
        sys.stdout.write("y" * 1023 + "\n")
    sys.stdout.flush()
    time.sleep(5)
    return [os.path.basename(mini_batch[0])]
)PY");
  write_file(dir / "job.yaml", counting_job_yaml("log-cap", dir / "runs.txt", "0"));
  Cluster cl;
  cl.start_interchange(dir.path(), db);
  cl.start_pool(dir.path(), "pool-a", 2, {"--max-user-log-mb", "1"});
  auto r = run_capture(run_argv(dir / "job.yaml", db, cl.client_ep), dir.path(), {},
                       std::chrono::seconds(180));
  INFO("client stderr:\n" << r.err << cl.logs());
  CHECK(r.status.code == 0);
  const std::string logs = sql_column(db, "select log_dir from jobs where id=1").at(0);
  std::size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(logs + "/user/stdout")) {
    if (!e.is_regular_file()) continue;
    ++files;
    INFO(e.path().string());
    CHECK(fs::file_size(e.path()) <= 1024 * 1024 + 512);
    CHECK(read_text(e.path().string()).find("reached its cap of 1 MB") != std::string::npos);
  }
  CHECK(files >= 1);
  const std::string pool_log = read_text(cl.pool_logs.at(0));
  CHECK(pool_log.find("reached its cap of 1 MB") != std::string::npos);
  cl.interchange.signal(SIGTERM);
  (void)cl.interchange.wait_for(std::chrono::seconds(30));
}
