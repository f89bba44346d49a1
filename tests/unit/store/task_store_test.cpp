// Tests for TaskStore and StoreReader (src/fanout/store/task_store.hpp): migrations, the batched
// writer, the append_row output file and its offsets, recovery, and read-back. docs/store.md.
#include "fanout/store/task_store.hpp"

#include <doctest/doctest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fanout/store/db.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/log.hpp"

#include "scratch_dir.hpp"

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

using fanout::test::ScratchDir;
using fanout::test::slurp;

namespace {

namespace fs = std::filesystem;

fanout::Logger quiet_logger() { return fanout::make_logger("store-test", spdlog::level::off); }

void append(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << bytes;
}

// Raw SQL on a store file, as a user's sqlite3 session would run it.
std::int64_t sql_int(const std::string& db_path, const std::string& sql) {
  Db db(db_path, Db::Mode::ReadOnly);
  Statement st(db, sql);
  REQUIRE_MESSAGE(st.step(), sql);
  return st.column_int64(0);
}

std::string sql_text(const std::string& db_path, const std::string& sql) {
  Db db(db_path, Db::Mode::ReadOnly);
  Statement st(db, sql);
  REQUIRE_MESSAGE(st.step(), sql);
  return std::string(st.column_text(0));
}

proto::JobSpec make_spec(const std::string& output_path) {
  proto::JobSpec spec;
  spec.name = "demo";
  spec.spec_path = "/jobs/demo.yaml";
  spec.runtime = "python";
  spec.entry_script = "score.py";
  spec.output_path = output_path;
  spec.log_dir = "/jobs/logs";
  spec.max_tries = 3;
  spec.settings_json = R"({"mini_batch_size": "2"})";
  spec.args = {"--model", "m.pkl"};
  return spec;
}

proto::MiniBatch make_batch(std::uint64_t index, std::vector<std::string> items,
                            std::string detail = {}) {
  return proto::MiniBatch{index, std::move(items), std::move(detail)};
}

AttemptRecord make_attempt(std::uint64_t task_id, std::uint64_t job_id, std::uint64_t index,
                           std::uint32_t attempt, proto::AttemptStatus status,
                           std::string minibatch_state, std::string output = {},
                           bool write_output = false) {
  AttemptRecord rec;
  rec.pool_id = 7;
  rec.pool_name = "pool-a";
  rec.minibatch_state = std::move(minibatch_state);
  rec.write_output = write_output;
  auto& r = rec.result;
  r.task_id = task_id;
  r.job_id = job_id;
  r.index = index;
  r.attempt = attempt;
  r.status = static_cast<std::uint8_t>(status);
  r.items = 2;
  const bool ok = status == proto::AttemptStatus::RunDone;
  r.succeeded = ok ? 2 : 0;
  r.failed = ok ? 0 : 2;
  r.rows = static_cast<std::uint64_t>(std::count(output.begin(), output.end(), '\n'));
  r.output = std::move(output);
  r.node = "node1";
  r.process = "process001";
  r.worker_pid = 4242;
  r.start = 1700000000.5;
  r.elapsed_s = 0.25;
  r.cpu_s = 0.125;
  r.run_s = 0.2;
  if (!ok) {
    r.error_category = "RUN_EXCEPTION";
    r.error_message = "ValueError: bad \"row\"";
  }
  return rec;
}

}  // namespace

