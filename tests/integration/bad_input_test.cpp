// Bad job files and entry scripts: a one-line error naming the file (and line/key), exit status
// 2, nothing started and nothing written (the store is never created).
#include <doctest/doctest.h>

#include <filesystem>

#include "job_fixture.hpp"

using namespace fanout::test;

namespace {

// Mini-batches of 5 files, no rows file.
std::string good_yaml() {
  JobSpec job;
  job.name = "bad-input";
  job.output.clear();
  job.mini_batch_size = "5";
  job.concurrency.reset();
  return job_yaml(job);
}

struct Case {
  const char* name;
  std::string yaml;
  std::string script;
  std::vector<std::string> must_mention;
};

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

}  // namespace

TEST_CASE("integration.bad_input.located_error_exit_2_nothing_written") {
  const std::string good_script = kPassThroughScript;
  const std::string kGoodYaml = good_yaml();
  // The line the located error below must name: that of mini_batch_size in the job file.
  const std::string size_line = "job.yaml:" + std::to_string(line_of(kGoodYaml, "mini_batch_size"));
  std::vector<Case> cases = {
      {"yaml syntax error",
       replace(kGoodYaml, "mini_batch_size: \"5\"", "mini_batch_size: [5"),
       good_script,
       {"job.yaml:", "YAML"}},
      {"unknown key",
       replace(kGoodYaml, "  entry_script: score.py", "  entry_scrpt: score.py"),
       good_script,
       {"job.yaml:", "entry_scrpt"}},
      {"mistyped key",
       replace(kGoodYaml, "mini_batch_size: \"5\"", "mini_batch_size: \"5 parsecs\""),
       good_script,
       {size_line, "mini_batch_size"}},
      {"missing input folder",
       replace(kGoodYaml, "path: ./data", "path: ./nowhere"),
       good_script,
       {"job.yaml:", "nowhere"}},
      {"missing entry script",
       replace(kGoodYaml, "entry_script: score.py", "entry_script: nope.py"),
       good_script,
       {"job.yaml:", "nope.py"}},
      {"entry script without run",
       kGoodYaml,
       "def init():\n    pass\n",
       {"score.py", "does not define run"}},
      {"entry script with a syntax error",
       kGoodYaml,
       "def run(mini_batch):\n  return [\n",
       {"score.py", "not valid Python"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    TempDir dir("bad");
    make_files(dir / "data", 3);
    write_file(dir / "src/score.py", c.script);
    write_file(dir / "job.yaml", c.yaml);
    const std::string db = dir / "store/fanout.db";
    auto r = fanout_run(dir, "job.yaml", db, {}, std::chrono::seconds(60));
    INFO("stderr: " << r.err);
    CHECK(r.status.code == 2);
    CHECK(r.err.rfind("error: ", 0) == 0);
    // One line (the checker's own output, if any, goes before it on stdout).
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    for (const auto& m : c.must_mention) CHECK(r.err.find(m) != std::string::npos);
    CHECK(!std::filesystem::exists(db));
    CHECK(!std::filesystem::exists(dir / "store"));
  }
}

TEST_CASE("integration.bad_input.missing_job_file") {
  TempDir dir("bad-missing");
  auto r = run_capture({fanout_bin(), "run", dir / "nope.yaml", "--db", dir / "x.db"}, dir.path());
  CHECK(r.status.code == 2);
  CHECK(r.err.find("nope.yaml") != std::string::npos);
  CHECK(!std::filesystem::exists(dir / "x.db"));
}

// The entry-script check runs while the run's private interchange starts; its error is still the
// run's only one, and a store that was there keeps its jobs and an earlier job's output (the
// outputs are claimed only once the check passed; --overwrite would remove the file).
TEST_CASE("integration.bad_input.entry_script_refused_on_an_existing_store") {
  TempDir dir("bad-existing");
  make_files(dir / "data", 3);
  write_file(dir / "src/score.py", kPassThroughScript);
  const std::string db = dir / "store/fanout.db";
  const std::string out = dir / "rows.txt";
  {
    JobSpec job;
    job.name = "bad-existing";
    job.output = "./rows.txt";
    job.mini_batch_size = "5";
    write_file(dir / "job.yaml", job_yaml(job));
  }
  auto first = fanout_run(dir, "job.yaml", db);
  INFO("first stderr: " << first.err);
  REQUIRE(first.status.code == 0);
  const std::string rows = read_text(out);
  REQUIRE(!rows.empty());
  const auto runs_before = files_ending(dir / "store/runs", "");
  struct BadCase {
    const char* name;
    const char* script;
    std::vector<std::string> extra;
    const char* must_mention;
  };
  const std::vector<BadCase> cases = {
      {"no run, --overwrite", "def init():\n    pass\n", {"--overwrite"}, "does not define run"},
      {"no run, the earlier output there", "def init():\n    pass\n", {}, "does not define run"},
      {"syntax error", "def run(mini_batch):\n  return [\n", {"--overwrite"}, "not valid Python"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    write_file(dir / "src/score.py", c.script);
    auto r = fanout_run(dir, "job.yaml", db, c.extra, std::chrono::seconds(60));
    INFO("stderr: " << r.err);
    CHECK(r.status.code == 2);
    CHECK(r.err.rfind("error: ", 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find("score.py") != std::string::npos);
    CHECK(r.err.find(c.must_mention) != std::string::npos);
    CHECK(sql_int_or(db, "SELECT count(*) FROM jobs") == 1);
    CHECK(read_text(out) == rows);
    CHECK(files_ending(dir / "store/runs", "") == runs_before);
  }
}
