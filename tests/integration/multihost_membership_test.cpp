// Pools come and go while a job runs on many hosts: a pool started before the
// interchange backs off and registers once it is up; the job scales from 1 to 4 pool hosts as
// pools are added; a pool stopped with SIGTERM finishes its running tasks, hands back the ones
// it had not started, says goodbye, and nothing is counted as failed. Namespace hosts as in
// it_multihost (tests/netns/multihost_bed.hpp); SKIP without root.
#include "../netns/multihost_bed.hpp"

using namespace fanout::test;
using namespace fanout::test::netns;

namespace {

long long run_done_on(const std::string& db, const std::string& pool) {
  return sql_int(db,
                 "select count(*) from attempts where status='RUN_DONE' and pool='" + pool + "'");
}

bool log_has(const std::string& path, const std::string& text) {
  return read_text(path).find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("multihost.pools_before_the_interchange_scale_up_and_a_sigterm_drain") {
  require_bed_or_skip();
  TempDir dir("multihost-members");
  // 1 s tasks: long enough that the job is still running when the pools have joined and one
  // is stopped, on a busy machine too.
  constexpr unsigned kFiles = 120;
  write_counting_job(dir, kFiles, "1.0");
  MultiHost mh(dir, 5, kBeats, /*start_all=*/false);

  // host1's pool starts first: nothing listens yet, its Registers go unanswered.
  mh.start_pool(1, {}, {"--prefetch", "2"});
  REQUIRE_MESSAGE(wait_until([&] { return log_has(dir / "host1.log", "no answer to Register"); },
                             std::chrono::seconds(30)),
                  mh.logs());
  mh.start_interchange();
  REQUIRE_MESSAGE(
      wait_until([&] { return pool_connected(mh.db, "host1"); }, std::chrono::seconds(60)),
      mh.logs());

  // The job starts on one host, then three more join while it runs.
  auto client = mh.start_client();
  REQUIRE_MESSAGE(
      wait_until([&] { return run_done_on(mh.db, "host1") >= 2; }, std::chrono::seconds(90)),
      mh.logs());
  for (unsigned i = 2; i <= 4; ++i) mh.start_pool(i, {}, {"--prefetch", "2"});
  REQUIRE_MESSAGE(wait_until(
                      [&] {
                        return run_done_on(mh.db, "host2") >= 2 &&
                               run_done_on(mh.db, "host3") >= 1 && run_done_on(mh.db, "host4") >= 1;
                      },
                      std::chrono::seconds(90)),
                  mh.logs());
  REQUIRE_MESSAGE(succeeded(mh.db) < kFiles - 30, "the job ended too soon to stop a pool in it");

  // host2 is stopped mid-job: it runs two tasks and holds two more it has not started.
  mh.pools.at(2).signal(SIGTERM);
  auto pool_st = mh.pools.at(2).wait_for(std::chrono::seconds(60));
  INFO(mh.logs());
  REQUIRE(pool_st.has_value());
  CHECK(pool_st->code == 0);
  CHECK(log_has(dir / "host2.log", "stopping (signal): finishing"));
  CHECK(log_has(dir / "host2.log", "said goodbye to the interchange"));

  auto st = client.wait_for(std::chrono::seconds(240));
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  check_rows_once(dir / "out.txt", kFiles);
  // Nothing failed: every attempt succeeded, one per mini-batch, and every file ran exactly once
  // (host2's running tasks finished; its unstarted ones ran elsewhere, no try used).
  CHECK(sql_int(mh.db, "select count(*) from attempts") == kFiles);
  CHECK(sql_int(mh.db, "select count(*) from attempts where status<>'RUN_DONE'") == 0);
  CHECK(sql_int(mh.db, "select count(*) from minibatches where tries<>1") == 0);
  CHECK(read_lines(dir / "runs.txt").size() == kFiles);
  CHECK(sql_column(mh.db, "select state from pools where name='host2'") ==
        std::vector<std::string>{"gone"});
  CHECK(log_has(dir / "ix.log", "(host2 on host2) left"));
  // Every host took part, the late ones too.
  for (const char* pool : {"host1", "host2", "host3", "host4"}) {
    CHECK_MESSAGE(run_done_on(mh.db, pool) >= 1, pool);
  }
  CHECK_FALSE(mh.ix.poll().has_value());
}
