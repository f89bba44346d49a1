// Tests for the schema and its migrations (src/fanout/store/schema.hpp): a new store gets every
// table, view and index; reopening applies nothing; a newer store is refused; version 3 adds
// pools.key_fingerprint. docs/store.md.
#include "fanout/store/schema.hpp"

#include <doctest/doctest.h>

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

namespace {

// Takes a current store back to what the job_tallies migration found: no stored counts, and
// view job_counts counting the rows.
void undo_job_tallies(Db& db) {
  for (const char* t :
       {"job_tallies_job", "job_tallies_job_gone", "job_tallies_minibatch",
        "job_tallies_minibatch_changed", "job_tallies_minibatch_gone", "job_tallies_attempt",
        "job_tallies_attempt_changed", "job_tallies_attempt_gone"}) {
    db.exec((std::string("DROP TRIGGER IF EXISTS ") + t).c_str());
  }
  db.exec("DROP TABLE job_tallies");
  db.exec("DROP VIEW job_counts");
  db.exec(R"sql(
CREATE VIEW job_counts AS
SELECT j.id AS job_id,
       max(j.total, count(m.id)) AS total,
       count(m.id) AS submitted,
       coalesce(sum(m.state = 'succeeded'), 0) AS succeeded,
       coalesce(sum(m.state = 'failed'), 0) AS failed,
       coalesce(sum(m.state = 'pending'), 0) AS pending,
       coalesce(sum(m.state = 'running'), 0) AS running,
       coalesce(sum(CASE WHEN m.state = 'succeeded' THEN m.succeeded ELSE 0 END), 0)
         AS items_succeeded,
       coalesce(sum(CASE m.state WHEN 'succeeded' THEN m.failed
                                 WHEN 'failed' THEN m.items ELSE 0 END), 0) AS items_failed,
       (SELECT count(*) FROM attempts a WHERE a.job_id = j.id) AS attempts,
       (SELECT count(*) FROM attempts a WHERE a.job_id = j.id AND a.status != 'RUN_DONE')
         AS attempts_failed
FROM jobs j LEFT JOIN minibatches m ON m.job_id = j.id
GROUP BY j.id)sql");
}

// Takes a current store back to version 9: no jobs.owner_uid.
void undo_version_10(Db& db) {
  db.exec("ALTER TABLE jobs DROP COLUMN owner_uid");
  db.exec("PRAGMA user_version = 9");
}

// Takes a current store back to version 8: job_tallies kept by triggers on minibatches and
// attempts (those of the job_tallies migration, abridged to what the test's rows need: states
// and item counts of inserted and updated rows, and inserted attempts).
void undo_version_9(Db& db) {
  undo_version_10(db);
  db.exec(R"sql(
CREATE TRIGGER job_tallies_minibatch AFTER INSERT ON minibatches BEGIN
  UPDATE job_tallies SET submitted = submitted + 1, pending = pending + (new.state = 'pending'),
    running = running + (new.state = 'running'), succeeded = succeeded + (new.state = 'succeeded'),
    failed = failed + (new.state = 'failed')
  WHERE job_id = new.job_id;
END;
CREATE TRIGGER job_tallies_minibatch_changed AFTER UPDATE OF state ON minibatches BEGIN
  SELECT 1;
END;
CREATE TRIGGER job_tallies_minibatch_gone AFTER DELETE ON minibatches BEGIN
  SELECT 1;
END;
CREATE TRIGGER job_tallies_attempt AFTER INSERT ON attempts BEGIN
  UPDATE job_tallies SET attempts = attempts + 1 WHERE job_id = new.job_id;
END;
CREATE TRIGGER job_tallies_attempt_changed AFTER UPDATE OF status ON attempts BEGIN
  SELECT 1;
END;
CREATE TRIGGER job_tallies_attempt_gone AFTER DELETE ON attempts BEGIN
  SELECT 1;
END;
)sql");
  db.exec("PRAGMA user_version = 8");
}

// Takes a current store back to what the pool_jobs migration found: without that table.
void undo_version_8(Db& db) {
  undo_version_9(db);
  db.exec("DROP TABLE pool_jobs");
}

// Takes a current store back to what version 6 found: without fanout explore's tables.
void undo_version_6(Db& db) {
  undo_version_8(db);
  undo_job_tallies(db);
  db.exec("DROP TABLE experiment_runs");
  db.exec("DROP TABLE experiments");
}

// Takes a current store back to what version 5 found: without the placement columns, the
// gpu_samples table and process_summary's new columns (the view is replaced by a stand-in that
// the migration drops).
void undo_version_5(Db& db) {
  undo_version_6(db);
  db.exec("DROP TABLE gpu_samples");
  db.exec("DROP VIEW process_summary");
  db.exec("ALTER TABLE attempts DROP COLUMN device");
  db.exec("ALTER TABLE attempts DROP COLUMN cpus");
  db.exec("ALTER TABLE attempts DROP COLUMN threads");
  db.exec("CREATE VIEW process_summary AS SELECT 1");
}

}  // namespace

