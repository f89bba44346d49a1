// The happy path through the real binaries: fanout run (embedded default) over a folder of files
// with a Python entry script, then the output file, the store and fanout history.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "job_fixture.hpp"

using namespace fanout::test;

namespace {

const char* kScoreScript = R"PY(
import os
calls = 0
def init():
    global calls
    calls = 0
def run(mini_batch):
    global calls
    calls += 1
    return [os.path.basename(p) + " " + str(os.path.getsize(p)) for p in mini_batch]
)PY";

// Mini-batches of 10 files, 2 workers, 3 tries, rows into ./out/scores.txt.
JobSpec e2e_job() {
  JobSpec job;
  job.name = "e2e-score";
  job.output_key = "scores";
  job.output = "./out/scores.txt";
  job.mini_batch_size = "10";
  job.instance_count = 1;
  job.max_retries = 2;
  job.timeout_s = 60;
  return job;
}

}  // namespace

TEST_CASE("integration.end_to_end.thousand_files_two_workers") {
  TempDir dir("e2e");
  make_files(dir / "data", 1000);
  write_file(dir / "src/score.py", kScoreScript);
  write_file(dir / "job.yaml", job_yaml(e2e_job()));
  const std::string db = dir / "store/fanout.db";

  auto r = fanout_run(dir, "job.yaml", db);
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);

  // Exactly 1000 distinct rows, one per file, each mini-batch's rows contiguous.
  auto lines = read_lines(dir / "out/scores.txt");
  CHECK(lines.size() == 1000);
  std::set<std::string> distinct(lines.begin(), lines.end());
  CHECK(distinct.size() == 1000);
  CHECK(distinct.count("file00000.txt 14") == 1);
  CHECK(distinct.count("file00999.txt 14") == 1);
  for (std::size_t start = 0; start < lines.size(); start += 10) {
    // A mini-batch holds 10 consecutive files (sorted listing); its rows stay together.
    std::string first = lines[start].substr(4, 5);
    int base = std::stoi(first);
    CHECK(base % 10 == 0);
    for (int k = 0; k < 10; ++k) {
      char want[32];
      std::snprintf(want, sizeof want, "file%05d.txt 14", base + k);
      CHECK(lines[start + static_cast<std::size_t>(k)] == want);
    }
  }

  // The store: job succeeded, 100 mini-batches succeeded, one RUN_DONE attempt each.
  CHECK(sql_int(db, "select count(*) from jobs") == 1);
  CHECK(sql_column(db, "select state from jobs")[0] == "succeeded");
  CHECK(sql_column(db, "select name from jobs")[0] == "e2e-score");
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 100);
  CHECK(sql_int(db, "select count(*) from minibatches") == 100);
  CHECK(sql_int(db, "select sum(items) from minibatches") == 1000);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 100);
  CHECK(sql_int(db, "select count(distinct worker_pid) from attempts") >= 1);
  CHECK(sql_int(db, "select count(*) from attempts where elapsed_s is null or start <= 0") == 0);
  CHECK(sql_int(db, "select count(*) from pools") == 1);
  // The private interchange told its pool to go before it stopped: it left cleanly.
  CHECK(sql_column(db, "select state from pools")[0] == "gone");
  // The job's logs folder.
  auto log_dir = sql_column(db, "select log_dir from jobs")[0];
  CHECK(read_text(log_dir + "/job_result.txt").find("state: succeeded") != std::string::npos);

  // fanout history shows the job.
  auto h = run_capture({fanout_bin(), "history", "--db", db}, dir.path());
  CHECK(h.status.code == 0);
  CHECK(h.out.find("e2e-score") != std::string::npos);
  CHECK(h.out.find("succeeded") != std::string::npos);
  CHECK(h.out.find("100/100") != std::string::npos);
  auto hj = run_capture({fanout_bin(), "history", "--db", db, "--json"}, dir.path());
  CHECK(hj.out.find("\"state\":\"succeeded\"") != std::string::npos);
}

TEST_CASE("integration.end_to_end.raising_run_is_recorded_and_retried") {
  TempDir dir("e2e-raise");
  make_files(dir / "data", 30);
  // Mini-batches holding file00010 raise on every try: 1 mini-batch fails after 2 tries.
  write_file(dir / "src/score.py", fail_on_script("file00010"));
  JobSpec job = e2e_job();
  job.max_retries = 1;
  write_file(dir / "job.yaml", job_yaml(job));
  const std::string db = dir / "fanout.db";
  auto r = fanout_run(dir, "job.yaml", db);
  INFO("stderr:\n" << r.err);
  // Thresholds are -1 (ignore), so the job does not fail with one failed mini-batch, as in PRS,
  // but it is not plainly a success either: state partial, exit 4.
  CHECK(r.status.code == 4);
  CHECK(sql_column(db, "select state from jobs")[0] == "partial");
  CHECK(r.err.find("first error: mini-batch 1 try 1 on ") != std::string::npos);
  CHECK(r.err.find("RUN_EXCEPTION: ValueError: cannot score file00010.txt") != std::string::npos);
  CHECK(r.err.find("attempts: 4 (2 failed)") != std::string::npos);
  CHECK(read_lines(dir / "out/scores.txt").size() == 20);
  CHECK(sql_int(db, "select count(*) from minibatches where state='failed'") == 1);
  CHECK(sql_int(db, "select tries from minibatches where state='failed'") == 2);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_EXCEPTION'") == 2);
  auto msg = sql_column(db, "select error_message from attempts where status='RUN_EXCEPTION'");
  REQUIRE(!msg.empty());
  CHECK(msg[0].find("ValueError: cannot score file00010.txt") != std::string::npos);
  CHECK(msg[0].find("Traceback") != std::string::npos);
  CHECK(sql_column(db, "select error_category from attempts where status='RUN_EXCEPTION'")[0] ==
        "ValueError");
  // resume --failed: with the script fixed, only the failed mini-batch runs
  // again; its rows are appended, the others' are not repeated, and the job ends succeeded.
  write_file(dir / "src/score.py", echo_script());
  auto again_failed = run_capture(
      {fanout_bin(), "resume", "1", "--failed", "--db", db, "--python", python_bin(), "--quiet"},
      dir.path());
  INFO("resume stderr:\n" << again_failed.err);
  CHECK(again_failed.status.code == 0);
  CHECK(sql_column(db, "select state from jobs where id = 1")[0] == "succeeded");
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 3);
  CHECK(sql_int(db, "select count(*) from attempts where minibatch_id = 1") == 3);
  check_rows_once(dir / "out/scores.txt", 30);
  auto nothing = run_capture({fanout_bin(), "resume", "1", "--failed", "--db", db}, dir.path());
  CHECK(nothing.status.code == 0);
  CHECK(nothing.err.find("nothing to resume") != std::string::npos);

  // --allow-partial: ParallelRunStep's exit 0 for the same outcome.
  write_file(dir / "src/score.py", fail_on_script("file00010"));
  auto again = fanout_run(dir, "job.yaml", db, {"--allow-partial", "--overwrite"});
  INFO("stderr:\n" << again.err);
  CHECK(again.status.code == 0);
  CHECK(sql_column(db, "select state from jobs where id = 2")[0] == "partial");
}
