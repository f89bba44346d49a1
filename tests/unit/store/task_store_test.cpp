// Tests for TaskStore (src/fanout/store/task_store.hpp) as a whole: a job's lifecycle through its
// queued writes, the append_row output file and its offsets, write errors, closing, and many
// writes from several threads. The parts have their own tests (schema, writer, write_queue,
// output_file, recovery, reader). docs/store.md.
#include "fanout/store/task_store.hpp"

#include <doctest/doctest.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fanout/store/db.hpp"
#include "fanout/store/offline_cancel.hpp"
#include "fanout/store/reader.hpp"
#include "fanout/store/report_source.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/log.hpp"

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

// flush() without blocking: the interchange ends a job this way, so that its loop serves the
// other jobs during the final flush. The ticket's writes are committed when committed_fd()
// says so, and readable through another connection.
TEST_CASE("store.task_store.flush_async_wakes_the_caller_once_committed") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  TaskStore store(path, quiet_logger());
  store.create_job(1, make_spec(dir.file("out/o.txt")), 1000.0);
  store.add_minibatches(1, {make_batch(0, {"/in/a.csv"}), make_batch(1, {"/in/b.csv"})});
  store.set_submit_done(1, 2);
  using S = proto::AttemptStatus;
  for (std::uint64_t i = 0; i < 2; ++i) {
    store.mark_running(1, i, 1);
    store.record_attempt(make_attempt(i + 1, 1, i, 1, S::RunDone, "succeeded", "r\n", true));
  }
  store.finish_job(1, "succeeded", "", 1001.0);
  const std::uint64_t ticket = store.flush_async();
  store.wake_when_committed(ticket);
  pollfd p{store.committed_fd(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 60000) == 1);  // generous: a busy machine
  CHECK(store.committed(ticket));
  StoreReader reader(path);
  const auto job = reader.job(1);
  REQUIRE(job.has_value());
  CHECK(job->state == "succeeded");
  CHECK(job->succeeded == 2);
  CHECK(job->attempts == 2);
  // Reset, then a ticket already committed wakes at once.
  std::uint64_t count = 0;
  REQUIRE(::read(store.committed_fd(), &count, sizeof count) == sizeof count);
  CHECK(::poll(&p, 1, 0) == 0);
  store.wake_when_committed(ticket);
  CHECK(::poll(&p, 1, 0) == 1);
  // A later ticket is not committed before its writes are.
  store.add_minibatches(1, {make_batch(2, {"/in/c.csv"})});
  const std::uint64_t later = store.flush_async();
  CHECK(later > ticket);
  store.flush();
  CHECK(store.committed(later));
}

TEST_CASE("store.task_store.write_error_makes_store_not_ok") {
  // A failure of the database itself (here a constraint: the same job id twice).
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  TaskStore store(path, quiet_logger());
  store.create_job(1, make_spec(""), 10.0);
  store.flush();
  store.create_job(1, make_spec(""), 10.0);
  store.create_job(3, make_spec(""), 10.0);  // in the failed batch
  store.flush();                             // returns: a failed batch counts as done
  CHECK_FALSE(store.ok());
  store.create_job(2, make_spec(""), 10.0);  // dropped
  store.flush();
  CHECK(sql_int(path, "SELECT count(*) FROM jobs") == 1);  // the failed batch was rolled back
}

