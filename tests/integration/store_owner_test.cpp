// Through the real binaries: one live interchange owns a store
// (concurrent `fanout run`s on one store attach to it, and a kill loses and duplicates nothing);
// a second job never appends to a file a running job appends to; a job whose end was committed
// just before its interchange died counts as succeeded and gets its reports; recovery keeps what
// the output file held before the job.
#include <doctest/doctest.h>
#include <signal.h>
#include <stdlib.h>

#include <filesystem>

#include "fanout/store/owner_lock.hpp"
#include "job_fixture.hpp"
#include "test_hooks_skip.hpp"

using namespace fanout::test;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kFastBeats = fast_beats();

std::string log_dir_of(const std::string& db, int job) {
  auto v = sql_column(db, "select log_dir from jobs where id=" + std::to_string(job));
  return v.empty() ? std::string() : v[0];
}

}  // namespace

// Item 9: 1,000 lines in the output file before the job: it used to be cut to 0 bytes by
// recovery. A new job now never starts on an earlier job's rows, on a shared interchange too
// (docs/job-spec.md, "A fresh append_row file"): it is refused and the lines are kept. Moved away,
// the job runs with no pools; the interchange is killed and started again, and the job's rows
// are each written once.
TEST_CASE("integration.store_owner.recovery_keeps_what_the_output_held_before_the_job") {
  TempDir dir("owner9");
  const std::string db = dir / "fanout.db";
  make_counting_job(dir.path(), "keep-before", 5, "0");
  std::string before;
  for (int i = 0; i < 1000; ++i) before += "earlier line " + std::to_string(i) + "\n";
  write_file(dir / "out.txt", before);

  Cluster cl;
  cl.start_interchange(dir.path(), db, kFastBeats);
  const std::string client_ep = cl.client_ep;
  auto refused = run_capture(run_argv(dir / "job.yaml", db, client_ep), dir.path(), {},
                             std::chrono::seconds(60));
  CHECK(refused.status.code == 2);
  CHECK(refused.err.find("--overwrite") != std::string::npos);
  CHECK(read_text(dir / "out.txt") == before);
  fs::rename(dir / "out.txt", dir / "earlier.txt");
  before.clear();

  auto client = start_run(dir / "job.yaml", db, client_ep, dir / "client");
  REQUIRE(wait_until([&] { return sql_int(db, "select count(*) from minibatches") == 5; },
                     std::chrono::seconds(60)));
  cl.interchange.signal(SIGKILL);
  REQUIRE(cl.interchange.wait_for(std::chrono::seconds(10)).has_value());

  cl.restart_interchange(dir.path(), db, kFastBeats);
  INFO(cl.logs());
  REQUIRE(
      wait_until([&] { return read_text(cl.ix_log).find("resuming job 1") != std::string::npos; },
                 std::chrono::seconds(30)));
  CHECK(read_text(dir / "out.txt") == before);

  // The job then finishes after them.
  cl.start_pool(dir.path(), "pool-a", 2);
  auto st = client.wait_for(std::chrono::seconds(120));
  INFO("client stderr:\n" << read_text(dir / "client.err"));
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  const std::string out = read_text(dir / "out.txt");
  CHECK(out.substr(0, before.size()) == before);
  CHECK(read_lines(dir / "out.txt").size() == 5);
  cl.interchange.signal(SIGTERM);
  (void)cl.interchange.wait_for(std::chrono::seconds(30));
}

// Item 1: a second job whose output file a running job appends to is refused at submission,
// exit 2, naming the file and the job; the running job is untouched.
TEST_CASE("integration.store_owner.a_second_job_on_a_running_jobs_output_is_refused") {
  TempDir dir("owner1");
  const std::string db = dir / "fanout.db";
  make_counting_job(dir / "a", "first", 8, "0.5");
  make_counting_job(dir / "b", "second", 3, "0");
  // b appends to a's output file.
  std::string yaml = read_text(dir / "b/job.yaml");
  yaml.replace(yaml.find("./out.txt"), 9, dir / "a/out.txt");
  write_file(dir / "b/job.yaml", yaml);

  Cluster cl;
  cl.start_interchange(dir.path(), db, kFastBeats);
  cl.start_pool(dir.path(), "pool-a", 1);
  auto first = start_run(dir / "a/job.yaml", db, cl.client_ep, dir / "a");
  REQUIRE(wait_until([&] { return sql_int_or(db, "select count(*) from jobs") == 1; },
                     std::chrono::seconds(60)));
  auto second = run_capture(run_argv(dir / "b/job.yaml", db, cl.client_ep), dir.path());
  INFO("second stderr:\n" << second.err << cl.logs());
  CHECK(second.status.code == 2);
  CHECK(second.err.find(dir / "a/out.txt") != std::string::npos);
  CHECK(second.err.find("running job 1 (first)") != std::string::npos);
  CHECK(sql_int(db, "select count(*) from jobs") == 1);

  auto st = first.wait_for(std::chrono::seconds(120));
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  check_rows_once(dir / "a/out.txt", 8);
  cl.interchange.signal(SIGTERM);
  (void)cl.interchange.wait_for(std::chrono::seconds(30));
}

