// Tests for the report views (migration 2) and store::write_job_report
// (src/fanout/store/report.hpp): headers, rows agreeing with the tables, CSV quoting, resource
// samples per node, and byte-for-byte regeneration. docs/store.md sections 7 and 8.
#include "fanout/store/report.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fanout/store/db.hpp"
#include "fanout/store/task_store.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/log.hpp"

#include "csv_parse.hpp"
#include "scratch_dir.hpp"

using fanout::ErrorCode;
using fanout::store::AttemptRecord;
using fanout::store::Db;
using fanout::store::ResourceRecord;
using fanout::store::Statement;
using fanout::store::TaskStore;
namespace proto = fanout::proto;
namespace store = fanout::store;

using fanout::test::parse_csv;
using fanout::test::ScratchDir;
using fanout::test::slurp;

namespace {

namespace fs = std::filesystem;

std::vector<std::string> column(const std::string& db_path, const std::string& sql) {
  Db db(db_path, Db::Mode::ReadOnly);
  Statement st(db, sql);
  std::vector<std::string> out;
  while (st.step()) out.emplace_back(st.column_text(0));
  return out;
}

AttemptRecord attempt(std::uint64_t task_id, std::uint64_t index, std::uint32_t try_no,
                      proto::AttemptStatus status, const std::string& state,
                      const std::string& pool, const std::string& process, double start) {
  AttemptRecord rec;
  rec.pool_id = pool == "pool-b" ? 2 : 1;
  rec.pool_name = pool;
  rec.minibatch_state = state;
  auto& r = rec.result;
  r.task_id = task_id;
  r.job_id = 1;
  r.index = index;
  r.attempt = try_no;
  r.status = static_cast<std::uint8_t>(status);
  r.items = 2;
  const bool ok = status == proto::AttemptStatus::RunDone;
  r.succeeded = ok ? 2 : 0;
  r.failed = ok ? 0 : 2;
  r.node = "node1";
  r.process = process;
  r.worker_pid = pool == "pool-b" ? 200 : 100;
  r.start = start;
  r.elapsed_s = 0.5;
  r.cpu_s = 0.25;
  r.run_s = 0.375;
  if (!ok) {
    r.error_category = "ValueError";
    r.error_message = "ValueError: bad \"row\", really\nTraceback (most recent call last):\n  ...";
  }
  return rec;
}

// A finished job 1 with three mini-batches, one failing once, two pools, and samples.
void make_store(const std::string& db) {
  TaskStore st(db, fanout::make_logger("report-test", spdlog::level::off));
  proto::JobSpec spec;
  spec.name = "report-demo";
  spec.spec_path = "/jobs/demo.yaml";
  spec.log_dir = "/jobs/logs";
  spec.settings_json = R"({"mini_batch_size":"2","prefetch":3,"timeout_s":1.5})";
  st.create_job(1, spec, 1700000000.0);
  st.add_minibatches(1, {proto::MiniBatch{0, {"a", "b"}, {}}, proto::MiniBatch{1, {"c", "d"}, {}},
                         proto::MiniBatch{2, {"e,1", "f"}, {}}});
  st.set_submit_done(1, 3);
  using S = proto::AttemptStatus;
  st.record_attempt(attempt(1, 0, 1, S::RunDone, "succeeded", "pool-a", "process001", 1700000001));
  st.record_attempt(
      attempt(2, 1, 1, S::RunException, "pending", "pool-b", "process001", 1700000001.5));
  st.record_attempt(attempt(3, 2, 1, S::RunDone, "succeeded", "pool-a", "process002", 1700000002));
  st.record_attempt(attempt(4, 1, 2, S::RunDone, "succeeded", "pool-b", "process001", 1700000003));
  for (int i = 0; i < 4; ++i) {
    ResourceRecord rr;
    rr.pool_id = 1;
    rr.pool_name = "pool-a";
    rr.node = "node1";
    rr.job_ids = {1};
    rr.sample.time = 1700000001.0 + i;
    rr.sample.interval_s = 1.0;
    rr.sample.node.cpu_percent = 10.0 * i;
    rr.sample.node.mem_total_mb = 1000;
    rr.sample.processes = {proto::ProcessUsage{1, "process001", 100, 50, 20, 3, 4, 0, 0},
                           proto::ProcessUsage{9, "process002", 101, 50, 20, 3, 4, 0, 0}};
    rr.sample.disks = {proto::DiskUsage{"/", 100, 40, 60, 40}};
    st.record_resources(rr);
  }
  st.finish_job(1, "succeeded", "all mini-batches succeeded", 1700000004.0);
  st.flush();
}

}  // namespace