TEST_CASE("store.task_store.migrations_create_schema_and_reopen_is_idempotent") {
  ScratchDir dir;
  const std::string path = dir.file("nested/folder/fanout.db");  // parents are created
  {
    TaskStore store(path, quiet_logger());
    CHECK(store.ok());
    CHECK(store.path() == path);
    CHECK(store.max_job_id() == 0);
    CHECK(store.max_attempt_id() == 0);
    store.create_job(3, make_spec(""), 100.0);
  }
  CHECK(sql_int(path, "PRAGMA user_version") == kSchemaVersion);
  CHECK(sql_text(path, "PRAGMA journal_mode") == "wal");
  for (const char* name : {"jobs", "minibatches", "attempts", "pools"}) {
    CAPTURE(name);
    CHECK(sql_int(path, std::string("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                    "AND name = '") +
                            name + "'") == 1);
  }
  CHECK(sql_int(path,
                "SELECT count(*) FROM sqlite_master WHERE type = 'view' AND "
                "name = 'job_counts'") == 1);
  CHECK(sql_int(path,
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                "name = 'attempts_minibatch'") == 1);

  // Reopening applies nothing and keeps the data.
  const auto objects = sql_int(path, "SELECT count(*) FROM sqlite_master");
  {
    TaskStore store(path, quiet_logger());
    CHECK(store.max_job_id() == 3);
  }
  CHECK(sql_int(path, "PRAGMA user_version") == kSchemaVersion);
  CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master") == objects);
  CHECK(sql_int(path, "SELECT count(*) FROM jobs") == 1);
}

TEST_CASE("store.task_store.refuses_newer_schema") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  { TaskStore store(path, quiet_logger()); }
  {
    Db db(path, Db::Mode::ReadWriteCreate);
    db.exec("PRAGMA user_version = 7");
  }
  const std::string newer = "store schema version 7 is newer than this fanout supports (" +
                            std::to_string(kSchemaVersion) + ")";
  SUBCASE("writer") {
    try {
      TaskStore store(path, quiet_logger());
      FAIL("opened a store of a newer schema");
    } catch (const Failure& f) {
      CHECK(f.error().code == ErrorCode::Version);
      CHECK(f.error().message.find(path) != std::string::npos);
      CHECK(f.error().message.find(newer) != std::string::npos);
    }
  }
  SUBCASE("reader") {
    try {
      StoreReader reader(path);
      FAIL("opened a store of a newer schema");
    } catch (const Failure& f) {
      CHECK(f.error().code == ErrorCode::Version);
      CHECK(f.error().message.find(path) != std::string::npos);
      CHECK(f.error().message.find(newer) != std::string::npos);
    }
  }
}

TEST_CASE("store.task_store.reader_refuses_missing_file") {
  ScratchDir dir;
  const std::string path = dir.file("absent.db");
  try {
    StoreReader reader(path);
    FAIL("opened a missing store");
  } catch (const Failure& f) {
    CHECK(f.error().code == ErrorCode::NotFound);
    CHECK(f.error().message == path + ": no such store");
  }
  CHECK_FALSE(fs::exists(path));  // read-only: never created
}