TEST_CASE("store.task_store.an_output_file_that_cannot_be_written_fails_its_job_only") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  const std::string out = dir.file("out.txt");
  const std::string blocker = dir.file("blocker");
  append(blocker, "a file, not a folder");
  using S = proto::AttemptStatus;
  TaskStore store(path, quiet_logger());
  store.create_job(1, make_spec("/dev/full"), 10.0);  // every write: ENOSPC
  store.create_job(2, make_spec(out), 10.0);
  store.create_job(3, make_spec(blocker + "/out.txt"), 10.0);  // cannot be opened
  for (std::uint64_t job : {1, 2}) {
    store.add_minibatches(job, {make_batch(0, {"a"}), make_batch(1, {"b"})});
    store.set_submit_done(job, 2);
    store.mark_running(job, 0, 1);
    store.mark_running(job, 1, 1);
  }
  store.record_attempt(make_attempt(1, 1, 0, 1, S::RunDone, "succeeded", "a1\n", true));
  store.record_attempt(make_attempt(2, 2, 0, 1, S::RunDone, "succeeded", "a2\n", true));
  store.record_attempt(make_attempt(3, 1, 1, 1, S::RunException, "pending"));
  store.flush();
  CHECK(store.ok());
  auto failed = store.take_failed_jobs();
  REQUIRE(failed.size() == 2);
  std::sort(failed.begin(), failed.end());
  CHECK(failed[0].first == 1);
  CHECK(failed[0].second.find("/dev/full") != std::string::npos);
  CHECK(failed[0].second.find("ENOSPC") != std::string::npos);
  CHECK(failed[1].first == 3);
  CHECK(failed[1].second.find(blocker) != std::string::npos);
  CHECK(store.take_failed_jobs().empty());
  CHECK(sql_text(path, "SELECT state FROM jobs WHERE id = 1") == "failed");
  CHECK(sql_text(path, "SELECT state FROM jobs WHERE id = 3") == "failed");
  CHECK(sql_text(path, "SELECT reason FROM jobs WHERE id = 1") == failed[0].second);
  // Job 1's succeeded result is taken back (its rows are in no file); its failed one stays.
  CHECK(sql_int(path, "SELECT count(*) FROM attempts WHERE job_id = 1") == 1);
  CHECK(sql_text(path, "SELECT state FROM minibatches WHERE job_id = 1 AND id = 0") == "pending");
  CHECK(sql_int(path, "SELECT tries FROM minibatches WHERE job_id = 1 AND id = 0") == 0);
  CHECK(sql_int(path, "SELECT output_bytes IS NULL FROM minibatches WHERE job_id = 1 AND id = 0") ==
        1);
  // Job 2 went on: its row is in its file, where the store says.
  CHECK(sql_text(path, "SELECT state FROM jobs WHERE id = 2") == "running");
  CHECK(slurp(out) == "a2\n");
  CHECK(sql_int(path, "SELECT output_bytes FROM minibatches WHERE job_id = 2 AND id = 0") == 3);
  // Later results with rows of job 1 are not recorded, and their mini-batch, dispatched after
  // the failure, goes back to pending (no mini-batch stays running); its end stays failed.
  store.mark_running(1, 1, 2);
  store.record_attempt(make_attempt(4, 1, 1, 2, S::RunDone, "succeeded", "b1\n", true));
  store.finish_job(1, "succeeded", "all mini-batches succeeded", 20.0);
  store.flush();
  CHECK(store.ok());
  CHECK(sql_int(path, "SELECT count(*) FROM attempts WHERE job_id = 1") == 1);
  CHECK(sql_text(path, "SELECT state FROM jobs WHERE id = 1") == "failed");
  CHECK(sql_text(path, "SELECT state FROM minibatches WHERE job_id = 1 AND id = 1") == "pending");
  CHECK(sql_int(path, "SELECT tries FROM minibatches WHERE job_id = 1 AND id = 1") == 1);
  CHECK(sql_int(path, "SELECT running FROM job_counts WHERE job_id = 1") == 0);
  const auto counts = store.job_counts(1);
  REQUIRE(counts.has_value());
  CHECK(counts->succeeded == 0);
  CHECK(counts->attempts_failed == 1);
}

