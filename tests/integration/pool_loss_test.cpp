// Lost pools through the real binaries: two pools on one standalone interchange, one
// SIGKILLed (or frozen with SIGSTOP) while it runs attempts. The job completes on the other with
// every row exactly once; the lost work is visible as POOL_LOST attempts; a pool that comes back
// under the same name registers again, and what a frozen pool sends for work already reassigned
// is discarded, never written twice.
#include <doctest/doctest.h>
#include <signal.h>

#include "fanout/util/clock.hpp"
#include "job_fixture.hpp"

using namespace fanout::test;

namespace {

const std::vector<std::string> kFastBeats = fast_beats("1500");

// A counting job of `files` files (runs napping `nap` s) on a standalone interchange with two
// pools, pool-a and pool-b (all three started with `beats`). Returns the client once pool-a is
// busy: it has finished `done` attempts and, with work still pending, holds running ones.
fanout::ChildProcess start_two_pools_busy(const TempDir& dir, const std::string& db,
                                          const std::vector<std::string>& beats, Cluster& cl,
                                          unsigned files = 40, const std::string& nap = "0.2",
                                          long long done = 2) {
  make_counting_job(dir.path(), "pool-loss", files, nap);
  cl.start_interchange(dir.path(), db, beats);
  cl.start_pool(dir.path(), "pool-a", 2, beats);
  cl.start_pool(dir.path(), "pool-b", 2, beats);
  auto client = start_run(dir / "job.yaml", db, cl.client_ep, dir / "client");
  REQUIRE(wait_until(
      [&] {
        return sql_int(db,
                       "select count(*) from attempts where pool='pool-a' and "
                       "status='RUN_DONE'") >= done &&
               sql_int(db, "select count(*) from minibatches where state='pending'") > 4;
      },
      std::chrono::seconds(60)));
  return client;
}

}  // namespace

TEST_CASE("integration.pool_loss.killed_pool_work_requeued_and_pool_reregisters") {
  TempDir dir("poolkill");
  const std::string db = dir / "fanout.db";
  Cluster cl;
  auto client = start_two_pools_busy(dir, db, kFastBeats, cl);
  cl.pools[0].signal(SIGKILL);
  (void)cl.pools[0].wait_for(std::chrono::seconds(10));

  auto st = client.wait_for(std::chrono::seconds(180));
  INFO("client stderr:\n" << read_text(dir / "client.err") << cl.logs());
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  check_rows_once(dir / "out.txt", 40);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 40);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 40);
  // The work pool-a held became POOL_LOST attempts: running and queued, 2 workers and no
  // configured prefetch, plus one task per worker that a pool holds once it has seen that the
  // job's tasks (0.2 s) take under a second.
  const auto lost = sql_int(db, "select count(*) from attempts where status='POOL_LOST'");
  CHECK(lost >= 1);
  CHECK(lost <= 4);
  CHECK(sql_int(db,
                "select count(*) from attempts where status='POOL_LOST' and "
                "error_message like '%pool-a%lost%'") == lost);
  CHECK(sql_int(db,
                "select count(*) from attempts where status not in "
                "('RUN_DONE','POOL_LOST')") == 0);
  // Every lost mini-batch succeeded on its next try.
  CHECK(sql_int(db,
                "select count(*) from attempts a join attempts b on a.job_id=b.job_id and "
                "a.minibatch_id=b.minibatch_id and b.attempt=a.attempt+1 where "
                "a.status='POOL_LOST' and b.status='RUN_DONE'") == lost);
  CHECK(sql_column(db, "select state from pools where name='pool-a'") ==
        std::vector<std::string>{"lost"});

  // pool-a comes back under the same name: it registers again, counted in its one pools row.
  cl.start_pool(dir.path(), "pool-a", 2, kFastBeats);
  CHECK(wait_until([&] { return pool_connected(db, "pool-a"); }, std::chrono::seconds(30)));
  CHECK(sql_int(db, "select count(*) from pools where name='pool-a'") == 1);
  CHECK(sql_int(db, "select registrations from pools where name='pool-a'") == 2);
  CHECK(!cl.interchange.poll().has_value());
}

