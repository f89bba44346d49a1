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
    db.exec("ALTER TABLE pools DROP COLUMN key_fingerprint");
    db.exec("PRAGMA user_version = 2");
  }
  { TaskStore store(path, quiet_logger()); }
  CHECK(sql_int(path, "PRAGMA user_version") == kSchemaVersion);
  CHECK(sql_int(path, "SELECT count(*) FROM pools WHERE key_fingerprint IS NULL") == 2);
}