TEST_CASE("store.schema.migrations_create_schema_and_reopen_is_idempotent") {
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

TEST_CASE("store.schema.refuses_newer_schema") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  { TaskStore store(path, quiet_logger()); }
  {
    Db db(path, Db::Mode::ReadWriteCreate);
    db.exec(("PRAGMA user_version = " + std::to_string(kSchemaVersion + 1)).c_str());
  }
  const std::string newer = "store schema version " + std::to_string(kSchemaVersion + 1) +
                            " is newer than this fanout supports (" +
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

TEST_CASE("store.schema.version_6_adds_the_explore_experiments") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  { TaskStore store(path, quiet_logger()); }
  {
    Db db(path, Db::Mode::ReadWriteCreate);
    undo_version_6(db);
    db.exec("PRAGMA user_version = 5");
  }
  { TaskStore store(path, quiet_logger()); }
  CHECK(sql_int(path, "PRAGMA user_version") == kSchemaVersion);
  CHECK(sql_int(path, "SELECT count(*) FROM experiments") == 0);
  CHECK(sql_int(path, "SELECT count(*) FROM experiment_runs") == 0);
}

TEST_CASE("store.schema.version_8_adds_the_pool_jobs_table") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  { TaskStore store(path, quiet_logger()); }
  {
    Db db(path, Db::Mode::ReadWriteCreate);
    undo_version_8(db);
    db.exec("PRAGMA user_version = 7");
  }
  { TaskStore store(path, quiet_logger()); }
  CHECK(sql_int(path, "PRAGMA user_version") == kSchemaVersion);
  CHECK(sql_int(path, "SELECT count(*) FROM pool_jobs") == 0);
  {
    Db db(path, Db::Mode::ReadWriteCreate);
    db.exec(
        "INSERT INTO pool_jobs (job_id, scheduler, sched_job_id, submitted) "
        "VALUES (1, 'slurm', '42', 1.5)");
  }
  CHECK(sql_int(path, "SELECT count(*) FROM pool_jobs WHERE ended IS NULL") == 1);
}

TEST_CASE("store.schema.version_3_records_each_pools_key_fingerprint") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  {
    TaskStore store(path, quiet_logger());
    PoolRecord curve{1, "p1", "n", 1, 0, 1, "b", "connected", 1, 1};
    curve.key_fingerprint = "abc123";
    store.upsert_pool(curve);
    store.upsert_pool(PoolRecord{2, "p2", "n", 1, 0, 1, "b", "connected", 1, 1});  // plaintext
  }
  CHECK(sql_text(path, "SELECT key_fingerprint FROM pools WHERE id = 1") == "abc123");
  CHECK(sql_int(path, "SELECT count(*) FROM pools WHERE id = 2 AND key_fingerprint IS NULL") == 1);

  // A version-2 store gains the column, NULL for the pools it holds, and keeps them.
  {
    Db db(path, Db::Mode::ReadWriteCreate);
    undo_version_5(db);
    db.exec("ALTER TABLE pools DROP COLUMN key_fingerprint");
    // What version 4 added, which a version-2 store does not have either.
    db.exec("DROP INDEX pools_name");
    db.exec("ALTER TABLE pools DROP COLUMN registrations");
    db.exec("ALTER TABLE pools DROP COLUMN last_registration");
    db.exec("ALTER TABLE jobs DROP COLUMN output_start");
    db.exec("ALTER TABLE jobs DROP COLUMN reported");
    db.exec("PRAGMA user_version = 2");
  }
  { TaskStore store(path, quiet_logger()); }
  CHECK(sql_int(path, "PRAGMA user_version") == kSchemaVersion);
  CHECK(sql_int(path, "SELECT count(*) FROM pools WHERE key_fingerprint IS NULL") == 2);
}

