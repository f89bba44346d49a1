// A chaos run. A real job of 3,000 one-file mini-batches on a standalone
// interchange with two pools of two workers, followed by `fanout run --interchange`, while the
// test SIGKILLs workers, pools and the interchange in a random order (12 kills, within at most
// 150 s), starting pools and the interchange again on the same endpoints. Then: the
// client exits 0, every row is in the output exactly once, every mini-batch succeeded once, and
// the reports are complete. The seed is printed; FANOUT_CHAOS_SEED=<seed> replays the same
// choices (the timing of a busy machine still varies).
#include <doctest/doctest.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>
#include <thread>

#include "csv_parse.hpp"
#include "job_fixture.hpp"

using namespace fanout::test;
namespace fs = std::filesystem;

namespace {

// The worker processes of a pool: its children.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::istringstream in(
      read_text("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
  long long c = 0;
  while (in >> c) out.push_back(static_cast<pid_t>(c));
  return out;
}

}  // namespace

TEST_CASE("integration.chaos.kills_of_workers_pools_and_the_interchange_lose_and_repeat_no_row") {
  std::uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("FANOUT_CHAOS_SEED"); s != nullptr && *s != '\0') {
    seed = std::stoull(s);
  }
  std::fprintf(stderr, "it_chaos: FANOUT_CHAOS_SEED=%llu\n", static_cast<unsigned long long>(seed));
  MESSAGE("FANOUT_CHAOS_SEED=" << seed);
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  TempDir dir("chaos");
  const std::string db = dir / "fanout.db";
  const unsigned files = 3000;
  make_files(dir / "data", files);
  write_file(dir / "src/score.py", kCountingScript);
  JobSpec job = counting_job_spec("chaos", dir / "runs.txt", "0.03");
  job.max_retries = 20;  // kills use tries
  write_file(dir / "job.yaml", job_yaml(job));

  const std::vector<std::string> beats = {
      "--heartbeat-period-ms", "200", "--heartbeat-threshold-ms", "2000", "--window", "400"};
  Cluster cl;
  cl.start_interchange(dir.path(), db, beats);
  const std::vector<std::string> names = {"pool-a", "pool-b"};
  std::vector<std::size_t> slot;  // index in cl.pools of each name's current process
  for (const auto& n : names) {
    cl.start_pool(dir.path(), n, 2);
    slot.push_back(cl.pools.size() - 1);
  }
  auto client = start_run(dir / "job.yaml", db, cl.client_ep, dir / "client");

  // The chaos: 12 kills in an order drawn from the seed (2 of the interchange, 3 of a pool, 7 of
  // a worker), 0.3 to 2 s apart, for at most 150 s; it stops early when the job has ended.
  std::vector<int> kinds = {2, 2, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  std::shuffle(kinds.begin(), kinds.end(), rng);
  int worker_kills = 0, pool_kills = 0, ix_kills = 0;
  std::string events;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  for (std::size_t i = 0; i < kinds.size() && std::chrono::steady_clock::now() < until; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(pick(300, 2000)));
    if (client.poll()) break;
    const int what = kinds[i];
    if (what == 0) {
      const std::size_t p = static_cast<std::size_t>(pick(0, 1));
      auto kids = children_of(cl.pools[slot[p]].pid());
      if (kids.empty()) continue;
      const pid_t victim =
          kids[static_cast<std::size_t>(pick(0, static_cast<int>(kids.size()) - 1))];
      ::kill(victim, SIGKILL);
      ++worker_kills;
      events += "worker " + std::to_string(victim) + " of " + names[p] + "; ";
    } else if (what == 1) {
      const std::size_t p = static_cast<std::size_t>(pick(0, 1));
      cl.pools[slot[p]].signal(SIGKILL);
      (void)cl.pools[slot[p]].wait_for(std::chrono::seconds(10));
      std::this_thread::sleep_for(std::chrono::milliseconds(pick(0, 1500)));
      cl.start_pool(dir.path(), names[p], 2);
      slot[p] = cl.pools.size() - 1;
      ++pool_kills;
      events += names[p] + "; ";
    } else {
      cl.interchange.signal(SIGKILL);
      (void)cl.interchange.wait_for(std::chrono::seconds(10));
      std::this_thread::sleep_for(std::chrono::milliseconds(pick(0, 1500)));
      cl.restart_interchange(dir.path(), db, beats);
      ++ix_kills;
      events += "interchange; ";
    }
  }
  std::fprintf(stderr, "it_chaos: killed %d workers, %d pools, the interchange %d times: %s\n",
               worker_kills, pool_kills, ix_kills, events.c_str());

  auto st = client.wait_for(std::chrono::seconds(400));
  INFO("seed " << seed << "; kills: " << events << "\nclient stderr:\n"
               << read_text(dir / "client.err") << cl.logs());
  REQUIRE(st.has_value());
  CHECK(st->code == 0);

  // Every row exactly once, every mini-batch succeeded once.
  check_rows_once(dir / "out.txt", files);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == files);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == files);
  CHECK(sql_int(db, "select count(distinct minibatch_id) from attempts where status='RUN_DONE'") ==
        files);
  CHECK(sql_int(db, "select sum(output_bytes) from minibatches") ==
        static_cast<long long>(fs::file_size(dir / "out.txt")));

  // The reports are complete: written (and recorded), one CSV line per attempt, no leftovers.
  REQUIRE(wait_until([&] { return sql_int(db, "select reported is not null from jobs") == 1; },
                     std::chrono::seconds(60)));
  const std::string logs = sql_column(db, "select log_dir from jobs where id=1").at(0);
  CHECK(read_text(logs + "/job_result.txt").find("succeeded") != std::string::npos);
  CHECK(fs::exists(logs + "/report.html"));
  CHECK(static_cast<long long>(
            parse_csv(read_text(logs + "/sys/job_report/processed_mini-batches.csv")).size()) ==
        sql_int(db, "select count(*) from attempts") + 1);
  CHECK(temporaries_under(logs) == 0);
  // One pools row per pool, however often it registered.
  CHECK(sql_int(db, "select count(*) from pools") == 2);

  cl.interchange.signal(SIGTERM);
  (void)cl.interchange.wait_for(std::chrono::seconds(30));
}