// A pool stopped with SIGTERM drains: its running tasks finish, and it says goodbye
// (PoolLeaving), handing back what it had not started: the interchange records it `gone`, not
// `lost`, and requeues that at once with no try used, so nothing is counted failed. (The
// minute-long heartbeat threshold keeps silence out of the picture.)
TEST_CASE("integration.pool_loss.terminated_pool_says_goodbye_its_work_requeued_at_once") {
  TempDir dir("poolterm");
  const std::string db = dir / "fanout.db";
  Cluster cl;
  auto client = start_two_pools_busy(
      dir, db, {"--heartbeat-period-ms", "200", "--heartbeat-threshold-ms", "60000"}, cl);
  cl.pools[0].signal(SIGTERM);
  auto pool_st = cl.pools[0].wait_for(std::chrono::seconds(20));
  REQUIRE(pool_st.has_value());
  CHECK(pool_st->code == 0);

  // Well inside the 60 s threshold: the job ends on pool-b.
  auto st = client.wait_for(std::chrono::seconds(40));
  INFO("client stderr:\n" << read_text(dir / "client.err") << cl.logs());
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  check_rows_once(dir / "out.txt", 40);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 40);
  CHECK(sql_column(db, "select state from pools where name='pool-a'") ==
        std::vector<std::string>{"gone"});
  // Nothing failed: one successful attempt per mini-batch, each file run once.
  CHECK(sql_int(db, "select count(*) from attempts where status<>'RUN_DONE'") == 0);
  CHECK(read_lines(dir / "runs.txt").size() == 40);
  CHECK(read_text(dir / "pool-a.log").find("said goodbye") != std::string::npos);
  CHECK(!cl.interchange.poll().has_value());
}

TEST_CASE("integration.pool_loss.frozen_pool_declared_lost_its_late_results_discarded") {
  TempDir dir("poolfreeze");
  const std::string db = dir / "fanout.db";
  Cluster cl;
  // 24 files: with 4 workers and one more task each held by the pools (0.5 s tasks), work is
  // still pending after pool-a's first results.
  auto client = start_two_pools_busy(dir, db, kFastBeats, cl, 24, "0.5", 1);
  // Frozen: its workers finish their runs, but the pool neither reads nor sends.
  cl.pools[0].signal(SIGSTOP);
  const bool declared_lost = wait_until(
      [&] { return sql_int(db, "select count(*) from attempts where status='POOL_LOST'") >= 1; },
      std::chrono::seconds(60));
  cl.pools[0].signal(SIGCONT);
  INFO(cl.logs());
  REQUIRE(declared_lost);
  const auto lost_mbs =
      sql_column(db, "select minibatch_id from attempts where status='POOL_LOST'");

  auto st = client.wait_for(std::chrono::seconds(180));
  INFO("client stderr:\n" << read_text(dir / "client.err"));
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  // The thawed pool sends what its workers finished meanwhile (work that was reassigned): it is
  // refused, as the pool is no longer registered, so each row is written once although a
  // mini-batch may have run on both pools.
  check_rows_once(dir / "out.txt", 24);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 24);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 24);
  CHECK(read_lines(dir / "runs.txt").size() >= 24);
  CHECK(!lost_mbs.empty());
  // It was told it is not registered, and registered again.
  CHECK(wait_until([&] { return pool_connected(db, "pool-a"); }, std::chrono::seconds(30)));
  CHECK(sql_int(db, "select registrations from pools where name='pool-a'") == 2);
}

TEST_CASE("integration.pool_loss.pool_backs_off_while_interchange_is_away_then_reregisters") {
  TempDir dir("backoff");
  const std::string db = dir / "fanout.db";
  Cluster cl;
  cl.start_interchange(dir.path(), db, fast_beats("1000"));
  cl.start_pool(dir.path(), "pool-stay", 1);
  cl.start_pool(dir.path(), "pool-embedded", 1, {"--exit-on-lost"});
  REQUIRE(wait_until(
      [&] { return sql_int(db, "select count(*) from pools where state='connected'") == 2; },
      std::chrono::seconds(30)));
  cl.interchange.signal(SIGKILL);
  (void)cl.interchange.wait_for(std::chrono::seconds(10));

  // The --exit-on-lost pool exits; the other asks again, less and less often.
  auto st = cl.pools[1].wait_for(std::chrono::seconds(60));
  REQUIRE(st.has_value());
  CHECK(st->code == 1);
  INFO(cl.logs());
  CHECK(wait_until(
      [&] { return read_text(cl.pool_logs[0]).find("waiting 8000 ms") != std::string::npos; },
      std::chrono::seconds(90)));
  const std::string log = read_text(cl.pool_logs[0]);
  const auto w2 = log.find("waiting 2000 ms"), w4 = log.find("waiting 4000 ms");
  CHECK(w2 != std::string::npos);
  CHECK(w4 != std::string::npos);
  CHECK(w2 < w4);
  CHECK(!cl.pools[0].poll().has_value());

  // The interchange comes back on the same endpoints: the pool registers again.
  cl.restart_interchange(dir.path(), db, fast_beats("1000"));
  CHECK(wait_until(
      [&] {
        return pool_connected(db, "pool-stay") &&
               sql_int(db, "select registrations from pools where name='pool-stay'") == 2;
      },
      std::chrono::seconds(60)));
}

