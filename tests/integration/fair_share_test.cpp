// Several jobs on one interchange share its pools: a small job submitted
// behind a large one starts on the next free worker and ends long before the large one; ten
// jobs at once all finish with their rows exactly once.
#include <csignal>

#include <doctest/doctest.h>

#include "job_fixture.hpp"

using namespace fanout::test;

namespace {

// A counting job of `files` files in its own folder under `dir`, run against `cl` by a client.
struct Submitted {
  std::string folder;
  fanout::ChildProcess client;
};

Submitted submit(const TempDir& dir, const Cluster& cl, const std::string& db,
                 const std::string& name, unsigned files, const std::string& nap) {
  const std::string folder = dir / name;
  make_counting_job(folder, name, files, nap);
  return Submitted{folder, start_run(folder + "/job.yaml", db, cl.client_ep, folder + "/client")};
}

long long job_done(const std::string& db, const std::string& name) {
  return sql_int(db,
                 "select count(*) from minibatches m join jobs j on j.id=m.job_id where "
                 "j.name='" +
                     name + "' and m.state='succeeded'");
}

}  // namespace

TEST_CASE("integration.fair_share.small_job_behind_a_large_one_finishes_first") {
  TempDir dir("fairshare");
  const std::string db = dir / "fanout.db";
  Cluster cl;
  cl.start_interchange(dir.path(), db);
  cl.start_pool(dir.path(), "pool-a", 2);
  auto big = submit(dir, cl, db, "big", 300, "0.1");
  REQUIRE_MESSAGE(wait_until([&] { return job_done(db, "big") >= 4; }, std::chrono::seconds(120)),
                  cl.logs());
  auto small = submit(dir, cl, db, "small", 4, "0.1");
  auto st = small.client.wait_for(std::chrono::seconds(120));
  INFO(read_text(small.folder + "/client.err") << cl.logs());
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  // Oldest-first dispatch would have kept the small job queued until the large one's 300
  // mini-batches had all started; with a fair share it ends while most of those still wait.
  CHECK(sql_column(db, "select state from jobs where name='big'") ==
        std::vector<std::string>{"running"});
  CHECK(job_done(db, "big") < 200);
  check_rows_once(small.folder + "/out.txt", 4);
  big.client.signal(SIGINT);  // the large job is not the point: cancel it
  (void)big.client.wait_for(std::chrono::seconds(60));
}

TEST_CASE("integration.fair_share.ten_concurrent_jobs_all_finish_exactly_once") {
  TempDir dir("fairshare10");
  const std::string db = dir / "fanout.db";
  Cluster cl;
  cl.start_interchange(dir.path(), db);
  cl.start_pool(dir.path(), "pool-a", 2);
  cl.start_pool(dir.path(), "pool-b", 2);
  std::vector<Submitted> jobs;
  for (int i = 0; i < 10; ++i) {
    jobs.push_back(submit(dir, cl, db, "job" + std::to_string(i), 12, "0.02"));
  }
  for (auto& j : jobs) {
    auto st = j.client.wait_for(std::chrono::seconds(180));
    INFO(j.folder << "\n" << read_text(j.folder + "/client.err") << cl.logs());
    REQUIRE(st.has_value());
    CHECK(st->code == 0);
    check_rows_once(j.folder + "/out.txt", 12);
  }
  CHECK(sql_int(db, "select count(*) from jobs where state='succeeded'") == 10);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 120);
  CHECK(sql_int(db, "select count(*) from attempts") == 120);
}
