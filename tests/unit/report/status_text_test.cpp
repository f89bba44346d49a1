// Tests for what `fanout status` prints (src/fanout/report/status_text.hpp), as text and JSON.
#include "fanout/report/status_text.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "fanout/store/job_status.hpp"

using fanout::store::JobStatus;
namespace report = fanout::report;

namespace {

JobStatus running_job() {
  JobStatus s;
  s.id = 4;
  s.name = "demo";
  s.state = "running";
  s.total_known = true;
  s.total = 10;
  s.succeeded = 3;
  s.failed = 1;
  s.running = 2;
  s.pending = 4;
  s.items_succeeded = 6;
  s.items_failed = 2;
  s.attempts = 6;
  s.attempts_failed = 2;
  s.started = 1700000000;
  s.elapsed_s = 8;
  s.minibatches_per_s = 0.5;
  s.items_per_s = 1;
  s.eta_s = 12;
  s.processes = 2;
  s.log_dir = "/jobs/logs";
  s.pools = {JobStatus::PoolUse{"pool-a", "node1", "connected", 4, 6, "0,1"}};
  s.last_errors = {JobStatus::ErrorLine{2, 1, "pool-a/process001", "RUN_EXCEPTION",
                                        "ValueError: \"bad\"", "2023-11-14T22:13:21.000Z"}};
  return s;
}

}  // namespace

TEST_CASE("report.status_text.text") {
  const std::string t = report::format_status_text(running_job());
  CHECK(t.rfind("job 4 (demo): running\n  mini-batches: 4/10 done (40.0%): 3 succeeded, 1 "
                "failed, 2 running, 4 pending\n",
                0) == 0);
  CHECK(t.find("; eta 12 s\n") != std::string::npos);
  CHECK(t.find("\n    pool-a on node1: connected, 4 workers, 6 attempts, devices 0,1\n") !=
        std::string::npos);
  CHECK(t.find("  logs: /jobs/logs\n") != std::string::npos);
  JobStatus seen = running_job();
  seen.pools[0].heartbeat_age_s = 3.2;
  CHECK(report::format_status_text(seen).find(
            "connected, 4 workers, 6 attempts, devices 0,1, last heartbeat 3 s ago\n") !=
        std::string::npos);
  CHECK(report::format_status_json(seen).find(R"("heartbeat_age_s":3.2)") != std::string::npos);
  CHECK(t.find("output:") == std::string::npos);  // none recorded
  CHECK(t.find("\n    2023-11-14T22:13:21.000Z mini-batch 2 try 1 on pool-a/process001: "
               "RUN_EXCEPTION: ValueError: \"bad\"\n") != std::string::npos);

  JobStatus quiet = running_job();
  quiet.last_errors.clear();
  quiet.total_known = false;
  quiet.eta_s = -1;
  const std::string q = report::format_status_text(quiet);
  CHECK(q.find("mini-batches: 4/10+ done: ") != std::string::npos);
  CHECK(q.find("eta") == std::string::npos);
  CHECK(q.find("  last errors: none\n") != std::string::npos);
}

TEST_CASE("report.status_text.json") {
  const std::string j = report::format_status_json(running_job());
  CHECK(j.rfind(R"({"id":4,"name":"demo","state":"running","reason":"","total":10,)", 0) == 0);
  CHECK(j.find(R"("pools":[{"name":"pool-a","node":"node1","state":"connected","workers":4,)"
               R"("attempts":6,"devices":"0,1","heartbeat_age_s":null}])") != std::string::npos);
  CHECK(j.find(R"("message":"ValueError: \"bad\"")") != std::string::npos);
  CHECK(j.back() == '\n');
  CHECK(j.find('\n') == j.size() - 1);  // one line
  // A real JSON document: a running job's end is null, not 0.
  const auto doc = nlohmann::json::parse(j);
  CHECK(doc["ended"].is_null());
  CHECK(doc["first_error"].is_null());
  JobStatus done = running_job();
  done.state = "partial";
  done.ended = 1700000100.5;
  done.first_error = done.last_errors[0];
  const auto d = nlohmann::json::parse(report::format_status_json(done));
  CHECK(d["ended"].get<double>() == 1700000100.5);
  CHECK(d["first_error"]["status"] == "RUN_EXCEPTION");
}

// The interchange's liveness, as `fanout status` found it: an object with null for what is not
// known, or null for a job that is not running.
TEST_CASE("report.status_text.json_names_the_interchanges_liveness") {
  const auto none = nlohmann::json::parse(report::format_status_json(running_job()));
  REQUIRE(none.contains("interchange"));
  CHECK(none["interchange"].is_null());

  const std::string dead = report::format_status_json(
      running_job(), report::InterchangeStatus{
                         .state = "dead", .pid = 4242, .host = "node7", .started = 1700000000.5});
  CHECK(dead.find(R"("interchange":{"state":"dead","pid":4242,"host":"node7",)"
                  R"("started":1700000000.5}})") != std::string::npos);
  CHECK(dead.find('\n') == dead.size() - 1);  // still one line

  const auto unknown = nlohmann::json::parse(
      report::format_status_json(running_job(), report::InterchangeStatus{.state = "unknown"}));
  CHECK(unknown["interchange"]["state"] == "unknown");
  CHECK(unknown["interchange"]["pid"].is_null());
  CHECK(unknown["interchange"]["host"].is_null());
  CHECK(unknown["interchange"]["started"].is_null());
}

TEST_CASE("report.status_text.first_error_is_shown") {
  JobStatus s = running_job();
  s.first_error = JobStatus::ErrorLine{0,
                                       1,
                                       "pool-a/process001",
                                       "LOAD_EXCEPTION",
                                       "ValueError: no model",
                                       "2023-11-14T22:13:20.000Z"};
  const std::string t = report::format_status_text(s);
  CHECK(t.find("  first error: 2023-11-14T22:13:20.000Z mini-batch 0 try 1 on "
               "pool-a/process001: LOAD_EXCEPTION: ValueError: no model\n") != std::string::npos);
}