// Items 2 and 3: the interchange dies right after committing the job's end (the test hook kills
// it there), before the reports and JobEnded. Started again, it writes the missing reports and
// removes the killed writer's temporary files; the client, refused on Attach, finds the end in
// the store and exits 0 (it used to exit 3: "job 1 is unfinished").
TEST_CASE("integration.store_owner.a_job_that_ended_before_the_crash_succeeds_with_its_reports") {
  require_test_hooks_or_skip();
  TempDir dir("owner2");
  const std::string db = dir / "fanout.db";
  make_counting_job(dir.path(), "ends-then-dies", 4, "0");
  Cluster cl;
  ::setenv("FANOUT_TEST_EXIT_AFTER_JOB_END", "1", 1);
  cl.start_interchange(dir.path(), db, kFastBeats);
  ::unsetenv("FANOUT_TEST_EXIT_AFTER_JOB_END");
  const std::string client_ep = cl.client_ep;
  cl.start_pool(dir.path(), "pool-a", 2);
  auto client = start_run(dir / "job.yaml", db, client_ep, dir / "client");
  auto died = cl.interchange.wait_for(std::chrono::seconds(120));
  INFO(cl.logs());
  REQUIRE(died.has_value());
  CHECK(died->signal == SIGKILL);
  CHECK(sql_column(db, "select state from jobs where id=1") ==
        std::vector<std::string>{"succeeded"});
  const std::string logs = log_dir_of(db, 1);
  REQUIRE(!logs.empty());
  CHECK_FALSE(fs::exists(logs + "/job_result.txt"));
  // What a report writer killed mid-way leaves (its pid is surely gone).
  write_file(logs + "/sys/job_report/processed_mini-batches.csv.tmp999999999", "partial");

  cl.restart_interchange(dir.path(), db, kFastBeats);
  auto st = client.wait_for(std::chrono::seconds(60));
  INFO("client stderr:\n" << read_text(dir / "client.err"));
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  CHECK(read_text(dir / "client.err").find("unfinished") == std::string::npos);
  REQUIRE(wait_until([&] { return sql_int(db, "select reported is not null from jobs") == 1; },
                     std::chrono::seconds(30)));
  CHECK(read_text(logs + "/job_result.txt").find("succeeded") != std::string::npos);
  CHECK(fs::exists(logs + "/report.html"));
  CHECK(read_lines(logs + "/sys/job_report/processed_mini-batches.csv").size() == 5);
  CHECK(temporaries_under(logs) == 0);
  check_rows_once(dir / "out.txt", 4);
  cl.interchange.signal(SIGTERM);
  (void)cl.interchange.wait_for(std::chrono::seconds(30));
}

// Item 2 in the embedded default: the private interchange dies the same way; `fanout run` finds
// the end in the store, writes the reports itself and exits 0 (it used to exit 3).
TEST_CASE("integration.store_owner.embedded_run_whose_interchange_died_after_the_end_succeeds") {
  require_test_hooks_or_skip();
  TempDir dir("owner2e");
  const std::string db = dir / "fanout.db";
  make_counting_job(dir.path(), "embedded-ends", 3, "0");
  auto r = run_capture(run_argv(dir / "job.yaml", db, ""), dir.path(),
                       {{"FANOUT_TEST_EXIT_AFTER_JOB_END", "1"}});
  INFO("stderr:\n" << r.err);
  CHECK(r.status.code == 0);
  CHECK(sql_column(db, "select state from jobs where id=1") ==
        std::vector<std::string>{"succeeded"});
  const std::string logs = log_dir_of(db, 1);
  CHECK(read_text(logs + "/job_result.txt").find("succeeded") != std::string::npos);
  CHECK(fs::exists(logs + "/report.html"));
  check_rows_once(dir / "out.txt", 3);
}

