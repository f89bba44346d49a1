// Tests for the writer (src/fanout/store/detail/writer.hpp): deferred submission and its prefix
// rule, dispatch and result in one transaction, resubmission, the rows a result writes.
#include "fanout/store/detail/writer.hpp"

#include <doctest/doctest.h>

#include <thread>

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

TEST_CASE("store.writer.dispatch_and_result_in_one_transaction") {
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

TEST_CASE("store.writer.held_submissions_keep_committed_rows_a_prefix") {
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

TEST_CASE("store.writer.held_submissions_are_written_without_a_result") {
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

TEST_CASE("store.writer.resubmitted_minibatches_are_written_once") {
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