TEST_CASE("store.task_store.reopen_job_runs_an_ended_job_again_on_a_live_store") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  const std::string out = dir.file("out.txt");
  using S = proto::AttemptStatus;
  TaskStore store(path, quiet_logger());
  store.create_job(1, make_spec(out), 10.0);
  store.add_minibatches(1, {make_batch(0, {"a"}), make_batch(1, {"b"}), make_batch(2, {"c"})});
  store.set_submit_done(1, 3);
  for (std::uint64_t i = 0; i < 3; ++i) store.mark_running(1, i, 1);
  store.record_attempt(make_attempt(1, 1, 0, 1, S::RunDone, "succeeded", "a\n", true));
  store.record_attempt(make_attempt(2, 1, 1, 1, S::RunException, "failed"));
  store.finish_job(1, "failed", "mini_batch_error_threshold 0 exceeded", 20.0);  // 2 running
  store.flush();
  append(out, "half a row");  // what a failed write left past the committed rows
  auto r = store.reopen_job(1);
  CHECK(r.was_ended);
  CHECK(r.reopened == 1);
  REQUIRE(r.job.remaining.size() == 2);
  CHECK(r.job.remaining[0].index == 1);
  CHECK(r.job.remaining[0].items == std::vector<std::string>{"b"});
  CHECK(r.job.remaining_tries[0] == 0);
  CHECK(r.job.remaining[1].index == 2);
  CHECK(r.job.remaining_tries[1] == 0);  // its try given back
  CHECK(r.job.succeeded == 1);
  CHECK(r.job.failed == 0);
  CHECK(r.job.attempts_failed == 1);
  CHECK(sql_text(path, "SELECT state FROM jobs WHERE id = 1") == "running");
  CHECK(sql_int(path, "SELECT ended IS NULL FROM jobs WHERE id = 1") == 1);
  CHECK(slurp(out) == "a\n");
  CHECK(sql_int(path, "SELECT pending FROM job_counts WHERE job_id = 1") == 2);
  CHECK(sql_int(path, "SELECT failed FROM job_counts WHERE job_id = 1") == 0);
  // The writer goes on with the job.
  store.mark_running(1, 1, 1);
  store.record_attempt(make_attempt(3, 1, 1, 1, S::RunDone, "succeeded", "b\n", true));
  store.flush();
  CHECK(slurp(out) == "a\nb\n");
  CHECK(sql_int(path, "SELECT succeeded FROM job_counts WHERE job_id = 1") == 2);
  // A succeeded job has nothing to reopen; an unknown one is named.
  store.mark_running(1, 2, 1);
  store.record_attempt(make_attempt(4, 1, 2, 1, S::RunDone, "succeeded", "c\n", true));
  store.finish_job(1, "succeeded", "", 30.0);
  store.flush();
  CHECK_THROWS_AS((void)store.reopen_job(1), Failure);
  CHECK_THROWS_AS((void)store.reopen_job(9), Failure);
  CHECK(sql_text(path, "SELECT state FROM jobs WHERE id = 1") == "succeeded");
}

