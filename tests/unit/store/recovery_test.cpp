// Tests for recovery (src/fanout/store/detail/recovery.hpp, through TaskStore::recover()): what
// is left to run, tries given back, output files cut back, undecodable jobs failed. docs/store.md
// section 5.
#include "fanout/store/detail/recovery.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fanout/store/db.hpp"
#include "fanout/store/reader.hpp"
#include "fanout/store/task_store.hpp"
#include "fanout/util/error.hpp"

#include "scratch_dir.hpp"
#include "store_fixtures.hpp"

using namespace fanout::test;  // NOLINT: the store fixtures
using fanout::ErrorCode;
using fanout::Failure;
using fanout::store::AttemptRecord;
using fanout::store::Db;
using fanout::store::kSchemaVersion;
using fanout::store::PoolRecord;
using fanout::store::Statement;
using fanout::store::StoreReader;
using fanout::store::TaskStore;
namespace proto = fanout::proto;
namespace fs = std::filesystem;

TEST_CASE("store.recovery.recovers_truncates_output") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  const std::string out = dir.file("job1/out.txt");
  const std::string out2 = dir.file("job2/out.txt");
  using S = proto::AttemptStatus;
  {
    TaskStore store(path, quiet_logger());
    store.create_job(1, make_spec(out), 10.0);
    store.add_minibatches(
        1, {make_batch(0, {"a0", "a1"}), make_batch(1, {"b0", "b1"}), make_batch(2, {"c0", "c1"}),
            make_batch(3, {"d0", "d1"}, "{\"k\":3}"), make_batch(4, {"e0", "e1"})});
    store.mark_running(1, 0, 1);
    store.record_attempt(make_attempt(1, 1, 0, 1, S::RunDone, "succeeded", "r0\nr1\n", true));
    store.mark_running(1, 1, 1);
    store.record_attempt(make_attempt(2, 1, 1, 1, S::RunException, "pending"));
    store.mark_running(1, 1, 2);  // running at the crash: its second try is given back
    store.mark_running(1, 2, 1);
    store.record_attempt(make_attempt(3, 1, 2, 1, S::PoolLost, "pending"));
    store.mark_running(1, 4, 1);
    store.record_attempt(make_attempt(4, 1, 4, 1, S::RunDone, "succeeded", "r4\n", true));
    // A finished job and a job whose output file disappeared.
    store.create_job(2, make_spec(out2), 11.0);
    store.add_minibatches(2, {make_batch(0, {"z"})});
    store.create_job(3, make_spec(""), 12.0);
    store.finish_job(3, "succeeded", "", 13.0);
  }
  CHECK(slurp(out) == "r0\nr1\nr4\n");
  // What a writer that crashed before committing leaves behind.
  append(out, "garbage row\npartial");
  fs::remove(out2);

  TaskStore store(path, quiet_logger());
  CHECK(store.max_job_id() == 3);
  CHECK(store.max_attempt_id() == 4);
  auto jobs = store.recover();
  REQUIRE(jobs.size() == 2);
  const auto& u = jobs[0];
  CHECK(u.job_id == 1);
  CHECK(u.spec.name == "demo");
  CHECK(u.spec.output_path == out);
  CHECK(u.spec.max_tries == 3);
  CHECK(u.spec.args == std::vector<std::string>{"--model", "m.pkl"});
  CHECK_FALSE(u.submit_done);
  CHECK(u.succeeded == 2);
  CHECK(u.failed == 0);
  CHECK(u.items_succeeded == 4);
  CHECK(u.items_failed == 0);
  CHECK(u.attempts_failed == 2);
  REQUIRE(u.remaining.size() == 3);
  REQUIRE(u.remaining_tries.size() == 3);
  CHECK(u.remaining[0].index == 1);
  CHECK(u.remaining[0].items == std::vector<std::string>{"b0", "b1"});
  CHECK(u.remaining[0].detail.empty());  // the client sent none
  CHECK(u.remaining_tries[0] == 1);      // running (try 2) at the crash: back to 1
  CHECK(u.remaining[1].index == 2);
  CHECK(u.remaining[1].items == std::vector<std::string>{"c0", "c1"});
  CHECK(u.remaining_tries[1] == 1);
  CHECK(u.remaining[2].index == 3);
  CHECK(u.remaining[2].items == std::vector<std::string>{"d0", "d1"});
  CHECK(u.remaining[2].detail == "{\"k\":3}");
  CHECK(u.remaining_tries[2] == 0);
  CHECK(jobs[1].job_id == 2);
  CHECK(jobs[1].remaining.size() == 1);

  // The output is cut back to the committed rows; a missing one is created empty.
  CHECK(slurp(out) == "r0\nr1\nr4\n");
  REQUIRE(fs::exists(out2));
  CHECK(fs::file_size(out2) == 0);
  CHECK(sql_int(path, "SELECT count(*) FROM minibatches WHERE state = 'running'") == 0);
  CHECK(sql_int(path, "SELECT tries FROM minibatches WHERE job_id = 1 AND id = 1") == 1);

  // Resumed work appends after the committed end, though create_job was not called again.
  store.mark_running(1, 1, 2);
  store.record_attempt(make_attempt(5, 1, 1, 2, S::RunDone, "succeeded", "r2\n", true));
  store.flush();
  CHECK(store.ok());
  CHECK(slurp(out) == "r0\nr1\nr4\nr2\n");
  CHECK(sql_int(path, "SELECT output_offset FROM minibatches WHERE job_id = 1 AND id = 1") == 9);
  CHECK(sql_int(path, "SELECT output_bytes FROM minibatches WHERE job_id = 1 AND id = 1") == 3);
}

