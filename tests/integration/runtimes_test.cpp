// The command and native runtimes (fanout-worker) through the real binaries: rows, failures
// recorded with their message, timeouts that stop the work, built-in noop, and bad job files.
#include <doctest/doctest.h>
#include <signal.h>

#include <cerrno>
#include <set>

#include "job_fixture.hpp"

using namespace fanout::test;

namespace {

// Mini-batches of 10 files on 2 workers, 2 tries, rows into ./out/rows.txt; `task` is the task
// block, `extra` more top-level keys.
std::string job_yaml(const std::string& task, const std::string& extra = "") {
  JobSpec job;
  job.name = "runtimes";
  job.output_key = "rows";
  job.output = "./out/rows.txt";
  job.mini_batch_size = "10";
  job.max_retries = 1;
  job.timeout_s = 60;
  job.top = extra;
  job.task = task;
  return job_yaml(job);
}

std::string native_lib() { return env_or("FANOUT_NATIVE_UPPER", ""); }

RunResult run_job(const TempDir& dir) {
  return run_capture({fanout_bin(), "run", dir / "job.yaml", "--db", dir / "fanout.db", "--quiet"},
                     dir.path());
}

}  // namespace

TEST_CASE("integration.runtimes.command_rows_per_item") {
  TempDir dir("rt-cmd");
  make_files(dir / "data", 50);
  write_file(dir / "code/keep.txt", "");
  // One row per item, naming the mini-batch it came in; {mini_batch} and $FANOUT_MINI_BATCH are
  // the same file. The cwd is the code folder.
  write_file(dir / "job.yaml",
             job_yaml("  type: command\n  code: ./code\n"
                      "  command: test -f keep.txt && while read f; do echo \"$(basename $f) "
                      "$FANOUT_MINI_BATCH_INDEX\"; done < {mini_batch}\n"));
  auto r = run_job(dir);
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  auto lines = read_lines(dir / "out/rows.txt");
  CHECK(lines.size() == 50);
  std::set<std::string> distinct(lines.begin(), lines.end());
  CHECK(distinct.size() == 50);
  CHECK(distinct.count("file00000.txt 0") == 1);
  CHECK(distinct.count("file00049.txt 4") == 1);
  const std::string db = dir / "fanout.db";
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 5);
  CHECK(sql_int(db, "select sum(succeeded) from minibatches") == 50);
  CHECK(sql_int(db, "select sum(rows) from minibatches") == 50);
}

TEST_CASE("integration.runtimes.command_failure_records_stderr_tail") {
  TempDir dir("rt-cmdfail");
  make_files(dir / "data", 30);
  write_file(dir / "job.yaml",
             job_yaml("  type: command\n"
                      "  command: if grep -q file00010 \"$FANOUT_MINI_BATCH\"; then echo \"no "
                      "good, batch $FANOUT_MINI_BATCH_INDEX\" >&2; exit 3; fi; cat "
                      "\"$FANOUT_MINI_BATCH\"\n"));
  auto r = run_job(dir);
  INFO("stderr:\n" << r.err);
  // Thresholds ignore failures by default, as in ParallelRunStep: the job ends partial, exit 4.
  CHECK(r.status.code == 4);
  const std::string db = dir / "fanout.db";
  CHECK(read_lines(dir / "out/rows.txt").size() == 20);
  CHECK(sql_int(db, "select count(*) from minibatches where state='failed'") == 1);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_EXCEPTION'") == 2);
  auto msg = sql_column(db, "select error_message from attempts where status='RUN_EXCEPTION'");
  REQUIRE(!msg.empty());
  CHECK(msg[0].find("exit code 3") != std::string::npos);
  CHECK(msg[0].find("no good, batch 1") != std::string::npos);
  CHECK(sql_column(db, "select error_category from attempts where status='RUN_EXCEPTION'")[0] ==
        "CommandFailed");
}

TEST_CASE("integration.runtimes.command_timeout_kills_the_command") {
  TempDir dir("rt-cmdtimeout");
  make_files(dir / "data", 20);
  // The batch holding file00000 hangs; its command's pid is written so we can check it is gone.
  write_file(dir / "job.yaml",
             job_yaml("  type: command\n"
                      "  command: if grep -q file00000 \"$FANOUT_MINI_BATCH\"; then echo $$ >> " +
                      dir.path() + "/hung.pids; exec sleep 300; fi; cat \"$FANOUT_MINI_BATCH\"\n"));
  std::string yaml = read_text(dir / "job.yaml");
  yaml.replace(yaml.find("timeout: 60"), 11, "timeout: 2");
  write_file(dir / "job.yaml", yaml);
  auto r = run_job(dir);
  INFO("stderr:\n" << r.err);
  CHECK(r.status.code == 4);  // one of two mini-batches failed: partial
  const std::string db = dir / "fanout.db";
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_TIMEOUT'") == 2);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 1);
  auto pids = read_lines(dir / "hung.pids");
  CHECK(pids.size() == 2);
  for (const auto& p : pids) {
    const int pid = std::stoi(p);
    // The command was killed with its worker (it may take a moment to be reaped by init).
    CHECK(wait_until([&] { return ::kill(pid, 0) != 0 && errno == ESRCH; },
                     std::chrono::seconds(10)));
  }
}