TEST_CASE("store.task_store.records_job_lifecycle") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  const std::string out = dir.file("out/parallel_run_step.txt");
  {
    TaskStore store(path, quiet_logger());
    store.create_job(1, make_spec(out), 1000.0);
    store.add_minibatches(1, {make_batch(0, {"/in/a.csv", "/in/b.csv"}),
                              make_batch(1, {"/in/q\"uote.csv", "/in/back\\slash\n\t\x01.csv"}),
                              make_batch(2, {"/in/e.csv", "/in/f.csv"}, R"({"custom": 1})")});
    store.set_submit_done(1, 3);
    for (std::uint64_t i = 0; i < 3; ++i) store.mark_running(1, i, 1);
    using S = proto::AttemptStatus;
    store.record_attempt(make_attempt(1, 1, 0, 1, S::RunDone, "succeeded", "a\nb\n", true));
    store.record_attempt(make_attempt(2, 1, 1, 1, S::RunException, "pending"));
    store.record_attempt(make_attempt(3, 1, 2, 1, S::RunTimeout, "pending"));
    store.mark_running(1, 1, 2);
    store.mark_running(1, 2, 2);
    store.record_attempt(make_attempt(4, 1, 1, 2, S::RunDone, "succeeded", "cc\n", true));
    store.record_attempt(make_attempt(5, 1, 2, 2, S::WorkerLost, "failed"));
    store.upsert_pool(PoolRecord{7, "pool-a", "node1", 4, 2, 99, "0.1.0", "connected", 10, 11});
    store.finish_job(1, "failed", "mini_batch_error_threshold 0 exceeded: 1 failed", 2000.0);
    store.flush();
    CHECK(store.ok());
    CHECK(store.max_job_id() == 1);
    CHECK(store.max_attempt_id() == 5);

    // Readers see committed data while the writer is still open.
    StoreReader reader(path);
    auto job = reader.job(1);
    REQUIRE(job.has_value());
    CHECK(job->name == "demo");
    CHECK(job->state == "failed");
    CHECK(job->reason == "mini_batch_error_threshold 0 exceeded: 1 failed");
    CHECK(job->created == 1000.0);
    CHECK(job->ended == 2000.0);
    CHECK(job->total == 3);
    CHECK(job->succeeded == 2);
    CHECK(job->failed == 1);
    CHECK(job->items_succeeded == 4);
    CHECK(job->items_failed == 2);
    CHECK(job->attempts == 5);
    CHECK(job->output_path == out);
    CHECK(job->log_dir == "/jobs/logs");
    CHECK_FALSE(reader.job(2).has_value());
  }

  // The output holds exactly the succeeded rows, each mini-batch's at its recorded offset.
  CHECK(slurp(out) == "a\nb\ncc\n");
  CHECK(sql_int(path, "SELECT output_offset FROM minibatches WHERE id = 0") == 0);
  CHECK(sql_int(path, "SELECT output_bytes FROM minibatches WHERE id = 0") == 4);
  CHECK(sql_int(path, "SELECT output_offset FROM minibatches WHERE id = 1") == 4);
  CHECK(sql_int(path, "SELECT output_bytes FROM minibatches WHERE id = 1") == 3);
  CHECK(sql_int(path, "SELECT output_offset IS NULL FROM minibatches WHERE id = 2") == 1);

  // States, tries and counts, as a user's SQL sees them.
  CHECK(sql_text(path,
                 "SELECT group_concat(state, ',') FROM (SELECT state FROM minibatches "
                 "ORDER BY id)") == "succeeded,succeeded,failed");
  CHECK(sql_text(path,
                 "SELECT group_concat(tries, ',') FROM (SELECT tries FROM minibatches "
                 "ORDER BY id)") == "1,2,2");
  CHECK(sql_text(path,
                 "SELECT group_concat(status, ',') FROM (SELECT status FROM attempts "
                 "ORDER BY id)") == "RUN_DONE,RUN_EXCEPTION,RUN_TIMEOUT,RUN_DONE,WORKER_LOST");
  CHECK(sql_int(path, "SELECT rows FROM minibatches WHERE id = 0") == 2);
  CHECK(sql_text(path, "SELECT error_message FROM attempts WHERE id = 2") ==
        "ValueError: bad \"row\"");
  CHECK(sql_text(path, "SELECT pool || '/' || node || '/' || process FROM attempts WHERE id = 1") ==
        "pool-a/node1/process001");
  CHECK(sql_int(path, "SELECT attempts_failed FROM job_counts WHERE job_id = 1") == 3);
  CHECK(sql_text(path, "SELECT settings FROM jobs WHERE id = 1") == R"({"mini_batch_size": "2"})");
  CHECK(sql_text(path, "SELECT runtime || ' ' || entry_script FROM jobs") == "python score.py");
  CHECK(sql_int(path, "SELECT submit_done FROM jobs") == 1);
  CHECK(sql_text(path, "SELECT state FROM pools WHERE id = 7") == "connected");

  // Details: the client's own, or {"files": [...]} made valid JSON whatever the paths hold.
  CHECK(sql_text(path, "SELECT detail FROM minibatch_inputs WHERE minibatch_id = 2") ==
        R"({"custom": 1})");
  CHECK(sql_int(path, "SELECT count(*) FROM minibatch_inputs WHERE json_valid(detail)") == 3);
  CHECK(sql_text(path,
                 "SELECT json_extract(detail, '$.files[1]') FROM minibatch_inputs WHERE "
                 "minibatch_id = 0") == "/in/b.csv");
  CHECK(sql_text(path,
                 "SELECT json_extract(detail, '$.files[0]') FROM minibatch_inputs WHERE "
                 "minibatch_id = 1") == "/in/q\"uote.csv");
  CHECK(sql_text(path,
                 "SELECT json_extract(detail, '$.files[1]') FROM minibatch_inputs WHERE "
                 "minibatch_id = 1") == "/in/back\\slash\n\t\x01.csv");
  CHECK(sql_int(path,
                "SELECT instr(detail, '\\n\\t\\u0001') > 0 FROM minibatch_inputs WHERE "
                "minibatch_id = 1") == 1);

  StoreReader reader(path);
  auto all = reader.history(10);
  REQUIRE(all.size() == 1);
  CHECK(all[0].id == 1);
  CHECK(reader.history(10, "failed").size() == 1);
  CHECK(reader.history(10, "running").empty());
}