TEST_CASE("store.task_store.issue_6.idle_after_a_write_error_with_held_minibatches") {
  // Held mini-batches come due on a timer; once the store has failed nothing is written, and
  // the writer must then wait for work again rather than wake at a deadline already past.
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  TaskStore store(path, quiet_logger());
  store.create_job(1, make_spec(""), 10.0);
  store.add_minibatches(1, {make_batch(0, {"a"}), make_batch(1, {"b"})});
  // Committed, its mini-batches held (a flush would write them).
  REQUIRE(wait_for_int(path, "SELECT count(*) FROM jobs", 1));
  store.create_job(1, make_spec(""), 10.0);  // the same id: fails the next transaction
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

// The interchange's report thread builds reports from what the writer hands on after each
// commit (committed_attempt.hpp) instead of reading the rows back: for every attempt, the row it
// shows must be the row ReportSource reads from the store, field for field, on each path the
// writer takes: a mini-batch written with its first result (detail at hand, default or given),
// one written before its result (held past its delay: detail read back), a retry, a pool
// without a name, a result whose times are NaN (stored as NULL).
TEST_CASE("store.task_store.committed_attempts_are_the_rows_read_back") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  std::vector<fanout::store::CommittedAttempt> got;
  {
    TaskStore store(path, quiet_logger());
    std::mutex mu;
    store.on_attempts_committed([&](std::vector<fanout::store::CommittedAttempt>& batch) {
      std::lock_guard lk(mu);
      for (auto& a : batch) got.push_back(std::move(a));
    });
    store.create_job(1, make_spec(dir.file("out.txt")), 1000.0);
    store.add_minibatches(
        1, {make_batch(0, {"/in/a.csv", "/in/b\"q.csv"}),
            make_batch(1, {"/in/c.csv"}, R"({"custom": 1})"), make_batch(2, {"/in/d.csv"})});
    using S = proto::AttemptStatus;
    store.mark_running(1, 0, 1);
    store.record_attempt(make_attempt(1, 1, 0, 1, S::RunDone, "succeeded", "a\n", true));
    store.mark_running(1, 1, 1);
    auto failed = make_attempt(2, 1, 1, 1, S::RunException, "pending");
    failed.result.error_category = "ValueError";
    failed.result.error_message = "ValueError: a message long enough not to fit a small string";
    store.record_attempt(std::move(failed));
    store.flush();  // mini-batch 2 is written without a result
    store.mark_running(1, 1, 2);
    auto nameless = make_attempt(3, 1, 1, 2, S::RunDone, "succeeded", "b\n", true);
    nameless.pool_id = 0;
    nameless.pool_name.clear();
    nameless.result.node.clear();
    store.record_attempt(std::move(nameless));
    store.mark_running(1, 2, 1);
    auto nan = make_attempt(4, 1, 2, 1, S::RunDone, "succeeded", "c\n", true);
    nan.result.start = std::nan("");
    nan.result.cpu_s = std::nan("");
    store.record_attempt(std::move(nan));
    store.finish_job(1, "succeeded", "", 2000.0);
    store.flush();
    std::lock_guard lk(mu);
    REQUIRE(got.size() == 4);
  }
  CHECK(got[0].detail_known);
  CHECK(got[1].detail_known);
  CHECK_FALSE(got[2].detail_known);  // mini-batch 1's inputs went in with its first result
  CHECK_FALSE(got[3].detail_known);  // mini-batch 2's with the flush before
  fanout::store::ReportSource src(path);
  std::size_t i = 0;
  src.each_attempt(1, [&](const fanout::store::AttemptRow& want) {
    REQUIRE(i < got.size());
    auto& c = got[i++];
    CAPTURE(c.id);
    if (!c.detail_known) c.has_detail = src.minibatch_detail(c.job_id, c.minibatch_id, c.detail);
    const fanout::store::AttemptRow a = c.row();
    CHECK(a.id == want.id);
    CHECK(a.job_id == want.job_id);
    CHECK(a.minibatch_id == want.minibatch_id);
    CHECK(a.attempt == want.attempt);
    CHECK(a.status == want.status);
    CHECK(a.has_pool_id == want.has_pool_id);
    CHECK(a.pool_id == want.pool_id);
    CHECK(a.has_pool == want.has_pool);
    CHECK(a.pool == want.pool);
    CHECK(a.has_node == want.has_node);
    CHECK(a.node == want.node);
    CHECK(a.process == want.process);
    CHECK(a.has_pid == want.has_pid);
    CHECK(a.worker_pid == want.worker_pid);
    CHECK(a.has_start == want.has_start);
    CHECK(a.start == want.start);
    CHECK(a.has_elapsed == want.has_elapsed);
    CHECK(a.elapsed_s == want.elapsed_s);
    CHECK(a.has_cpu == want.has_cpu);
    CHECK(a.cpu_s == want.cpu_s);
    CHECK(a.has_run == want.has_run);
    CHECK(a.run_s == want.run_s);
    CHECK(a.items == want.items);
    CHECK(a.succeeded == want.succeeded);
    CHECK(a.failed == want.failed);
    CHECK(a.error_category == want.error_category);
    CHECK(a.error_message == want.error_message);
    CHECK(a.has_detail == want.has_detail);
    CHECK(a.detail == want.detail);
  });
  CHECK(i == got.size());
  CHECK(got[0].detail == R"({"files": ["/in/a.csv", "/in/b\"q.csv"]})");
  CHECK(got[3].has_detail);
  CHECK_FALSE(got[3].row().has_start);
}