TEST_CASE("store.report.views_agree_with_the_tables") {
  ScratchDir dir;
  const std::string db = dir.file("fanout.db");
  make_store(db);
  CHECK(column(db, "PRAGMA user_version")[0] == "2");
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

TEST_CASE("store.report.writes_every_file_and_regenerates_byte_for_byte") {
  ScratchDir dir;
  const std::string db = dir.file("fanout.db");
  make_store(db);
  const std::string out = dir.file("logs");
  auto files = store::write_job_report(db, 1, out);
  REQUIRE_MESSAGE(files.has_value(), (files ? "" : files.error().message));
  const std::vector<std::string> want = {"job_result.txt",
                                         "job_progress_overview.2023111422.txt",
                                         "sys/job_report/processed_mini-batches.csv",
                                         "sys/job_report/process_summary.csv",
                                         "sys/job_report/node_summary.csv",
                                         "sys/perf/node1/node_resource_usage.csv",
                                         "sys/perf/node1/processes_resource_usage.csv",
                                         "sys/perf/node1/node_disk_usage.csv"};
  CHECK(*files == want);

  const auto pm = parse_csv(slurp(out + "/sys/job_report/processed_mini-batches.csv"));
  REQUIRE(pm.size() == 5);
  CHECK(pm[0] == std::vector<std::string>{"Mini-batch Id", "Picked Count", "Process",
                                          "Process Start Time", "Total", "Succeeded", "Failed",
                                          "Elapsed Seconds", "Process Seconds",
                                          "Run Method Seconds", "Status", "Error Category",
                                          "Error Message", "Mini-batch Detail"});
  // Ordered by start: the failing first try of mini-batch 1 is the second row, its message
  // with its comma, quotes and line breaks intact.
  CHECK(pm[2][0] == "1");
  CHECK(pm[2][10] == "RUN_EXCEPTION");
  CHECK(pm[2][12] == "ValueError: bad \"row\", really\nTraceback (most recent call last):\n  ...");
  CHECK(pm[3][13] == R"({"files": ["e,1", "f"]})");
  CHECK(pm[1][7] == "0.5");

  const auto nodes = parse_csv(slurp(out + "/sys/perf/node1/node_resource_usage.csv"));
  REQUIRE(nodes.size() == 5);
  CHECK(nodes[0][0] == "Time");
  CHECK(nodes[4][3] == "30.0");
  CHECK(parse_csv(slurp(out + "/sys/perf/node1/processes_resource_usage.csv")).size() == 5);

  const std::string result = slurp(out + "/job_result.txt");
  CHECK(result.find("state: succeeded\n") != std::string::npos);
  CHECK(result.find("mini_batches_total: 3\n") != std::string::npos);
  CHECK(result.find("failed_attempts: 1\n") != std::string::npos);
  CHECK(result.find("mini-batch 1 try 1 on pool-b/process001: RUN_EXCEPTION: ValueError: bad") !=
        std::string::npos);
  CHECK(slurp(out + "/job_progress_overview.2023111422.txt").find("3 of 3 done (100.0%)") !=
        std::string::npos);

  // Again, elsewhere: the same bytes.
  const std::string again = dir.file("again");
  auto files2 = store::write_job_report(db, 1, again);
  REQUIRE(files2.has_value());
  for (const auto& f : *files2) {
    CAPTURE(f);
    CHECK(slurp(out + "/" + f) == slurp(again + "/" + f));
  }
}

TEST_CASE("store.report.errors_name_the_store_and_job") {
  ScratchDir dir;
  auto missing = store::write_job_report(dir.file("nope.db"), 1, dir.file("out"));
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == ErrorCode::NotFound);
  CHECK(missing.error().message.find("nope.db") != std::string::npos);

  const std::string db = dir.file("fanout.db");
  make_store(db);
  auto no_job = store::write_job_report(db, 42, dir.file("out"));
  REQUIRE_FALSE(no_job.has_value());
  CHECK(no_job.error().code == ErrorCode::NotFound);
  CHECK(no_job.error().message.find("no job 42") != std::string::npos);
  auto status = store::read_job_status(db, 42);
  REQUIRE_FALSE(status.has_value());
  CHECK(status.error().code == ErrorCode::NotFound);
}

TEST_CASE("store.report.job_status_reads_pools_and_last_errors") {
  ScratchDir dir;
  const std::string db = dir.file("fanout.db");
  make_store(db);
  auto s = store::read_job_status(db, 1);
  REQUIRE(s.has_value());
  CHECK(s->state == "succeeded");
  CHECK(s->total == 3);
  CHECK(s->succeeded == 3);
  CHECK(s->attempts == 4);
  CHECK(s->attempts_failed == 1);
  CHECK(s->processes == 3);
  CHECK(s->pools.size() == 2);
  REQUIRE(s->last_errors.size() == 1);
  CHECK(s->last_errors[0].minibatch == 1);
  CHECK(s->last_errors[0].message == "ValueError: bad \"row\", really");
  CHECK(s->eta_s == -1);
}

TEST_CASE("store.report.csv_quoting") {
  std::string out;
  store::append_csv_field(out, "plain");
  out += '|';
  store::append_csv_field(out, "a,b");
  out += '|';
  store::append_csv_field(out, "say \"hi\"");
  out += '|';
  store::append_csv_field(out, "two\nlines");
  CHECK(out == "plain|\"a,b\"|\"say \"\"hi\"\"\"|\"two\nlines\"");
}

TEST_CASE("store.report.progress_overview_text") {
  store::ProgressOverview p;
  p.job_id = 3;
  p.name = "demo";
  p.state = "running";
  p.total_known = true;
  p.total = 10;
  p.succeeded = 3;
  p.failed = 1;
  p.items_succeeded = 30;
  p.items_failed = 10;
  p.started = 1700000000;
  p.now = 1700000008;
  const std::string t = store::format_progress_overview(p);
  CHECK(t.find("job 3 (demo): running\n") == 0);
  CHECK(t.find("mini-batches: 4 of 10 done (40.0%): 3 succeeded, 1 failed\n") != std::string::npos);
  CHECK(t.find("rate: 0.500 mini-batches/s, 5.000 items/s\n") != std::string::npos);
  CHECK(t.find("eta_seconds: 12.0\n") != std::string::npos);
  CHECK(store::progress_overview_name(1700000000) == "job_progress_overview.2023111422.txt");
}