TEST_CASE("store.recovery.recover_fails_undecodable_job") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  {
    TaskStore store(path, quiet_logger());
    store.create_job(1, make_spec(""), 10.0);
  }
  {
    Db db(path, Db::Mode::ReadWriteCreate);
    db.exec("UPDATE jobs SET spec = x'c1c1c1' WHERE id = 1");
  }
  TaskStore store(path, quiet_logger());
  CHECK(store.recover().empty());
  CHECK(sql_text(path, "SELECT state FROM jobs WHERE id = 1") == "failed");
  CHECK(sql_text(path, "SELECT reason FROM jobs WHERE id = 1").find("job spec") !=
        std::string::npos);
}

// What the output file held before the job started is not the job's to remove.
TEST_CASE("store.recovery.never_cuts_below_what_the_file_held_when_the_job_started") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  const std::string out = dir.file("out.txt");
  std::string before;
  for (int i = 0; i < 1000; ++i) before += "line " + std::to_string(i) + "\n";
  append(out, before);
  {
    TaskStore store(path, quiet_logger());
    store.create_job(1, make_spec(out), 10.0);
    store.add_minibatches(1, {make_batch(0, {"a"})});
  }
  CHECK(sql_int(path, "SELECT output_start FROM jobs WHERE id = 1") ==
        static_cast<std::int64_t>(before.size()));
  append(out, "uncommitted");
  TaskStore store(path, quiet_logger());
  REQUIRE(store.recover().size() == 1);
  CHECK(slurp(out) == before);
}

// Recovery of one job never cuts rows another job committed into the same file.
TEST_CASE("store.recovery.never_cuts_rows_another_job_committed_to_the_file") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  const std::string out = dir.file("out.txt");
  using S = proto::AttemptStatus;
  {
    TaskStore store(path, quiet_logger());
    store.create_job(1, make_spec(out), 10.0);  // unfinished, nothing committed
    store.add_minibatches(1, {make_batch(0, {"a"})});
    store.flush();
    store.create_job(2, make_spec(out), 11.0);  // a later job on the same file, succeeded
    store.add_minibatches(2, {make_batch(0, {"b"})});
    store.record_attempt(make_attempt(1, 2, 0, 1, S::RunDone, "succeeded", "job2 row\n", true));
    store.finish_job(2, "succeeded", "", 12.0);
  }
  CHECK(slurp(out) == "job2 row\n");
  TaskStore store(path, quiet_logger());
  REQUIRE(store.recover().size() == 1);
  CHECK(slurp(out) == "job2 row\n");
}

// An interchange resumes only the jobs its own user submitted: a job recorded as another user's
// (owner_uid) is left as it is; one recorded before owner_uid existed (NULL) is resumed.
TEST_CASE("store.recovery.resumes_only_this_users_jobs") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  {
    TaskStore store(path, quiet_logger());
    for (std::uint64_t id : {1, 2, 3}) {
      store.create_job(id, make_spec(""), 10.0);
      store.add_minibatches(id, {make_batch(0, {"a"})});
    }
  }
  {
    Db db(path, Db::Mode::ReadWriteCreate);
    CHECK(sql_int(path, "SELECT count(*) FROM jobs WHERE owner_uid = " +
                            std::to_string(::geteuid())) == 3);
    db.exec(("UPDATE jobs SET owner_uid = " + std::to_string(::geteuid() + 1) + " WHERE id = 2")
                .c_str());
    db.exec("UPDATE jobs SET owner_uid = NULL WHERE id = 3");
  }
  TaskStore store(path, quiet_logger());
  auto jobs = store.recover();
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0].job_id == 1);
  CHECK(jobs[1].job_id == 3);
  CHECK(sql_int(path, "SELECT count(*) FROM jobs WHERE id = 2 AND state = 'running'") == 1);
}