// The writer asks the checkpoint thread for a checkpoint once the WAL holds 4,096 pages
// (task_store.cpp), well before its own backstop at 16,384: about 6,000 pages written, the
// database file itself grows while the writer is idle.
TEST_CASE("store.task_store.the_wal_is_checkpointed_off_the_writer") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  TaskStore store(path, quiet_logger());
  store.create_job(1, make_spec(dir.file("out.txt")), 1000.0);
  const auto before = fs::file_size(path);
  const std::string message(4000, 'm');  // about a page per attempt
  for (std::uint64_t i = 0; i < 6000; ++i) {
    auto rec = make_attempt(i + 1, 1, i, 1, proto::AttemptStatus::RunException, "pending");
    rec.result.error_message = message;
    store.record_attempt(std::move(rec));
  }
  store.flush();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (fs::file_size(path) < before + 4096u * 4096u &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(fs::file_size(path) >= before + 4096u * 4096u);
}

namespace {

// Job `job_id`'s counts as a full scan of its rows finds them (what view job_counts computed
// before the counts were stored), in job_counts' column order.
std::string scanned_counts(const std::string& path, std::uint64_t job_id) {
  return sql_text(path, R"sql(
SELECT max(j.total, count(m.id)) || ',' || count(m.id) || ',' ||
       coalesce(sum(m.state = 'succeeded'), 0) || ',' || coalesce(sum(m.state = 'failed'), 0) || ',' ||
       coalesce(sum(m.state = 'pending'), 0) || ',' || coalesce(sum(m.state = 'running'), 0) || ',' ||
       coalesce(sum(CASE WHEN m.state = 'succeeded' THEN m.succeeded ELSE 0 END), 0) || ',' ||
       coalesce(sum(CASE m.state WHEN 'succeeded' THEN m.failed
                                 WHEN 'failed' THEN m.items ELSE 0 END), 0) || ',' ||
       (SELECT count(*) FROM attempts a WHERE a.job_id = j.id) || ',' ||
       (SELECT count(*) FROM attempts a WHERE a.job_id = j.id AND a.status != 'RUN_DONE')
FROM jobs j LEFT JOIN minibatches m ON m.job_id = j.id WHERE j.id = )sql" +
                            std::to_string(job_id) + " GROUP BY j.id");
}

// The same from the job's stored job_tallies row (what view job_counts reads).
std::string stored_counts(const std::string& path, std::uint64_t job_id) {
  return sql_text(path,
                  "SELECT max(j.total, t.submitted) || ',' || t.submitted || ',' || t.succeeded || "
                  "',' || t.failed || ',' || t.pending || ',' || t.running || ',' || "
                  "t.items_succeeded || ',' || t.items_failed || ',' || t.attempts || ',' || "
                  "t.attempts_failed FROM job_tallies t JOIN jobs j ON j.id = t.job_id "
                  "WHERE t.job_id = " +
                      std::to_string(job_id));
}

}  // namespace