TEST_CASE("store.task_store.dispatch_and_result_in_one_transaction") {
  // Queued back to back, most of these land in the same transaction, where the writer skips a
  // mark_running that a later result overwrites, but never one that follows a result (a retry).
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  constexpr std::uint64_t kN = 2000;
  using S = proto::AttemptStatus;
  {
    TaskStore store(path, quiet_logger());
    store.create_job(1, make_spec(""), 10.0);
    std::uint64_t task = 0;
    for (std::uint64_t i = 0; i < kN; ++i) {
      store.add_minibatches(1, {make_batch(i, {"a", "b"})});
      store.mark_running(1, i, 1);
      if (i % 2 == 0) {
        store.record_attempt(make_attempt(++task, 1, i, 1, S::RunDone, "succeeded"));
      } else {
        store.record_attempt(make_attempt(++task, 1, i, 1, S::RunException, "pending"));
        store.mark_running(1, i, 2);  // the retry is in flight
      }
    }
  }
  CHECK(sql_int(path,
                "SELECT count(*) FROM minibatches WHERE id % 2 = 0 AND "
                "state = 'succeeded' AND tries = 1") == kN / 2);
  CHECK(sql_int(path,
                "SELECT count(*) FROM minibatches WHERE id % 2 = 1 AND "
                "state = 'running' AND tries = 2") == kN / 2);
}

