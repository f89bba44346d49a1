// Tests for StoreReader (src/fanout/store/reader.hpp): history, one job, and the stores it refuses.
#include "fanout/store/reader.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fanout/store/db.hpp"
#include "fanout/store/job_status.hpp"
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

TEST_CASE("store.reader.refuses_missing_file") {
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

TEST_CASE("store.reader.history_is_newest_first") {
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

TEST_CASE("store.reader.empty_file_is_a_new_store") {
  // `sqlite3 STORE 'select ...'` before the first job leaves a 0-byte file.
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  { std::ofstream touch(path); }
  REQUIRE(fs::file_size(path) == 0);
  StoreReader reader(path);
  CHECK(reader.history(0).empty());
  CHECK_FALSE(reader.job(1).has_value());
  auto status = fanout::store::read_job_status(path, 1);
  REQUIRE_FALSE(status.has_value());
  CHECK(status.error().code == ErrorCode::NotFound);
  CHECK(fs::file_size(path) == 0);  // read-only: left as it was
  // The writer takes it as a new store too, and readers then see its jobs.
  {
    TaskStore store(path, quiet_logger());
    store.create_job(1, make_spec(""), 100.0);
  }
  CHECK(StoreReader(path).history(0).size() == 1);
}

TEST_CASE("store.reader.refuses_older_schema") {
  ScratchDir dir;
  const std::string path = dir.file("fanout.db");
  { TaskStore store(path, quiet_logger()); }
  {
    Db db(path, Db::Mode::ReadWriteCreate);
    db.exec("PRAGMA user_version = 1");
  }
  try {
    StoreReader reader(path);
    FAIL("opened a store of an older schema");
  } catch (const Failure& f) {
    CHECK(f.error().code == ErrorCode::Version);
    CHECK(f.error().message.find(path + ": store schema version 1 is older than this fanout "
                                        "reads") == 0);
  }
}
