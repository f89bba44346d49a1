// Tests for the store's side of the report (src/fanout/store/report_queries.hpp): the rows of a
// constructed job, read through one ReportSource, as the report gets them.
#include "fanout/store/report_queries.hpp"

#include <doctest/doctest.h>

#include <string>

#include "fanout/store/db.hpp"
#include "fanout/util/error.hpp"

#include "report_history.hpp"
#include "scratch_dir.hpp"

namespace store = fanout::store;
using fanout::test::uniform;
using fanout::test::write_store;

TEST_CASE("store.report_queries.rows_of_a_job") {
  const std::string settings = R"({"mini_batch_size":"10","prefetch":0,"max_retries":3})";
  fanout::test::ScratchDir dir("queries");
  const auto path = write_store(dir, uniform(2, 3, settings, {}));
  {
    // Mini-batch 1 failed its second and last try.
    store::Db db(path, store::Db::Mode::ReadWriteCreate);
    db.exec("UPDATE minibatches SET state = 'failed', tries = 2, succeeded = 0 WHERE id = 1");
    db.exec(
        "INSERT INTO attempts (job_id, minibatch_id, attempt, status, error_message) "
        "VALUES (1, 1, 2, 'RUN_EXCEPTION', 'boom\nmore')");
  }
  store::ReportSource src(path);

  const auto job = store::read_report_job(src, 1);
  CHECK(job.name == "constructed");
  CHECK(job.state == "succeeded");
  CHECK(job.total_known);
  CHECK(job.total == 6);
  CHECK(job.started == 1000);
  CHECK(job.settings_json == settings);
  REQUIRE(job.settings.size() == 3);
  CHECK(job.settings[0] == std::pair<std::string, std::string>{"max_retries", "3"});  // by key

  try {
    (void)store::read_report_job(src, 9);
    FAIL("no job 9, yet a row");
  } catch (const fanout::Failure& f) {
    CHECK(f.error().code == fanout::ErrorCode::NotFound);
    CHECK(f.error().message.find("no job 9") != std::string::npos);
  }

  const auto c = store::read_minibatch_counts(src, 1);
  CHECK(c.submitted == 6);
  CHECK(c.succeeded == 5);
  CHECK(c.failed == 1);
  CHECK(c.items_succeeded == 50);
  CHECK(c.items_failed == 10);  // every item of the failed mini-batch

  const auto pool = store::read_pool_row(src, 1);
  REQUIRE(pool);
  CHECK(pool->state == "gone");
  CHECK(pool->workers == 2);
  CHECK_FALSE(store::read_pool_row(src, 7));

  const auto exhausted = store::read_exhausted(src, 1, 10);
  REQUIRE(exhausted.size() == 1);
  CHECK(exhausted[0].minibatch == 1);
  CHECK(exhausted[0].tries == 2);
  CHECK(exhausted[0].last == "RUN_EXCEPTION: boom\nmore");  // whole: the report cuts it

  const auto series = store::read_resource_series(src, 1, 1000, 10, 64);
  CHECK(series.nodes.empty());
  CHECK(series.processes.empty());
  src.finish();
}
