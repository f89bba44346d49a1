// Tests for job_result.txt (src/fanout/report/job_result.hpp): its key: value lines and its
// first errors.
#include "fanout/report/job_result.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fanout/store/report_source.hpp"

using fanout::store::FailedAttemptRow;
using fanout::store::JobResultRow;
namespace report = fanout::report;

TEST_CASE("report.job_result.key_value_lines_then_first_errors") {
  JobResultRow job;
  job.name = "demo";
  job.state = "failed";
  job.reason = "too many errors";
  job.spec_path = "/jobs/demo.yaml";
  job.started = 1700000000;
  job.ended = 1700000004.25;
  job.total = 3;
  job.succeeded = 2;
  job.failed = 1;
  job.items_succeeded = 4;
  job.items_failed = 2;
  job.attempts = 5;
  job.attempts_failed = 3;
  const std::vector<FailedAttemptRow> errors = {
      {1, 1, "RUN_EXCEPTION", "ValueError: bad\nTraceback ...", "pool-a/process001"},
      {2, 1, "POOL_LOST", std::string(400, 'x'), ""},
  };
  const std::string t = report::format_job_result(7, job, errors);
  CHECK(t.rfind("job_id: 7\nname: demo\nstate: failed\nreason: too many errors\n"
                "spec: /jobs/demo.yaml\nstarted: 2023-11-14T22:13:20.000Z\n"
                "ended: 2023-11-14T22:13:24.250Z\nelapsed_seconds: 4.250\n"
                "mini_batches_total: 3\nmini_batches_succeeded: 2\nmini_batches_failed: 1\n"
                "items_succeeded: 4\nitems_failed: 2\nattempts: 5\nfailed_attempts: 3\n"
                "output: (summary_only)\nfirst_errors:\n",
                0) == 0);
  // The first line of each message, at most 300 bytes; '-' for an attempt without a worker.
  CHECK(t.find("\n  mini-batch 1 try 1 on pool-a/process001: RUN_EXCEPTION: ValueError: bad\n") !=
        std::string::npos);
  CHECK(t.find("\n  mini-batch 2 try 1 on -: POOL_LOST: " + std::string(300, 'x') + "\n") !=
        std::string::npos);
}

TEST_CASE("report.job_result.running_job_without_errors") {
  JobResultRow job;
  job.name = "demo";
  job.state = "running";
  job.output_path = "/out/rows.txt";
  const std::string t = report::format_job_result(1, job, {});
  CHECK(t.find("started: -\nended: -\nelapsed_seconds: -\n") != std::string::npos);
  CHECK(t.find("output: /out/rows.txt\n") != std::string::npos);
  CHECK(t.ends_with("\nfirst_errors: none\n"));
}