// One pools row per pool name, its registrations counted; attempts point to it.
TEST_CASE("store.schema.version_4_keeps_one_pools_row_per_name") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  {
    TaskStore store(path, quiet_logger());
    store.upsert_pool(PoolRecord{1, "p1", "n", 1, 0, 11, "b", "connected", 1, 1});
    store.upsert_pool(PoolRecord{1, "p1", "n", 1, 0, 11, "b", "lost", 1, 2});
    store.upsert_pool(PoolRecord{2, "p1", "n", 2, 0, 12, "b", "connected", 3, 3});  // again
    store.upsert_pool(PoolRecord{3, "p2", "n", 1, 0, 13, "b", "connected", 4, 4});
    store.upsert_pool(PoolRecord{1, "p1", "n", 1, 0, 11, "b", "lost", 1, 5});  // stale: ignored
    store.create_job(1, make_spec(""), 10.0);
    store.add_minibatches(1, {make_batch(0, {"a"})});
    auto rec = make_attempt(7, 1, 0, 1, fanout::proto::AttemptStatus::RunDone, "succeeded");
    rec.pool_id = 2;  // the second registration of p1
    store.record_attempt(rec);
    store.flush();
    CHECK(store.max_pool_id() == 3);
  }
  CHECK(sql_int(path, "SELECT count(*) FROM pools") == 2);
  CHECK(sql_text(path,
                 "SELECT id || ',' || registrations || ',' || state || ',' || pid || ',' || "
                 "workers || ',' || last_registration FROM pools WHERE name = 'p1'") ==
        "1,2,connected,12,2,2");
  CHECK(sql_int(path, "SELECT pool_id FROM attempts WHERE id = 7") == 1);
  {
    TaskStore store(path, quiet_logger());
    CHECK(store.max_pool_id() == 3);  // ids are never reused
  }

  // A version-3 store with a row per registration: merged into the name's first row.
  {
    Db db(path, Db::Mode::ReadWriteCreate);
    undo_version_5(db);
    db.exec("DROP INDEX pools_name");
    db.exec("DELETE FROM pools");
    db.exec("ALTER TABLE pools DROP COLUMN registrations");
    db.exec("ALTER TABLE pools DROP COLUMN last_registration");
    db.exec("ALTER TABLE jobs DROP COLUMN output_start");
    db.exec("ALTER TABLE jobs DROP COLUMN reported");
    db.exec(
        "INSERT INTO pools (id, name, state, pid, last_seen) VALUES (1, 'a', 'lost', 1, 1), "
        "(2, 'b', 'lost', 2, 2), (3, 'a', 'lost', 3, 3), (4, 'a', 'connected', 4, 4)");
    db.exec("UPDATE attempts SET pool_id = 4 WHERE id = 7");
    db.exec("UPDATE jobs SET ended = 20, state = 'succeeded'");
    db.exec("PRAGMA user_version = 3");
  }
  { TaskStore store(path, quiet_logger()); }
  CHECK(sql_int(path, "PRAGMA user_version") == kSchemaVersion);
  CHECK(sql_int(path, "SELECT count(*) FROM pools") == 2);
  CHECK(sql_text(path,
                 "SELECT id || ',' || registrations || ',' || state || ',' || pid || ',' || "
                 "last_registration FROM pools WHERE name = 'a'") == "1,3,connected,4,4");
  CHECK(sql_int(path, "SELECT pool_id FROM attempts WHERE id = 7") == 1);
  // Jobs that ended before count as reported (their reports are not written again).
  CHECK(sql_int(path, "SELECT count(*) FROM jobs WHERE reported IS NULL") == 0);
}