// The embedded default has no other pool to give the work to: `fanout run` must say that its
// pools are gone (naming the pool's log) instead of following a job nothing runs, and the job
// is left for `fanout resume`, which finishes it with every row once.
TEST_CASE("integration.pool_loss.embedded_run_reports_its_pools_gone_and_resume_finishes") {
  TempDir dir("pool-loss-embedded");
  make_counting_job(dir.path(), "pool-loss", 40, "0.1");
  const std::string db = dir / "fanout.db";
  auto client = start_run(dir / "job.yaml", db, "", dir / "client");
  // The pool records its pid when it registers; kill it once some work is committed (-1 while
  // the store is not created yet).
  REQUIRE(wait_until(
      [&] {
        return sql_int_or(db, "select count(*) from minibatches where state='succeeded'") >= 3;
      },
      std::chrono::seconds(60)));
  const long long pool_pid = sql_int(db, "select pid from pools order by id desc limit 1");
  REQUIRE(pool_pid > 0);
  REQUIRE(::kill(static_cast<pid_t>(pool_pid), SIGKILL) == 0);

  auto st = client.wait_for(std::chrono::seconds(60));
  REQUIRE(st.has_value());
  const std::string err = read_text(dir / "client.err");
  INFO("client stderr:\n" << err);
  CHECK(st->code != 0);
  CHECK(err.find("every pool exited") != std::string::npos);
  CHECK(err.find("pool01.log") != std::string::npos);
  CHECK(err.find("fanout resume 1") != std::string::npos);
  CHECK(sql_int(db, "select count(*) from jobs where id=1 and state='running'") == 1);

  auto r =
      run_capture({fanout_bin(), "resume", "1", "--db", db, "--python", python_bin()}, dir.path());
  INFO("resume stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  check_rows_once(dir / "out.txt", 40);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 40);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 40);
}

// A pool that knows when its allocation ends (--walltime-end; SLURM_JOB_END_TIME on Slurm)
// takes no mini-batch that would not finish a margin before it, and leaves then by itself,
// handing back what it holds: no attempt is lost, no try spent, and the job finishes on the
// other pool. (The minute-long heartbeat threshold keeps silence out of the picture.)
TEST_CASE("integration.pool_loss.pool_leaves_before_its_walltime_with_no_try_spent") {
  TempDir dir("poolwalltime");
  const std::string db = dir / "fanout.db";
  const std::vector<std::string> beats = {"--heartbeat-period-ms", "200",
                                          "--heartbeat-threshold-ms", "60000"};
  Cluster cl;
  make_counting_job(dir.path(), "pool-walltime", 120, "0.5");
  cl.start_interchange(dir.path(), db, beats);
  auto walltime = beats;
  walltime.insert(walltime.end(), {"--walltime-end",
                                   std::to_string(static_cast<long long>(fanout::unix_now()) + 20),
                                   "--walltime-margin-s", "5"});
  cl.start_pool(dir.path(), "pool-a", 2, walltime);
  cl.start_pool(dir.path(), "pool-b", 2, beats);
  auto client = start_run(dir / "job.yaml", db, cl.client_ep, dir / "client");

  // pool-a leaves on its own, well before the job ends.
  auto pool_st = cl.pools[0].wait_for(std::chrono::seconds(60));
  INFO(cl.logs());
  REQUIRE(pool_st.has_value());
  CHECK(pool_st->code == 0);
  CHECK(read_text(dir / "pool-a.log").find("walltime") != std::string::npos);

  auto st = client.wait_for(std::chrono::seconds(180));
  INFO("client stderr:\n" << read_text(dir / "client.err"));
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  check_rows_once(dir / "out.txt", 120);
  CHECK(sql_column(db, "select state from pools where name='pool-a'") ==
        std::vector<std::string>{"gone"});
  // pool-a did work, and nothing failed: one successful attempt per mini-batch.
  CHECK(sql_int(db, "select count(*) from attempts where pool='pool-a'") >= 1);
  CHECK(sql_int(db, "select count(*) from attempts where status<>'RUN_DONE'") == 0);
  CHECK(read_lines(dir / "runs.txt").size() == 120);
  CHECK(!cl.interchange.poll().has_value());
}