namespace {

// Polls `pred` until true, for up to 20 s.
bool wait_for(const std::function<bool()>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Polls `sql` (one integer) on the store file until it returns `want`, for up to 20 s.
bool wait_for_int(const std::string& path, const std::string& sql, std::int64_t want) {
  return wait_for([&] { return sql_int(path, sql) == want; });
}

// One snapshot of what a crash would leave: 1 when the job's minibatches rows are exactly the
// indexes 0 .. count-1 and each has its minibatch_inputs row.
constexpr const char* kCommittedIsPrefix =
    "SELECT count(*) = coalesce(max(id) + 1, 0) AND "
    "count(*) = (SELECT count(*) FROM minibatch_inputs WHERE job_id = 1) "
    "FROM minibatches WHERE job_id = 1";

}  // namespace

TEST_CASE("store.task_store.held_submissions_keep_committed_rows_a_prefix") {
  // The writer holds a submitted mini-batch's rows back to write them with its first result. A
  // result committed for mini-batch 60 must bring 0..59 with it: a client resubmits after a crash
  // from the count of what is committed, so a hole would never run.
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  using S = proto::AttemptStatus;
  {
    TaskStore store(path, quiet_logger());
    store.create_job(1, make_spec(""), 10.0);
    std::vector<proto::MiniBatch> batches;
    for (std::uint64_t i = 0; i < 100; ++i) batches.push_back(make_batch(i, {"a", "b"}));
    store.add_minibatches(1, std::move(batches));
    for (std::uint64_t i = 0; i < 100; ++i) store.mark_running(1, i, 1);
    store.record_attempt(make_attempt(1, 1, 60, 1, S::RunDone, "succeeded"));
    // No flush: this is what the writer committed by itself.
    REQUIRE(wait_for_int(path, "SELECT count(*) FROM attempts", 1));
    CHECK(sql_int(path, kCommittedIsPrefix) == 1);
    CHECK(sql_int(path,
                  "SELECT count(*) FROM minibatches WHERE id < 60 AND state = 'running' "
                  "AND tries = 1") == 60);
    CHECK(sql_text(path,
                   "SELECT state || ' ' || tries || ' ' || items || ' ' || succeeded "
                   "FROM minibatches WHERE id = 60") == "succeeded 1 2 2");
    CHECK(sql_text(path, "SELECT detail FROM minibatch_inputs WHERE minibatch_id = 60") ==
          R"({"files": ["a", "b"]})");
  }
  CHECK(sql_int(path, "SELECT count(*) FROM minibatches") == 100);
  CHECK(sql_int(path, "SELECT count(*) FROM minibatch_inputs") == 100);
  CHECK(sql_int(path, "SELECT count(*) FROM minibatches WHERE state = 'running' AND tries = 1") ==
        99);
}

TEST_CASE("store.task_store.held_submissions_are_written_without_a_result") {
  // Mini-batches that get no result soon (long tasks, no pool yet) still show in the store,
  // pending or running, without a flush.
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  TaskStore store(path, quiet_logger());
  store.create_job(1, make_spec(""), 10.0);
  store.add_minibatches(1, {make_batch(0, {"a"}), make_batch(1, {"b"}), make_batch(2, {"c"})});
  store.mark_running(1, 1, 1);
  CHECK(wait_for_int(path, "SELECT count(*) FROM minibatches", 3));
  CHECK(sql_text(path,
                 "SELECT group_concat(state, ' ') FROM (SELECT state FROM minibatches "
                 "ORDER BY id)") == "pending running pending");
  CHECK(sql_int(path, "SELECT count(*) FROM minibatch_inputs") == 3);
}

TEST_CASE("store.task_store.resubmitted_minibatches_are_written_once") {
  // After an interchange restart a client resubmits from the store's count, which can overlap
  // what the writer already holds or wrote; each mini-batch keeps one row, and one dispatched
  // again is marked running with its new try.
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  {
    TaskStore store(path, quiet_logger());
    store.create_job(1, make_spec(""), 10.0);
    std::vector<proto::MiniBatch> first, again;
    for (std::uint64_t i = 0; i < 5; ++i) first.push_back(make_batch(i, {"f"}));
    for (std::uint64_t i = 2; i < 7; ++i) again.push_back(make_batch(i, {"f"}));
    store.add_minibatches(1, std::move(first));
    store.add_minibatches(1, std::move(again));  // 2..4 are held already
    store.mark_running(1, 3, 1);
    store.flush();
    CHECK(sql_int(path, "SELECT count(*) FROM minibatches") == 7);
    CHECK(sql_int(path, "SELECT count(*) FROM minibatch_inputs") == 7);
    store.add_minibatches(1, {make_batch(2, {"f"})});  // written already
    store.mark_running(1, 2, 2);
  }
  CHECK(sql_int(path, "SELECT count(*) FROM minibatches") == 7);
  CHECK(sql_text(path,
                 "SELECT group_concat(state || ':' || tries, ' ') FROM (SELECT state, tries "
                 "FROM minibatches ORDER BY id)") ==
        "pending:0 pending:0 running:2 running:1 pending:0 pending:0 pending:0");
}

TEST_CASE("store.task_store.history_is_newest_first") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  {
    TaskStore store(path, quiet_logger());
    for (std::uint64_t id = 1; id <= 5; ++id) {
      store.create_job(id, make_spec(""), 100.0 + static_cast<double>(id));
      store.add_minibatches(id, {make_batch(0, {"x"})});
    }
    store.finish_job(2, "succeeded", "", 300);
    store.finish_job(4, "succeeded", "", 300);
    store.upsert_pool(PoolRecord{1, "p", "n", 1, 0, 1, "b", "connected", 1, 1});
    store.upsert_pool(PoolRecord{1, "p", "n", 1, 0, 1, "b", "lost", 1, 2});
  }
  StoreReader reader(path);
  auto three = reader.history(3);
  REQUIRE(three.size() == 3);
  CHECK(three[0].id == 5);
  CHECK(three[1].id == 4);
  CHECK(three[2].id == 3);
  CHECK(three[0].ended == 0);  // still running
  CHECK(three[0].total == 1);  // known mini-batches, before SubmitEnd
  CHECK(reader.history(0).size() == 5);
  auto done = reader.history(0, "succeeded");
  REQUIRE(done.size() == 2);
  CHECK(done[0].id == 4);
  CHECK(done[1].id == 2);
  // upsert_pool replaces the row.
  CHECK(sql_int(path, "SELECT count(*) FROM pools") == 1);
  CHECK(sql_text(path, "SELECT state FROM pools") == "lost");
}

