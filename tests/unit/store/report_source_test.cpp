// Tests for the report views (migration 2) and store::ReportSource
// (src/fanout/store/report_source.hpp): the views agree with the tables, and each report table
// returns its rows with the columns the CSV headers name. docs/store.md sections 7 and 8.
#include "fanout/store/report_source.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fanout/store/schema.hpp"
#include "fanout/util/error.hpp"

#include "report_fixtures.hpp"
#include "scratch_dir.hpp"

using fanout::ErrorCode;
using fanout::Failure;
using fanout::test::column;
using fanout::test::make_report_store;
using fanout::test::ScratchDir;
namespace store = fanout::store;

TEST_CASE("store.report_source.views_agree_with_the_tables") {
  ScratchDir dir;
  const std::string db = dir.file("fanout.db");
  make_report_store(db);
  CHECK(column(db, "PRAGMA user_version")[0] == std::to_string(store::kSchemaVersion));
  // processed_minibatches: one row per attempt, detail joined in.
  CHECK(column(db, "SELECT count(*) FROM processed_minibatches WHERE job_id = 1")[0] == "4");
  CHECK(column(db, "SELECT process FROM processed_minibatches WHERE attempt_id = 2")[0] ==
        "pool-b/process001");
  CHECK(
      column(db, "SELECT process_start_time FROM processed_minibatches WHERE attempt_id = 2")[0] ==
      "2023-11-14T22:13:21.500Z");
  CHECK(column(db, "SELECT minibatch_detail FROM processed_minibatches WHERE attempt_id = 3")[0] ==
        R"({"files": ["e,1", "f"]})");
  CHECK(column(db, "SELECT picked_count FROM processed_minibatches WHERE attempt_id = 4")[0] ==
        "2");
  CHECK(column(db,
               "SELECT error_category || '|' || status FROM processed_minibatches "
               "WHERE attempt_id = 2")[0] == "ValueError|RUN_EXCEPTION");
  // process_summary: pool-a/process001, pool-a/process002, pool-b/process001.
  CHECK(column(db, "SELECT count(*) FROM process_summary WHERE job_id = 1")[0] == "3");
  CHECK(column(db,
               "SELECT attempts || ',' || failed_attempts || ',' || items_failed FROM "
               "process_summary WHERE process = 'pool-b/process001'")[0] == "2,1,2");
  // node_summary: one node, two pools, three processes.
  CHECK(column(db,
               "SELECT pools || ',' || processes || ',' || attempts FROM node_summary "
               "WHERE job_id = 1")[0] == "2,3,4");
  // job_progress: everything done, no ETA.
  CHECK(column(db,
               "SELECT done || ',' || total || ',' || percent_done || ',' || "
               "coalesce(eta_seconds, 'none') FROM job_progress WHERE job_id = 1")[0] ==
        "3,3,100.0,none");
  CHECK(column(db, "SELECT elapsed_seconds FROM job_progress WHERE job_id = 1")[0] == "4.0");
  // job_settings: one row per key, typed.
  CHECK(column(db, "SELECT count(*) FROM job_settings WHERE job_id = 1")[0] == "3");
  CHECK(column(db, "SELECT value FROM job_settings WHERE job_id = 1 AND key = 'prefetch'")[0] ==
        "3");
  CHECK(column(db, "SELECT type FROM job_settings WHERE key = 'timeout_s'")[0] == "real");
  // Samples: the worker of another job (9) is not recorded for job 1.
  CHECK(column(db, "SELECT count(*) FROM node_resource_samples WHERE job_id = 1")[0] == "4");
  CHECK(column(db, "SELECT count(*) FROM process_resource_samples")[0] == "4");
  CHECK(column(db, "SELECT count(*) FROM disk_usage_samples WHERE job_id = 1")[0] == "4");
}