// Item 0: concurrent `fanout run`s on one store. The first one's private interchange owns the
// store; the others attach to it (their pools join it) instead of taking its jobs over. Two runs
// both succeed; then three runs, with the owner SIGKILLed mid-way: every job is finished by
// `fanout resume`, and every row of every job is in its output exactly once.
TEST_CASE("integration.store_owner.concurrent_runs_on_one_store_each_row_exactly_once") {
  TempDir dir("owner0");
  const std::string db = dir / "fanout.db";
  const unsigned files = 24;
  auto start = [&](const std::string& name) {
    make_counting_job(dir / name, name, files, "0.1");
    return start_run(dir / (name + "/job.yaml"), db, "", dir / name);
  };
  auto errs = [&](const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += "--- " + n + " ---\n" + read_text(dir / (n + ".err"));
    return s;
  };

  SUBCASE("two runs") {
    auto a = start("a");
    REQUIRE(wait_until([&] { return sql_int_or(db, "select count(*) from jobs") == 1; },
                       std::chrono::seconds(60)));
    auto b = start("b");
    auto sa = a.wait_for(std::chrono::seconds(180));
    auto sb = b.wait_for(std::chrono::seconds(180));
    INFO(errs({"a", "b"}));
    REQUIRE(sa.has_value());
    REQUIRE(sb.has_value());
    CHECK(sa->code == 0);
    CHECK(sb->code == 0);
    CHECK(read_text(dir / "b.err").find("is owned by the running interchange") !=
          std::string::npos);
    check_rows_once(dir / "a/out.txt", files);
    check_rows_once(dir / "b/out.txt", files);
  }

  SUBCASE("three runs and a kill") {
    auto a = start("a");
    REQUIRE(wait_until([&] { return sql_int_or(db, "select count(*) from jobs") == 1; },
                       std::chrono::seconds(60)));
    auto b = start("b");
    auto c = start("c");
    // Killed only once every job's submission is durable: a job killed before then cannot be
    // resumed, which is not what this case is about.
    REQUIRE(wait_until(
        [&] { return sql_int(db, "select count(*) from jobs where submit_done=1") == 3; },
        std::chrono::seconds(60)));
    REQUIRE(wait_until(
        [&] {
          return sql_int(db, "select count(*) from minibatches where state='succeeded'") >= 6;
        },
        std::chrono::seconds(120)));
    const auto owner = read_ready_file(db + ".owner");
    REQUIRE(owner.count("pid") == 1);
    ::kill(static_cast<pid_t>(std::stol(owner.at("pid"))), SIGKILL);
    for (auto* p : {&a, &b, &c}) {
      auto st = p->wait_for(std::chrono::seconds(120));
      REQUIRE(st.has_value());
    }
    // Whatever did not finish is resumed, one job after the other.
    for (int job = 1; job <= 3; ++job) {
      if (sql_column(db, "select state from jobs where id=" + std::to_string(job)) ==
          std::vector<std::string>{"succeeded"}) {
        continue;
      }
      auto r = run_capture({fanout_bin(), "resume", std::to_string(job), "--db", db, "--python",
                            python_bin(), "--quiet"},
                           dir.path(), {}, std::chrono::seconds(180));
      INFO("resume " << job << ":\n" << r.err);
      CHECK(r.status.code == 0);
    }
    INFO(errs({"a", "b", "c"}));
    CHECK(sql_int(db, "select count(*) from jobs where state='succeeded'") == 3);
    for (const std::string name : {"a", "b", "c"}) {
      CAPTURE(name);
      check_rows_once(dir / (name + "/out.txt"), files);
    }
  }
  // No interchange ever took over another's jobs: no duplicate attempt ids, no job running.
  CHECK(sql_int(db, "select count(*) from jobs where state='running'") == 0);
  std::string sys_logs;
  for (auto it = fs::recursive_directory_iterator(dir.path()); it != fs::end(it); ++it) {
    if (it->path().filename() == "interchange.log") sys_logs += read_text(it->path().string());
  }
  CHECK(sys_logs.find("UNIQUE constraint") == std::string::npos);
}