TEST_CASE("store.task_store.recovers_truncates_output") {
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

TEST_CASE("store.task_store.recover_fails_undecodable_job") {
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

TEST_CASE("store.task_store.write_error_makes_store_not_ok") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  const std::string blocker = dir.file("blocker");
  append(blocker, "a file, not a folder");
  TaskStore store(path, quiet_logger());
  store.create_job(1, make_spec(blocker + "/out.txt"), 10.0);  // the output cannot be opened
  store.flush();  // returns: a failed batch counts as done
  CHECK_FALSE(store.ok());
  store.create_job(2, make_spec(""), 10.0);  // dropped
  store.flush();
  CHECK(sql_int(path, "SELECT count(*) FROM jobs") == 0);  // the failed batch was rolled back
}

TEST_CASE("store.task_store.issue_6.idle_after_a_write_error_with_held_minibatches") {
  // Held mini-batches come due on a timer; once the store has failed nothing is written, and
  // the writer must then wait for work again rather than wake at a deadline already past.
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  const std::string blocker = dir.file("blocker");
  append(blocker, "a file, not a folder");
  TaskStore store(path, quiet_logger());
  store.create_job(1, make_spec(""), 10.0);
  store.add_minibatches(1, {make_batch(0, {"a"}), make_batch(1, {"b"})});
  // Committed, its mini-batches held (a flush would write them).
  REQUIRE(wait_for_int(path, "SELECT count(*) FROM jobs", 1));
  store.create_job(2, make_spec(blocker + "/out.txt"), 10.0);  // fails the next transaction
  REQUIRE(wait_for([&] { return !store.ok(); }));
  const auto cpu = [] {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  };
  const double before = cpu();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // past the held rows' 250 ms
  // A writer spinning on a past deadline uses most of a core in that second.
  CHECK(cpu() - before < 0.2);
}

TEST_CASE("store.task_store.destructor_commits_everything_queued") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  {
    TaskStore store(path, quiet_logger());
    store.create_job(1, make_spec(""), 10.0);
    std::vector<proto::MiniBatch> batches;
    for (std::uint64_t i = 0; i < 1000; ++i) batches.push_back(make_batch(i, {"f"}));
    store.add_minibatches(1, std::move(batches));
    store.finish_job(1, "succeeded", "", 20.0);
  }
  CHECK(sql_int(path, "SELECT count(*) FROM minibatches") == 1000);
  CHECK(sql_text(path, "SELECT state FROM jobs") == "succeeded");
}

