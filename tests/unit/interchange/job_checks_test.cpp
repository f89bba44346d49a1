// The checks of a submitted JobSpec (interchange/job_checks.hpp): specs it accepts, and near
// misses it rejects with an error that names the field. No file is touched, but in scratch folders:
// the write roots' tests resolve links there, and check_output_fresh reads an output file.
#include "interchange/job_checks.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
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

// Two live jobs never append to one file.
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

// The same file through a link to its folder, or a hard link, is the same output: files are
// compared by device and inode (or, while missing, by where their links lead), not by spelling.
TEST_CASE("interchange.job_checks.an_output_spelt_through_a_link_is_the_same_file") {
  namespace fs = std::filesystem;
  fanout::test::ScratchDir dir("output-free");
  const std::string d = dir.path();
  fs::create_directories(d + "/victim");
  fs::create_directory_symlink(d + "/victim", d + "/link");
  fanout::ix::JobLedger::Jobs jobs;
  jobs[7].id = 7;
  jobs[7].spec = good();
  jobs[7].spec.name = "victim";
  jobs[7].spec.output_path = d + "/victim/results.txt";
  JobSpec s = good();
  s.output_path = d + "/link/results.txt";
  // Not made yet: where the link leads decides.
  auto r = fanout::ix::check_output_free(s, jobs);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().message.find("running job 7 (victim)") != std::string::npos);
  // Made: its device and inode decide, through the link and through a hard link alike.
  { std::ofstream(d + "/victim/results.txt") << ""; }
  CHECK_FALSE(fanout::ix::check_output_free(s, jobs).has_value());
  fs::create_hard_link(d + "/victim/results.txt", d + "/hard.txt");
  s.output_path = d + "/hard.txt";
  CHECK_FALSE(fanout::ix::check_output_free(s, jobs).has_value());
  s.output_path = d + "/link/other.txt";
  CHECK(fanout::ix::check_output_free(s, jobs).has_value());
}

TEST_CASE("interchange.job_checks.is_within_compares_whole_components") {
  using fanout::ix::is_within;
  struct Case {
    const char* path;
    const char* root;
    bool within;
  };
  const std::vector<Case> cases = {
      {"/srv/out", "/srv/out", true},     {"/srv/out/a/b.txt", "/srv/out", true},
      {"/srv/out/a", "/srv/out/", true},  {"/root2/x", "/root", false},
      {"/root2", "/root", false},         {"/ro", "/root", false},
      {"/srv", "/srv/out", false},        {"/anything/at/all", "/", true},
      {"/etc/passwd", "/srv/out", false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.path);
    CAPTURE(c.root);
    CHECK(is_within(c.path, c.root) == c.within);
  }
}

TEST_CASE("interchange.job_checks.resolve_for_write_follows_links_then_dot_dot") {
  namespace fs = std::filesystem;
  fanout::test::ScratchDir dir("write-root");
  const std::string d = dir.path();
  fs::create_directories(d + "/root/sub");
  fs::create_directories(d + "/elsewhere/deep");
  fs::create_directory_symlink(d + "/elsewhere", d + "/root/out");            // absolute link out
  fs::create_directory_symlink("../../elsewhere/deep", d + "/root/sub/rel");  // relative link
  fs::create_symlink(d + "/elsewhere/new.txt", d + "/root/dangling");         // target missing
  fs::create_symlink(d + "/root/loop", d + "/root/loop");
  using fanout::ix::resolve_for_write;
  struct Case {
    std::string path;
    std::string want;
  };
  const std::vector<Case> cases = {
      {d + "/root/a.txt", d + "/root/a.txt"},
      {d + "/root/sub/../a.txt", d + "/root/a.txt"},
      {d + "/root/../elsewhere/a.txt", d + "/elsewhere/a.txt"},
      {d + "/root/out/a.txt", d + "/elsewhere/a.txt"},
      // `..` after a link steps up from where the link led, as the kernel does.
      {d + "/root/out/../a.txt", d + "/a.txt"},
      {d + "/root/sub/rel/a.txt", d + "/elsewhere/deep/a.txt"},
      {d + "/root/dangling", d + "/elsewhere/new.txt"},
      // Missing folders are made as written, `..` included.
      {d + "/root/new/../../elsewhere/x", d + "/elsewhere/x"},
      {d + "/root/new/deeper/x.txt", d + "/root/new/deeper/x.txt"},
      {"/../../etc/x", "/etc/x"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.path);
    auto r = resolve_for_write(c.path);
    REQUIRE(r.has_value());
    CHECK(*r == c.want);
  }
  CHECK_FALSE(resolve_for_write("relative/x").has_value());
  auto loop = resolve_for_write(d + "/root/loop/x");
  REQUIRE_FALSE(loop.has_value());
  CHECK(loop.error().message.find("symbolic links") != std::string::npos);
}