// A `fanout run` that attached to the store's owner just as that owner went away (its own run
// ended: it stops once idle) did not get its job accepted and exited 3. It decides again where
// its job runs: here, on a private interchange of its own. FANOUT_TEST_HOLD_GUEST holds it right
// after it read the owner's endpoints, until the owner is gone.
TEST_CASE("integration.store_owner.a_run_attached_as_the_owner_exits_starts_its_own") {
  require_test_hooks_or_skip();
  TempDir dir("owner-gone");
  const std::string db = dir / "fanout.db";
  const std::string hold = dir / "hold";
  make_counting_job(dir / "a", "owner-a", 4, "1");
  make_counting_job(dir / "b", "guest-b", 3, "0");
  auto a = start_run(dir / "a/job.yaml", db, "", dir / "a");
  REQUIRE(wait_until([&] { return sql_int_or(db, "select count(*) from jobs") == 1; },
                     std::chrono::seconds(60)));
  auto b = spawn({fanout_bin(), "run", dir / "b/job.yaml", "--db", db, "--python", python_bin()},
                 dir / "b.out", dir / "b.err", {{"FANOUT_TEST_HOLD_GUEST", hold}});
  INFO("a:\n" << read_text(dir / "a.err") << "\nb:\n" << read_text(dir / "b.err"));
  REQUIRE(wait_until([&] { return fs::exists(hold); }, std::chrono::seconds(60)));
  // The owner's run ends; with no other job there, its interchange exits.
  auto sa = a.wait_for(std::chrono::seconds(120));
  REQUIRE(sa.has_value());
  CHECK(sa->code == 0);
  REQUIRE(wait_until([&] { return !fanout::store::find_owner(db).value().has_value(); },
                     std::chrono::seconds(30)));
  fs::remove(hold);
  auto sb = b.wait_for(std::chrono::seconds(120));
  const std::string b_err = read_text(dir / "b.err");
  INFO("b after:\n" << b_err);
  REQUIRE(sb.has_value());
  CHECK(sb->code == 0);
  CHECK(b_err.find("is owned by the running interchange") != std::string::npos);
  CHECK(b_err.find("before it accepted this job; deciding again where it runs") !=
        std::string::npos);
  CHECK(sql_column(db, "select state from jobs order by id") ==
        std::vector<std::string>{"succeeded", "succeeded"});
  check_rows_once(dir / "a/out.txt", 4);
  check_rows_once(dir / "b/out.txt", 3);
}

// Two `fanout resume`s of one crashed job at once. The second found the store's lock held by the
// first's new interchange before it had published its endpoints, read the dead interchange's
// endpoints still in the owner file (and the first's ready file in the shared run folder), waited
// on them and exited 3 ("every pool exited"). Now a dead owner's text is never used: the second
// joins the live owner (its job runs there) and both end with the job, each row once.
TEST_CASE("integration.store_owner.two_resumes_after_a_crash_both_finish_the_job") {
  TempDir dir("owner-resume2");
  const std::string db = dir / "fanout.db";
  const unsigned files = 16;
  make_counting_job(dir.path(), "crashed", files, "0.3");
  auto run = start_run(dir / "job.yaml", db, "", dir / "run");
  REQUIRE(wait_until([&] { return sql_int_or(db, "select submit_done from jobs") == 1; },
                     std::chrono::seconds(60)));
  REQUIRE(wait_until(
      [&] { return sql_int(db, "select count(*) from minibatches where state='succeeded'") >= 2; },
      std::chrono::seconds(120)));
  const auto owner = read_ready_file(db + ".owner");
  REQUIRE(owner.count("pid") == 1);
  ::kill(static_cast<pid_t>(std::stol(owner.at("pid"))), SIGKILL);
  REQUIRE(run.wait_for(std::chrono::seconds(120)).has_value());
  REQUIRE(sql_column(db, "select state from jobs") == std::vector<std::string>{"running"});
  // The owner file still names the dead interchange's endpoints.
  REQUIRE(read_ready_file(db + ".owner")["pid"] == owner.at("pid"));

  auto resume = [&](const std::string& name) {
    return spawn({fanout_bin(), "resume", "1", "--db", db, "--python", python_bin(), "--quiet"},
                 dir / (name + ".out"), dir / (name + ".err"));
  };
  auto a = resume("a");
  auto b = resume("b");
  auto sa = a.wait_for(std::chrono::seconds(180));
  auto sb = b.wait_for(std::chrono::seconds(180));
  INFO("a:\n" << read_text(dir / "a.err") << "\nb:\n" << read_text(dir / "b.err"));
  REQUIRE(sa.has_value());
  REQUIRE(sb.has_value());
  CHECK(sa->code == 0);
  CHECK(sb->code == 0);
  CHECK(read_text(dir / "a.err").find("every pool exited") == std::string::npos);
  CHECK(read_text(dir / "b.err").find("every pool exited") == std::string::npos);
  // One of them found the other's interchange owning the store, and says it follows the job
  // there.
  CHECK((read_text(dir / "a.err") + read_text(dir / "b.err"))
            .find("fanout: job 1 is being resumed by the running interchange pid") !=
        std::string::npos);
  CHECK(sql_column(db, "select state from jobs") == std::vector<std::string>{"succeeded"});
  check_rows_once(dir / "out.txt", files);
}