TEST_CASE("integration.runtimes.native_library_rows") {
  REQUIRE(!native_lib().empty());
  TempDir dir("rt-native");
  make_files(dir / "data", 40);
  write_file(dir / "job.yaml",
             job_yaml("  type: native\n  code: .\n  library: " + native_lib() + "\n"));
  auto r = run_job(dir);
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  auto lines = read_lines(dir / "out/rows.txt");
  CHECK(lines.size() == 40);
  std::set<std::string> distinct(lines.begin(), lines.end());
  CHECK(distinct.count("FILE00007.TXT FILE00007.TXT") == 1);
  const std::string db = dir / "fanout.db";
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 4);
  CHECK(sql_int(db, "select sum(succeeded) from minibatches") == 40);
}

TEST_CASE("integration.runtimes.native_failures_and_timeouts") {
  REQUIRE(!native_lib().empty());
  SUBCASE("run fails") {
    TempDir dir("rt-native-fail");
    make_files(dir / "data", 30);
    write_file(dir / "job.yaml", job_yaml("  type: native\n  code: .\n  library: " + native_lib() +
                                          "\n  program_arguments: --fail-on file00013\n"));
    auto r = run_job(dir);
    INFO("stderr:\n" << r.err);
    CHECK(r.status.code == 4);  // partial
    const std::string db = dir / "fanout.db";
    CHECK(read_lines(dir / "out/rows.txt").size() == 20);
    CHECK(sql_int(db, "select count(*) from attempts where status='RUN_EXCEPTION'") == 2);
    auto cat = sql_column(db, "select error_category from attempts where status='RUN_EXCEPTION'");
    REQUIRE(!cat.empty());
    CHECK(cat[0] == "ValueError");
    auto msg = sql_column(db, "select error_message from attempts where status='RUN_EXCEPTION'");
    CHECK(msg[0].find("file00013.txt (--fail-on file00013)") != std::string::npos);
  }
  SUBCASE("init fails") {
    TempDir dir("rt-native-init");
    make_files(dir / "data", 10);
    write_file(dir / "job.yaml", job_yaml("  type: native\n  code: .\n  library: " + native_lib() +
                                          "\n  program_arguments: --fail-init\n"));
    auto r = run_job(dir);
    INFO("stderr:\n" << r.err);
    const std::string db = dir / "fanout.db";
    CHECK(sql_int(db, "select count(*) from minibatches where state='failed'") == 1);
    auto msg = sql_column(db, "select error_message from attempts where status='LOAD_EXCEPTION'");
    REQUIRE(!msg.empty());
    CHECK(msg[0].find("InitError: asked to fail") != std::string::npos);
    // init() fails everywhere: the job fails with that error, exit 1.
    CHECK(r.status.code == 1);
    CHECK(sql_column(db, "select state from jobs")[0] == "failed");
    const auto reason = sql_column(db, "select reason from jobs")[0];
    CHECK(reason.rfind("init() failed on every worker start: mini-batch 0 used its 2 tries", 0) ==
          0);
    CHECK(reason.find("InitError: asked to fail") != std::string::npos);
  }
  SUBCASE("run overruns the timeout") {
    TempDir dir("rt-native-timeout");
    make_files(dir / "data", 10);
    std::string yaml = job_yaml("  type: native\n  code: .\n  library: " + native_lib() +
                                "\n  program_arguments: --sleep-ms 60000\n");
    yaml.replace(yaml.find("timeout: 60"), 11, "timeout: 1");
    write_file(dir / "job.yaml", yaml);
    auto r = run_job(dir);
    INFO("stderr:\n" << r.err);
    const std::string db = dir / "fanout.db";
    CHECK(sql_int(db, "select count(*) from attempts where status='RUN_TIMEOUT'") == 2);
    CHECK(sql_int(db, "select count(*) from minibatches where state='failed'") == 1);
  }
}

TEST_CASE("integration.runtimes.builtin_noop_and_bad_libraries") {
  TempDir dir("rt-noop");
  make_files(dir / "data", 25);
  write_file(dir / "job.yaml", job_yaml("  type: native\n  library: builtin:noop\n"));
  auto r = run_job(dir);
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  const std::string db = dir / "fanout.db";
  CHECK(sql_int(db, "select sum(succeeded) from minibatches") == 25);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 3);
  CHECK(read_lines(dir / "out/rows.txt").empty());  // noop keeps no rows

  write_file(dir / "job.yaml", job_yaml("  type: native\n  library: builtin:nope\n"));
  auto bad = run_job(dir);
  CHECK(bad.status.code == 2);
  CHECK(bad.err.find("library") != std::string::npos);
  CHECK(bad.err.find("builtin:nope") != std::string::npos);

  write_file(dir / "job.yaml", job_yaml("  type: native\n  library: ./missing.so\n"));
  auto missing = run_job(dir);
  CHECK(missing.status.code == 2);
  CHECK(missing.err.find("missing.so") != std::string::npos);
}
