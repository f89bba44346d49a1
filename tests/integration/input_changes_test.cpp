// An input that changes around a job, through the real binaries: a symbolic link loop in the
// input folder, a table truncated or replaced while the job runs, an input folder changed between
// a crash and `fanout resume`, and a second run of a job on a shared interchange over the first
// run's output file. Each once lost, duplicated or corrupted rows with exit 0.
#include <doctest/doctest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>

#include "job_fixture.hpp"

using namespace fanout::test;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kFastBeats = fast_beats();

// 400 rows "id,value" with a 9-digit value (base + id), so that a version with another base has
// the same size: only what the client recorded at listing time tells them apart.
std::string table(long base) {
  std::string t = "id,value\n";
  for (long i = 0; i < 400; ++i) t += std::to_string(i) + "," + std::to_string(base + i) + "\n";
  return t;
}

// A job over ./tables (one file, t.csv) cut into ~1 kB mini-batches, on one worker, whose first
// run() changes the file as $CHANGE says (after its own mini-batch was read) and which returns "id
// value" rows.
void make_table_job(const TempDir& dir, const std::string& change) {
  write_file(dir / "tables/t.csv", table(100000000));
  write_file(dir / "src/score.py", R"PY(
import os, time

def run(mini_batch):
    path = os.environ["TABLE"]
    mark = path + ".changed"
    if not os.path.exists(mark):
        open(mark, "w").close()
        if os.environ["CHANGE"] == "truncate":
            os.truncate(path, os.path.getsize(path) - 7)  # mid-row
        else:
            with open(path + ".new", "w") as f:
                f.write("id,value\n" + "".join("%d,%d\n" % (i, 200000000 + i) for i in range(400)))
            os.replace(path + ".new", path)
    time.sleep(0.05)
    return ["%d %d" % (int(r.id), int(r.value)) for r in mini_batch.itertuples()]
)PY");
  JobSpec job;
  job.name = "table-change";
  job.data = "./tables";
  job.mini_batch_size = "1kb";
  job.concurrency = 1;
  job.max_retries = 3;
  job.timeout_s = 120;
  job.env = {{"TABLE", dir / "tables/t.csv"}, {"CHANGE", change}};
  write_file(dir / "job.yaml", job_yaml(job));
}

// Runs the table job on Debian's interpreter, which has pandas (as tests/integration/compat_test
// does).
RunResult run_table_job(const TempDir& dir) {
  return run_capture({fanout_bin(), "run", dir / "job.yaml", "--db", dir / "fanout.db", "--python",
                      "/usr/bin/python3", "--quiet"},
                     dir.path(), {}, std::chrono::seconds(180));
}

// The table job's end: the first mini-batch's rows, each intact; every later mini-batch failed
// once (no retry) as INPUT_CHANGED, naming the file and what was expected and found.
void check_table_job(const TempDir& dir, const RunResult& r) {
  const std::string db = dir / "fanout.db";
  INFO("stderr:\n" << r.err);
  CHECK(r.status.code != 0);  // not "succeeded"
  const long long batches = sql_int(db, "select count(*) from minibatches");
  CHECK(batches >= 4);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 1);
  CHECK(sql_int(db, "select count(*) from attempts where error_category='INPUT_CHANGED'") ==
        batches - 1);
  CHECK(sql_int(db, "select max(tries) from minibatches") == 1);
  auto msg = sql_column(db, "select error_message from attempts where status != 'RUN_DONE'");
  REQUIRE(!msg.empty());
  CHECK(msg[0].find("INPUT_CHANGED: " + dir / "tables/t.csv") == 0);
  CHECK(msg[0].find("expected size") != std::string::npos);
  // No row but those of the version the job listed, none cut short.
  auto lines = read_lines(dir / "out.txt");
  CHECK(!lines.empty());
  for (const auto& l : lines) {
    CAPTURE(l);
    const auto sp = l.find(' ');
    REQUIRE(sp != std::string::npos);
    CHECK(std::stol(l.substr(sp + 1)) == 100000000 + std::stol(l.substr(0, sp)));
  }
}

}  // namespace