TEST_CASE("store.schema.version_5_records_each_attempts_placement_and_gpu_samples") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  {
    TaskStore store(path, quiet_logger());
    store.create_job(1, make_spec(""), 10.0);
    store.add_minibatches(1, {make_batch(0, {"a"}), make_batch(1, {"b"})});
    auto placed = make_attempt(7, 1, 0, 1, proto::AttemptStatus::RunDone, "succeeded");
    placed.result.device = "2";
    placed.result.cpus = "0-1";
    placed.result.threads = 2;
    store.record_attempt(placed);
    store.record_attempt(make_attempt(8, 1, 1, 1, proto::AttemptStatus::RunDone, "succeeded"));
    fanout::store::ResourceRecord rec;
    rec.pool_id = 7;
    rec.pool_name = "pool-a";
    rec.node = "node1";
    rec.job_ids = {1};
    rec.sample.time = 100;
    rec.sample.gpus = {proto::GpuUsage{0, "GPU-a", "H100", 31, 1024, 81920},
                       proto::GpuUsage{1, "GPU-b", "H100", 0, 0, 81920}};
    store.record_resources(rec);
    store.flush();
  }
  CHECK(sql_text(path,
                 "SELECT device || ',' || cpus || ',' || threads FROM attempts WHERE "
                 "id = 7") == "2,0-1,2");
  // Not placed: NULL text, 0 threads.
  CHECK(sql_int(path,
                "SELECT device IS NULL AND cpus IS NULL AND threads = 0 FROM attempts "
                "WHERE id = 8") == 1);
  CHECK(sql_text(path,
                 "SELECT group_concat(device_index || ':' || uuid || ':' || util_percent "
                 "|| ':' || mem_used_mb, ' ') FROM gpu_samples WHERE job_id = 1") ==
        "0:GPU-a:31.0:1024.0 1:GPU-b:0.0:0.0");
  CHECK(sql_text(path, "SELECT device || ',' || cpus || ',' || threads FROM process_summary") ==
        "2,0-1,2");

  // A version-4 store gains the columns (NULL for its attempts) and the table.
  {
    Db db(path, Db::Mode::ReadWriteCreate);
    undo_version_5(db);
    db.exec("PRAGMA user_version = 4");
  }
  { TaskStore store(path, quiet_logger()); }
  CHECK(sql_int(path, "PRAGMA user_version") == kSchemaVersion);
  CHECK(sql_int(path, "SELECT count(*) FROM attempts WHERE device IS NULL AND threads IS NULL") ==
        2);
  CHECK(sql_int(path, "SELECT count(*) FROM gpu_samples") == 0);
  CHECK(sql_text(path, "SELECT group_concat(device || '/' || threads) FROM process_summary") ==
        "/0");
}

TEST_CASE("store.schema.job_tallies_migration_counts_the_jobs_already_stored") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  const std::string counts =
      "SELECT group_concat(c, ';') FROM (SELECT job_id || ':' || total || ',' || submitted || ',' "
      "|| succeeded || ',' || failed || ',' || pending || ',' || running || ',' || "
      "items_succeeded || ',' || items_failed || ',' || attempts || ',' || attempts_failed AS c "
      "FROM job_counts ORDER BY job_id)";
  std::string scanned;
  {
    TaskStore store(path, quiet_logger());
    using S = proto::AttemptStatus;
    store.create_job(1, make_spec(dir.file("out1.txt")), 100.0);
    store.add_minibatches(
        1, {make_batch(0, {"/in/a", "/in/b"}), make_batch(1, {"/in/c"}), make_batch(2, {"/in/d"})});
    for (std::uint64_t i = 0; i < 3; ++i) store.mark_running(1, i, 1);
    store.record_attempt(make_attempt(1, 1, 0, 1, S::RunDone, "succeeded", "a\n", true));
    store.record_attempt(make_attempt(2, 1, 1, 1, S::RunException, "failed"));
    store.create_job(2, make_spec(""), 100.0);  // a job with no mini-batches
    store.flush();
  }
  {
    Db db(path, Db::Mode::ReadWriteCreate);
    undo_version_8(db);
    undo_job_tallies(db);
    db.exec("PRAGMA user_version = 6");
  }
  scanned = sql_text(path, counts);  // the old view's full count
  CHECK(scanned == "1:3,3,1,1,0,1,2,1,2,1;2:0,0,0,0,0,0,0,0,0,0");
  { TaskStore store(path, quiet_logger()); }
  CHECK(sql_int(path, "PRAGMA user_version") == kSchemaVersion);
  CHECK(sql_int(path, "SELECT count(*) FROM job_tallies") == 2);
  CHECK(sql_text(path, counts) == scanned);
  // The triggers go on from the counts the migration found.
  {
    TaskStore store(path, quiet_logger());
    store.record_attempt(
        make_attempt(3, 1, 2, 1, proto::AttemptStatus::RunDone, "succeeded", "d\n", true));
    store.flush();
  }
  CHECK(sql_text(path,
                 "SELECT succeeded || ',' || running || ',' || attempts FROM job_counts "
                 "WHERE job_id = 1") == "2,0,3");
}