TEST_CASE("store.task_store.stored_counts_equal_a_full_count_through_retries_and_restarts") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  const std::string out = dir.file("out/parallel_run_step.txt");
  using S = proto::AttemptStatus;
  {
    TaskStore store(path, quiet_logger());
    store.create_job(1, make_spec(out), 1000.0);
    store.create_job(2, make_spec(""), 1000.0);  // no rows at all
    store.add_minibatches(1, {make_batch(0, {"/in/a.csv", "/in/b.csv"}), make_batch(1, {"/in/c"}),
                              make_batch(2, {"/in/e.csv", "/in/f.csv"}), make_batch(3, {"/in/g"})});
    for (std::uint64_t i = 0; i < 4; ++i) store.mark_running(1, i, 1);
    store.record_attempt(make_attempt(1, 1, 0, 1, S::RunDone, "succeeded", "a\nb\n", true));
    store.record_attempt(make_attempt(2, 1, 1, 1, S::RunException, "pending"));
    store.record_attempt(make_attempt(3, 1, 2, 1, S::RunTimeout, "pending"));
    store.mark_running(1, 1, 2);
    store.mark_running(1, 2, 2);
    store.record_attempt(make_attempt(4, 1, 1, 2, S::RunDone, "succeeded", "cc\n", true));
    store.record_attempt(make_attempt(5, 1, 2, 2, S::WorkerLost, "failed"));
    store.flush();
    CHECK(stored_counts(path, 1) == scanned_counts(path, 1));
    CHECK(stored_counts(path, 2) == scanned_counts(path, 2));
    CHECK(sql_int(path, "SELECT running FROM job_counts WHERE job_id = 1") == 1);  // batch 3
    // The interchange stops mid-job: batch 3 is still running.
  }
  {
    // A restart: recovery takes the running mini-batch back to pending, and the job runs on.
    TaskStore store(path, quiet_logger());
    auto unfinished = store.recover();
    REQUIRE(unfinished.size() == 2);
    store.flush();
    CHECK(stored_counts(path, 1) == scanned_counts(path, 1));
    CHECK(sql_int(path, "SELECT pending FROM job_counts WHERE job_id = 1") == 1);
    store.add_minibatches(1, {make_batch(3, {"/in/g"}), make_batch(4, {"/in/h"})});  // resubmitted
    store.set_submit_done(1, 5);
    store.mark_running(1, 3, 1);
    store.mark_running(1, 4, 1);
    store.record_attempt(make_attempt(6, 1, 3, 1, S::RunException, "failed"));
    store.record_attempt(make_attempt(7, 1, 4, 1, S::RunDone, "succeeded", "d\n", true));
    store.finish_job(1, "failed", "mini_batch_error_threshold 0 exceeded: 2 failed", 2000.0);
    store.finish_job(2, "succeeded", "", 2000.0);
    store.flush();
    CHECK(stored_counts(path, 1) == scanned_counts(path, 1));
    CHECK(stored_counts(path, 1) == "5,5,3,2,0,0,6,3,7,4");
  }
  {
    // `fanout resume --failed`: the failed mini-batches are pending again.
    TaskStore store(path, quiet_logger());
    CHECK(store.reopen_failed(1) == 2);
    CHECK(stored_counts(path, 1) == scanned_counts(path, 1));
    CHECK(sql_int(path, "SELECT pending FROM job_counts WHERE job_id = 1") == 2);
    // The resumed job runs on in the same process: the writer reads its rows once.
    auto unfinished = store.recover();
    REQUIRE(unfinished.size() == 1);
    store.mark_running(1, 2, 1);
    store.record_attempt(make_attempt(8, 1, 2, 1, S::RunDone, "succeeded", "ee\n", true));
    store.mark_running(1, 3, 1);
    store.flush();
    CHECK(stored_counts(path, 1) == scanned_counts(path, 1));
    // A result that overwrites a succeeded mini-batch (whose item counts the writer does not
    // keep), and one of a job that ended in this process.
    store.record_attempt(make_attempt(9, 1, 2, 2, S::RunException, "failed"));
    store.finish_job(1, "failed", "stopped", 3000.0);
    store.record_attempt(make_attempt(10, 1, 3, 1, S::RunDone, "succeeded"));
    store.flush();
    CHECK(stored_counts(path, 1) == scanned_counts(path, 1));
  }
  {
    // Held mini-batches written with their first result, a dispatch and its result in one
    // transaction, and a job cancelled offline (by the client, with no interchange) while
    // mini-batches were running.
    TaskStore store(path, quiet_logger());
    store.create_job(3, make_spec(""), 4000.0);
    store.add_minibatches(
        3, {make_batch(0, {"/in/a"}), make_batch(1, {"/in/b", "/in/c"}), make_batch(2, {"/in/d"})});
    store.mark_running(3, 0, 1);
    store.record_attempt(make_attempt(11, 3, 0, 1, S::RunDone, "succeeded"));
    store.mark_running(3, 1, 1);
    store.mark_running(3, 2, 1);
    store.flush();
    CHECK(stored_counts(path, 3) == scanned_counts(path, 3));
    CHECK(sql_int(path, "SELECT running FROM job_counts WHERE job_id = 3") == 2);
  }
  REQUIRE(fanout::store::cancel_unowned(path, 3, "cancelled by the user").value());
  CHECK(stored_counts(path, 3) == scanned_counts(path, 3));
  CHECK(sql_int(path, "SELECT pending FROM job_counts WHERE job_id = 3") == 2);
}

