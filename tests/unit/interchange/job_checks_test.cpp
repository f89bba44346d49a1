// The checks of a submitted JobSpec (interchange/job_checks.hpp): specs it accepts, and near
// misses it rejects with an error that names the field. Only check_output_fresh touches a file (in
// a scratch folder).
#include "interchange/job_checks.hpp"

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "scratch_dir.hpp"

using fanout::ErrorCode;
using fanout::ix::check_job_spec;
using fanout::proto::JobSpec;

namespace {

JobSpec good() {
  JobSpec s;
  s.name = "job";
  s.runtime = "python";
  s.code_dir = "/nonexistent/code";  // existence is the wiring's step, not a check
  s.max_tries = 1;
  return s;
}

}  // namespace

TEST_CASE("interchange.job_checks.accepts") {
  struct Case {
    const char* what;
    std::function<void(JobSpec&)> edit;
  };
  const std::vector<Case> cases = {
      {"the minimal spec", [](JobSpec&) {}},
      {"runtime command", [](JobSpec& s) { s.runtime = "command"; }},
      {"runtime native", [](JobSpec& s) { s.runtime = "native"; }},
      {"many tries", [](JobSpec& s) { s.max_tries = 100; }},
      {"an absolute log_dir", [](JobSpec& s) { s.log_dir = "/tmp/x/logs"; }},
      {"an absolute output file", [](JobSpec& s) { s.output_path = "/tmp/x/out.txt"; }},
      {"thresholds of any value",
       [](JobSpec& s) {
         s.error_threshold = 0;
         s.mini_batch_error_threshold = 5;
         s.allowed_failed_percent = 0;
       }},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    JobSpec s = good();
    c.edit(s);
    auto r = check_job_spec(s);
    CHECK(r.has_value());
  }
}

TEST_CASE("interchange.job_checks.rejects_near_misses_naming_the_field") {
  struct Case {
    const char* field;
    std::function<void(JobSpec&)> edit;
  };
  const std::vector<Case> cases = {
      {"name", [](JobSpec& s) { s.name.clear(); }},
      {"runtime", [](JobSpec& s) { s.runtime = "Python"; }},
      {"runtime", [](JobSpec& s) { s.runtime.clear(); }},
      {"max_tries", [](JobSpec& s) { s.max_tries = 0; }},
      {"code_dir", [](JobSpec& s) { s.code_dir = "code"; }},
      {"code_dir", [](JobSpec& s) { s.code_dir.clear(); }},
      {"log_dir", [](JobSpec& s) { s.log_dir = "logs"; }},
      {"output_path", [](JobSpec& s) { s.output_path = "out.txt"; }},
      {"output_path", [](JobSpec& s) { s.output_path = "/tmp/dir/"; }},
  };
  for (const auto& c : cases) {
    CAPTURE(c.field);
    JobSpec s = good();
    c.edit(s);
    auto r = check_job_spec(s);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message.find(std::string("SubmitJob: ") + c.field + ":") == 0);
  }
}

// Issue 18 item 1: two live jobs never append to one file.
TEST_CASE("interchange.job_checks.refuses_an_output_file_a_live_job_appends_to") {
  fanout::ix::JobLedger::Jobs jobs;
  fanout::ix::Job& running = jobs[3];
  running.id = 3;
  running.spec = good();
  running.spec.name = "first";
  running.spec.output_path = "/data/out/rows.txt";
  jobs[4].spec = good();  // summary_only: no file

  JobSpec s = good();
  s.output_path = "/data/out/../out/rows.txt";  // the same file, spelt otherwise
  auto r = fanout::ix::check_output_free(s, jobs);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ErrorCode::InvalidArgument);
  CHECK(r.error().message.rfind("SubmitJob: output_path: /data/out/../out/rows.txt", 0) == 0);
  CHECK(r.error().message.find("running job 3 (first)") != std::string::npos);

  s.output_path = "/data/out/other.txt";
  CHECK(fanout::ix::check_output_free(s, jobs).has_value());
  s.output_path.clear();
  CHECK(fanout::ix::check_output_free(s, jobs).has_value());
}

// A shared interchange once appended a re-run's rows to the first run's (every row twice): a new
// job's output file must be absent or empty, whatever route submitted it.
TEST_CASE("interchange.job_checks.an_earlier_jobs_rows_refuse_a_new_job") {
  fanout::test::ScratchDir d;
  JobSpec s = good();
  s.output_path = d.path("rows.txt");
  CHECK(fanout::ix::check_output_fresh(s).has_value());  // absent
  d.write("rows.txt", "");
  CHECK(fanout::ix::check_output_fresh(s).has_value());  // empty
  d.write("rows.txt", "a\nb\n");
  auto r = fanout::ix::check_output_fresh(s);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ErrorCode::InvalidArgument);
  CHECK(r.error().message == "SubmitJob: output_path: " + d.path("rows.txt") +
                                 " holds 4 bytes of an earlier job's rows; a new job writes a "
                                 "fresh file. Move it away, or run with --overwrite to replace "
                                 "it (fanout resume JOB continues an unfinished job's own file)");
  s.output_path.clear();
  CHECK(fanout::ix::check_output_fresh(s).has_value());
}