// `ln -s . self` and `ln -s .. sub/up` in a folder of 20 files once made 2 million mini-batches
// in a minute: the folder lists 20 items, the job writes 20 rows, and each link is named once.
TEST_CASE("integration.input_changes.a_symlink_loop_lists_each_file_once") {
  TempDir dir("symloop");
  make_counting_job(dir.path(), "symloop", 20, "0");
  fs::create_directories(dir / "data/sub");
  fs::create_directory_symlink(".", dir / "data/self");
  fs::create_directory_symlink("..", dir / "data/sub/up");
  const std::string db = dir / "fanout.db";
  auto r = fanout_run(dir, "job.yaml", db, {}, std::chrono::seconds(120));
  INFO("stderr:\n" << r.err);
  CHECK(r.status.code == 0);
  CHECK(sql_int(db, "select count(*) from minibatches") == 20);
  check_rows_once(dir / "out.txt", 20);
  CHECK(r.err.find("warning: " + dir / "data/self: leads to the folder listed already as " +
                   dir / "data") != std::string::npos);
  CHECK(r.err.find("warning: " + dir / "data/sub/up: leads") != std::string::npos);
}

// A CSV truncated mid-row while the job runs once gave exit 0 and a row cut short
// ("10326 10000"): the mini-batches read after the change fail as INPUT_CHANGED, once each.
TEST_CASE("integration.input_changes.a_table_truncated_mid_job_fails_as_input_changed") {
  TempDir dir("tabtrunc");
  make_table_job(dir, "truncate");
  check_table_job(dir, run_table_job(dir));
}

// A CSV replaced by another version of the same size once gave exit 0 and rows of neither
// version: the file's modification time recorded at listing tells them apart.
TEST_CASE("integration.input_changes.a_table_replaced_mid_job_fails_as_input_changed") {
  TempDir dir("tabrepl");
  make_table_job(dir, "replace");
  check_table_job(dir, run_table_job(dir));
}

// Files removed and added between a crash and `fanout resume` were once skipped with "succeeded":
// resume refuses, naming what changed; --accept-changed-input goes on and the store records it.
TEST_CASE("integration.input_changes.resume_refuses_an_input_folder_changed_since_submission") {
  TempDir dir("resumechg");
  const std::string db = dir / "fanout.db";
  make_counting_job(dir.path(), "resume-changed", 12, "0.3");
  Cluster cl;
  cl.start_interchange(dir.path(), db, kFastBeats);
  cl.start_pool(dir.path(), "pool-a", 1);
  auto client = start_run(dir / "job.yaml", db, cl.client_ep, dir / "client");
  REQUIRE(wait_until([&] { return submitted_and_done(db, 2); }, std::chrono::seconds(60)));
  kill_all({&client, &cl.interchange, &cl.pools[0]});
  REQUIRE(sql_int(db, "select count(*) from minibatches where state!='succeeded'") > 0);

  fs::remove(dir / "data/file00010.txt");
  fs::remove(dir / "data/file00011.txt");
  write_file(dir / "data/new-a.txt", "new-a.txt\n");
  const std::vector<std::string> resume = {fanout_bin(), "resume",   "1",          "--db",
                                           db,           "--python", python_bin(), "--quiet"};
  auto refused = run_capture(resume, dir.path(), {}, std::chrono::seconds(120));
  INFO("refused stderr:\n" << refused.err);
  CHECK(refused.status.code == 2);
  CHECK(refused.err.find("input changed since it was submitted") != std::string::npos);
  CHECK(refused.err.find("1 added (e.g. " + dir / "data/new-a.txt)") != std::string::npos);
  CHECK(refused.err.find("2 removed (e.g. " + dir / "data/file00010.txt, " +
                         dir / "data/file00011.txt)") != std::string::npos);
  CHECK(refused.err.find("--accept-changed-input") != std::string::npos);
  CHECK(sql_column(db, "select state from jobs where id=1")[0] == "running");

  auto accepted = resume;
  accepted.push_back("--accept-changed-input");
  auto r = run_capture(accepted, dir.path(), {}, std::chrono::seconds(180));
  INFO("resume stderr:\n" << r.err);
  CHECK(r.status.code == 0);
  CHECK(r.err.find("resuming anyway") != std::string::npos);
  CHECK(sql_column(db, "select state from jobs where id=1")[0] == "succeeded");
  auto note = sql_column(
      db, "select json_extract(settings, '$.input_changed_on_resume[0]') from jobs where id=1");
  REQUIRE(note.size() == 1);
  CHECK(note[0].find("1 added") != std::string::npos);
  CHECK(note[0].find("2 removed") != std::string::npos);
}