namespace {

// One run of random operations through TaskStore's public API (the interchange's calls, the
// client's offline cancel and resume --failed, restarts), checking after each commit that
// every job's stored counts are a full count of its rows.
void random_store_run(unsigned seed) {
  CAPTURE(seed);
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  std::mt19937 rng(seed);
  auto pick = [&rng](std::uint64_t n) {
    return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng);
  };
  using S = proto::AttemptStatus;
  constexpr std::uint64_t kJobs = 3;
  std::vector<std::uint64_t> submitted(kJobs + 1, 0);  // next index, by job
  std::vector<std::vector<bool>> output_written(kJobs + 1);
  std::uint64_t task_id = 1;
  auto check_all = [&] {
    for (std::uint64_t job = 1; job <= kJobs; ++job) {
      CAPTURE(job);
      REQUIRE(stored_counts(path, job) == scanned_counts(path, job));
    }
  };
  auto store = std::make_unique<TaskStore>(path, quiet_logger());
  for (std::uint64_t job = 1; job <= kJobs; ++job) {
    store->create_job(job, make_spec(job == 1 ? dir.file("out/" + std::to_string(seed)) : ""),
                      1000.0);
  }
  for (int step = 0; step < 300; ++step) {
    const std::uint64_t job = 1 + pick(kJobs);
    const std::uint64_t op = pick(100);
    if (op < 15) {
      // New mini-batches, or (sometimes) some submitted again, as after a restart.
      std::vector<proto::MiniBatch> batches;
      std::uint64_t first = submitted[job];
      if (first > 0 && pick(4) == 0) first = pick(first);
      const std::uint64_t n = 1 + pick(4);
      for (std::uint64_t i = first; i < first + n; ++i) {
        std::vector<std::string> items(1 + pick(3), "/in/x");
        batches.push_back(make_batch(i, std::move(items)));
      }
      submitted[job] = std::max(submitted[job], first + n);
      output_written[job].resize(submitted[job], false);
      store->add_minibatches(job, std::move(batches));
    } else if (op < 40 && submitted[job] > 0) {
      store->mark_running(job, pick(submitted[job]), static_cast<std::uint32_t>(1 + pick(3)));
    } else if (op < 75 && submitted[job] > 0) {
      const std::uint64_t index = pick(submitted[job]);
      static constexpr S kStatuses[] = {S::RunDone, S::RunException, S::RunTimeout, S::WorkerLost,
                                        S::PoolLost};
      const S status = kStatuses[pick(std::size(kStatuses))];
      static constexpr const char* kStates[] = {"pending", "failed", "succeeded", "running"};
      std::string state = status == S::RunDone ? "succeeded" : kStates[pick(std::size(kStates))];
      const bool output = state == "succeeded" && job == 1 && !output_written[job][index];
      if (output) output_written[job][index] = true;
      auto rec = make_attempt(task_id++, job, index, static_cast<std::uint32_t>(1 + pick(3)),
                              status, state, output ? "row\n" : "", output);
      rec.result.items = pick(4);  // not always the mini-batch's own count
      rec.result.succeeded = pick(3);
      rec.result.failed = pick(3);
      store->record_attempt(std::move(rec));
    } else if (op < 80) {
      store->set_submit_done(job, submitted[job]);
    } else if (op < 83) {
      store->finish_job(job, pick(2) == 0 ? "succeeded" : "failed", "", 2000.0);
    } else if (op < 95) {
      store->flush();
      check_all();
    } else {
      // A restart; in between, maybe an offline cancel, then maybe resume --failed.
      store.reset();
      check_all();
      if (pick(3) == 0) {
        auto cancelled = fanout::store::cancel_unowned(path, job, "cancelled");
        REQUIRE(cancelled.has_value());
        check_all();
      }
      store = std::make_unique<TaskStore>(path, quiet_logger());
      if (pick(2) == 0) (void)store->reopen_failed(job);
      (void)store->recover();
      check_all();
    }
  }
  store->flush();
  check_all();
}

}  // namespace

TEST_CASE("store.task_store.stored_counts_equal_a_full_count_after_random_operations") {
  for (unsigned seed = 1; seed <= 8; ++seed) random_store_run(seed);
}