namespace {

// Queues what the interchange queues for `n` mini-batches that succeed at the first try (add,
// mark running, record the attempt with one output row) from `producers` threads, flushes, and
// returns the seconds taken. That is 4 row writes per mini-batch.
double write_attempts(TaskStore& store, std::uint64_t n, unsigned producers) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (unsigned p = 0; p < producers; ++p) {
    threads.emplace_back([&store, n, p, producers] {
      for (std::uint64_t i = p; i < n; i += producers) {
        store.add_minibatches(1, {make_batch(i, {"/in/" + std::to_string(i), "/in/x"})});
      }
      for (std::uint64_t i = p; i < n; i += producers) {
        store.mark_running(1, i, 1);
        auto rec = make_attempt(i + 1, 1, i, 1, proto::AttemptStatus::RunDone, "succeeded",
                                std::to_string(i) + "\n", true);
        store.record_attempt(std::move(rec));
      }
    });
  }
  for (auto& t : threads) t.join();
  store.flush();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Prints the rate: a number to watch, never asserted.
void report_rate(std::uint64_t n, double s) {
  MESSAGE("store: " << n << " mini-batches in " << s
                    << " s: " << static_cast<std::uint64_t>(4.0 * static_cast<double>(n) / s)
                    << " row writes/s (mini-batch insert, mark running, attempt insert, "
                       "mini-batch update), "
                    << static_cast<std::uint64_t>(static_cast<double>(n) / s) << " mini-batches/s");
}

}  // namespace

TEST_CASE("store.task_store.batched_writes_commit_everything") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  const std::string out = dir.file("out.txt");
  constexpr std::uint64_t kN = 50000;
  TaskStore store(path, quiet_logger());
  store.create_job(1, make_spec(out), 10.0);
  const double s = write_attempts(store, kN, 2);
  REQUIRE(store.ok());
  report_rate(kN, s);
  CHECK(sql_int(path, "SELECT count(*) FROM attempts") == static_cast<std::int64_t>(kN));
  CHECK(sql_int(path, "SELECT count(*) FROM minibatches WHERE state = 'succeeded'") ==
        static_cast<std::int64_t>(kN));
  CHECK(sql_int(path, "SELECT count(*) FROM minibatches WHERE tries = 1") ==
        static_cast<std::int64_t>(kN));
  CHECK(sql_int(path, "SELECT items_succeeded FROM job_counts") ==
        static_cast<std::int64_t>(2 * kN));
  // Every mini-batch's rows are where its offset says, and nowhere else.
  const std::string data = slurp(out);
  CHECK(sql_int(path, "SELECT sum(output_bytes) FROM minibatches") ==
        static_cast<std::int64_t>(data.size()));
  Db db(path, Db::Mode::ReadOnly);
  Statement st(db, "SELECT id, output_offset, output_bytes FROM minibatches ORDER BY id");
  std::uint64_t checked = 0;
  while (st.step()) {
    const auto id = st.column_uint64(0);
    const auto off = st.column_uint64(1);
    const auto len = st.column_uint64(2);
    REQUIRE(off + len <= data.size());
    if (data.compare(off, len, std::to_string(id) + "\n") != 0) {
      FAIL("mini-batch " << id << " at offset " << off << " holds the wrong rows");
    }
    ++checked;
  }
  CHECK(checked == kN);
}

TEST_CASE("store.task_store.bench_attempts" * doctest::skip()) {
  ScratchDir dir;
  constexpr std::uint64_t kN = 1000000;
  TaskStore store(dir.file("fanout.db"), fanout::make_logger("bench", spdlog::level::debug));
  store.create_job(1, make_spec(dir.file("out.txt")), 10.0);
  const double s = write_attempts(store, kN, 1);
  report_rate(kN, s);
  CHECK(store.ok());
}