// A second run of a job on a shared interchange once appended every row a second time (exit 0):
// it is refused as on the embedded default, with the same message and exit code, and
// --overwrite replaces the file.
TEST_CASE("integration.input_changes.a_rerun_on_a_shared_interchange_does_not_append") {
  TempDir dir("rerunix");
  const std::string db = dir / "fanout.db";
  make_counting_job(dir.path(), "rerun", 5, "0");
  Cluster cl;
  cl.start_interchange(dir.path(), db, kFastBeats);
  cl.start_pool(dir.path(), "pool-a", 2);
  INFO(cl.logs());
  const std::vector<std::string> run = run_argv(dir / "job.yaml", db, cl.client_ep);
  auto first = run_capture(run, dir.path(), {}, std::chrono::seconds(120));
  INFO("first stderr:\n" << first.err);
  REQUIRE(first.status.code == 0);
  check_rows_once(dir / "out.txt", 5);

  auto again = run_capture(run, dir.path(), {}, std::chrono::seconds(120));
  INFO("again stderr:\n" << again.err);
  auto embedded = fanout_run(dir, "job.yaml", dir / "embedded.db");
  INFO("embedded stderr:\n" << embedded.err);
  CHECK(again.status.code == 2);
  CHECK(embedded.status.code == 2);
  CHECK(error_line(again.err).find("holds") != std::string::npos);
  CHECK(again.err.find("--overwrite") != std::string::npos);
  CHECK(error_line(again.err) == error_line(embedded.err));
  check_rows_once(dir / "out.txt", 5);

  auto overwrite = run;
  overwrite.push_back("--overwrite");
  auto third = run_capture(overwrite, dir.path(), {}, std::chrono::seconds(120));
  INFO("third stderr:\n" << third.err);
  CHECK(third.status.code == 0);
  check_rows_once(dir / "out.txt", 5);
  cl.interchange.signal(SIGTERM);
  (void)cl.interchange.wait_for(std::chrono::seconds(30));
}

// A file name that is not UTF-8 once went raw into the store's TEXT columns, which Python's
// sqlite3 cannot read: the worker still gets the name's exact bytes, and every table and view of
// the store reads in Python, the name coming back exactly through surrogateescape.
TEST_CASE("integration.input_changes.a_file_name_that_is_not_utf8_is_stored_readably") {
  TempDir dir("latin1");
  make_files(dir / "data", 3);
  const std::string name = "caf\xe9.txt";  // latin-1
  write_file(dir / "data" + ("/" + name), "x\n");
  write_file(dir / "src/score.py", R"PY(
import os
def run(mini_batch):
    with open(mini_batch[0], "rb") as f:  # the exact name, or FileNotFoundError
        f.read()
    return [os.path.basename(mini_batch[0])]
)PY");
  write_file(dir / "job.yaml", counting_job_yaml("latin1", dir / "runs.txt", "0"));
  const std::string db = dir / "fanout.db";
  auto r = fanout_run(dir, "job.yaml", db);
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  auto lines = read_lines(dir / "out.txt");
  CHECK(std::count(lines.begin(), lines.end(), name) == 1);  // run() opened and named it
  auto py = run_capture({python_bin(), "-c", R"PY(
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
names = [n for (n,) in c.execute("select name from sqlite_master where type in ('table', 'view')")]
for n in names:
    c.execute('select * from "%s"' % n).fetchall()
found = [f for (d,) in c.execute("select detail from minibatch_inputs")
         for f in json.loads(d)["files"]]
want = sys.argv[2].encode("utf-8", "surrogateescape")
assert [f for f in found if f.encode("utf-8", "surrogateescape").endswith(b"/" + want)], found
print("read %d tables and views" % len(names))
)PY",
                         db, name},
                        dir.path(), {}, std::chrono::seconds(60));
  INFO("python stdout:\n" << py.out << "\npython stderr:\n" << py.err);
  CHECK(py.status.code == 0);
  CHECK(py.out.find("read ") == 0);
}

// A row holding "\n" writes two lines: the store once said 1 row per mini-batch while the file
// had 2. Rows are the lines written, so the two agree.
TEST_CASE("integration.input_changes.rows_in_the_store_match_the_lines_of_the_output") {
  TempDir dir("newlinerow");
  make_files(dir / "data", 6);
  write_file(dir / "src/score.py", R"PY(
import os
def run(mini_batch):
    name = os.path.basename(mini_batch[0])
    return [name + "\nsecond line of " + name, "plain " + name]
)PY");
  write_file(dir / "job.yaml", counting_job_yaml("newline", dir / "runs.txt", "0"));
  const std::string db = dir / "fanout.db";
  auto r = fanout_run(dir, "job.yaml", db);
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  CHECK(read_lines(dir / "out.txt").size() == 18);
  CHECK(sql_int(db, "select sum(rows) from minibatches") == 18);
  CHECK(sql_int(db, "select sum(rows) from attempts") == 18);
  CHECK(sql_int(db, "select sum(succeeded) from minibatches") == 6);  // items, as before
}