TEST_CASE("interchange.job_checks.write_roots_accept_and_refuse_table") {
  namespace fs = std::filesystem;
  fanout::test::ScratchDir dir("write-root");
  const std::string d = dir.path();
  fs::create_directories(d + "/root/sub");
  fs::create_directories(d + "/root2");
  fs::create_directories(d + "/victim");
  fs::create_directory_symlink(d + "/victim", d + "/root/sub/link");
  fs::create_symlink(d + "/victim/planted.txt", d + "/root/dangling.txt");
  const std::vector<std::string> roots = {d + "/root", d + "/other"};
  struct Case {
    const char* what;
    std::string output_path;
    std::string log_dir;
    const char* refused_field;  // nullptr: accepted
  };
  const std::vector<Case> cases = {
      {"both inside", d + "/root/out.txt", d + "/root/run/logs", nullptr},
      {"inside the second root", d + "/other/new/out.txt", "", nullptr},
      {"the root itself as log_dir", "", d + "/root", nullptr},
      {"`..` that stays inside", d + "/root/sub/../out.txt", "", nullptr},
      {"no paths at all", "", "", nullptr},
      {"output outside", d + "/victim/out.txt", "", "output_path"},
      {"log_dir outside", d + "/root/out.txt", d + "/victim/logs", "log_dir"},
      {"`..` out of the root", d + "/root/../victim/out.txt", "", "output_path"},
      {"`..` out through a missing folder", d + "/root/new/../../victim/x", "", "output_path"},
      {"a symlinked parent", d + "/root/sub/link/out.txt", "", "output_path"},
      {"a dangling link as the file", d + "/root/dangling.txt", "", "output_path"},
      {"a symlinked log_dir parent", "", d + "/root/sub/link/logs", "log_dir"},
      {"prefix trick root2 vs root", d + "/root2/out.txt", "", "output_path"},
      {"/root itself", "/root/.bashrc", "", "output_path"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    JobSpec s = good();
    s.output_path = c.output_path;
    s.log_dir = c.log_dir;
    auto r = fanout::ix::check_write_roots(s, roots, /*log_dir_is_clients=*/true);
    if (c.refused_field == nullptr) {
      CHECK(r.has_value());
      continue;
    }
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    const std::string& m = r.error().message;
    CHECK(m.rfind(std::string("SubmitJob: ") + c.refused_field + ": ", 0) == 0);
    CHECK(m.find(c.output_path.empty() || std::string(c.refused_field) == "log_dir"
                     ? c.log_dir
                     : c.output_path) != std::string::npos);
    CHECK(m.find(d + "/root, " + d + "/other") != std::string::npos);
    CHECK(m.find("--write-root") != std::string::npos);
    CHECK_FALSE(fs::exists(d + "/victim/out.txt"));
  }
  // A log_dir the interchange chose itself is not the client's and is not held to the roots.
  JobSpec own = good();
  own.log_dir = d + "/victim/runs/logs";
  CHECK(fanout::ix::check_write_roots(own, roots, /*log_dir_is_clients=*/false).has_value());
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
