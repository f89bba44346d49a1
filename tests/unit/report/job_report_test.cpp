// Tests for report::write_job_report (src/fanout/report/job_report.hpp): every file of the logs
// folder, its headers and rows, byte-for-byte regeneration, and the errors it returns.
// docs/store.md section 8.
#include "fanout/report/job_report.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fanout/util/error.hpp"

#include "../store/report_fixtures.hpp"
#include "csv_parse.hpp"
#include "scratch_dir.hpp"

using fanout::ErrorCode;
using fanout::test::make_report_store;
using fanout::test::parse_csv;
using fanout::test::ScratchDir;
using fanout::test::slurp;
namespace report = fanout::report;

TEST_CASE("report.job_report.writes_every_file_and_regenerates_byte_for_byte") {
  ScratchDir dir;
  const std::string db = dir.file("fanout.db");
  make_report_store(db);
  const std::string out = dir.file("logs");
  auto files = report::write_job_report(db, 1, out);
  REQUIRE_MESSAGE(files.has_value(), (files ? "" : files.error().message));
  const std::vector<std::string> want = {"job_result.txt",
                                         "job_progress_overview.2023111422.txt",
                                         "sys/job_report/processed_mini-batches.csv",
                                         "sys/job_report/process_summary.csv",
                                         "sys/job_report/node_summary.csv",
                                         "sys/perf/node1/node_resource_usage.csv",
                                         "sys/perf/node1/processes_resource_usage.csv",
                                         "sys/perf/node1/node_disk_usage.csv",
                                         "job_error.txt",
                                         "user/error/node1/pool-b.process001.txt"};
  CHECK(*files == want);

  const auto pm = parse_csv(slurp(out + "/sys/job_report/processed_mini-batches.csv"));
  REQUIRE(pm.size() == 5);
  CHECK(pm[0] == std::vector<std::string>{"Mini-batch Id", "Picked Count", "Process",
                                          "Process Start Time", "Total", "Succeeded", "Failed",
                                          "Elapsed Seconds", "Process Seconds",
                                          "Run Method Seconds", "Status", "Error Category",
                                          "Error Message", "Mini-batch Detail"});
  // In attempt id order: the failing first try of mini-batch 1 is the second row, its message
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

  // ParallelRunStep's error summary: each kind with its first occurrence, and
  // each worker process's failed attempts with their whole messages.
  const std::string errors = slurp(out + "/job_error.txt");
  CHECK(errors.rfind("job_id: 1\nerrors: 1 failed attempts of 1 kinds\n\nRUN_EXCEPTION ", 0) == 0);
  CHECK(errors.find(": 1 attempts, 1 mini-batches\n  first: mini-batch 1 try 1 on "
                    "pool-b/process001 at ") != std::string::npos);
  CHECK(errors.find("\n    ValueError: bad \"row\", really\n    Traceback (most recent call "
                    "last):\n") != std::string::npos);
  const std::string proc = slurp(out + "/user/error/node1/pool-b.process001.txt");
  CHECK(proc.find(" mini-batch 1 try 1: RUN_EXCEPTION") != std::string::npos);
  CHECK(proc.find("    ValueError: bad \"row\", really\n") != std::string::npos);

  // Again, elsewhere: the same bytes.
  const std::string again = dir.file("again");
  auto files2 = report::write_job_report(db, 1, again);
  REQUIRE(files2.has_value());
  for (const auto& f : *files2) {
    CAPTURE(f);
    CHECK(slurp(out + "/" + f) == slurp(again + "/" + f));
  }
}

TEST_CASE("report.job_report.errors_name_the_store_and_job") {
  ScratchDir dir;
  auto missing = report::write_job_report(dir.file("nope.db"), 1, dir.file("out"));
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == ErrorCode::NotFound);
  CHECK(missing.error().message.find("nope.db") != std::string::npos);

  const std::string db = dir.file("fanout.db");
  make_report_store(db);
  auto no_job = report::write_job_report(db, 42, dir.file("out"));
  REQUIRE_FALSE(no_job.has_value());
  CHECK(no_job.error().code == ErrorCode::NotFound);
  CHECK(no_job.error().message.find("no job 42") != std::string::npos);
}