TEST_CASE("store.schema.version_9_drops_the_count_triggers_and_counts_every_job") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  const std::string counts =
      "SELECT group_concat(c, ';') FROM (SELECT job_id || ':' || total || ',' || submitted || ',' "
      "|| succeeded || ',' || failed || ',' || pending || ',' || running || ',' || "
      "items_succeeded || ',' || items_failed || ',' || attempts || ',' || attempts_failed AS c "
      "FROM job_counts ORDER BY job_id)";
  const std::string triggers = "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'";
  using S = proto::AttemptStatus;
  {
    TaskStore store(path, quiet_logger());
    store.create_job(1, make_spec(dir.file("out1.txt")), 100.0);
    store.add_minibatches(
        1, {make_batch(0, {"/in/a", "/in/b"}), make_batch(1, {"/in/c"}), make_batch(2, {"/in/d"})});
    for (std::uint64_t i = 0; i < 3; ++i) store.mark_running(1, i, 1);
    store.record_attempt(make_attempt(1, 1, 0, 1, S::RunDone, "succeeded", "a\n", true));
    store.record_attempt(make_attempt(2, 1, 1, 1, S::RunException, "failed"));
    store.create_job(2, make_spec(""), 100.0);  // a job with no mini-batches
    store.flush();
  }
  const std::string expected = "1:3,3,1,1,0,1,2,1,2,1;2:0,0,0,0,0,0,0,0,0,0";
  {
    Db db(path, Db::Mode::ReadWriteCreate);
    undo_version_9(db);
    // A version 8 store whose triggers counted these rows, and a count that a recount fixes.
    db.exec("UPDATE job_tallies SET attempts = 99, items_failed = 7 WHERE job_id = 1");
  }
  CHECK(sql_int(path, triggers) == 8);
  CHECK(sql_text(path, counts) != expected);
  { TaskStore store(path, quiet_logger()); }
  CHECK(sql_int(path, "PRAGMA user_version") == kSchemaVersion);
  CHECK(sql_int(path, triggers) == 2);  // a job's row added and removed with the job
  CHECK(sql_text(path, counts) == expected);
  // The writer goes on from the counts the migration made, for a job created before it.
  {
    TaskStore store(path, quiet_logger());
    store.record_attempt(make_attempt(3, 1, 2, 1, S::RunDone, "succeeded", "d\n", true));
    store.create_job(3, make_spec(""), 200.0);
    store.add_minibatches(3, {make_batch(0, {"/in/e"})});
    store.flush();
  }
  CHECK(sql_text(path, counts) ==
        "1:3,3,2,1,0,0,4,1,3,1;2:0,0,0,0,0,0,0,0,0,0;3:1,1,0,0,1,0,0,0,0,0");
}

TEST_CASE("store.schema.version_10_records_whose_job_it_is") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  {
    TaskStore store(path, quiet_logger());
    store.create_job(1, make_spec(""), 100.0);
    store.flush();
  }
  {
    Db db(path, Db::Mode::ReadWriteCreate);
    undo_version_10(db);
  }
  { TaskStore store(path, quiet_logger()); }
  CHECK(sql_int(path, "PRAGMA user_version") == kSchemaVersion);
  // A job recorded before the column: NULL, taken as the store owner's by recovery.
  CHECK(sql_int(path, "SELECT count(*) FROM jobs WHERE owner_uid IS NULL") == 1);
}
