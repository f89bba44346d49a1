// Tests for the checkpoint thread (src/fanout/store/detail/checkpointer.hpp): a request copies
// the WAL's committed pages into the database file.
#include "fanout/store/detail/checkpointer.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "fanout/store/db.hpp"
#include "fanout/util/log.hpp"

#include "scratch_dir.hpp"

using fanout::store::Db;
using fanout::store::detail::Checkpointer;
using fanout::test::ScratchDir;
namespace fs = std::filesystem;

TEST_CASE("store.checkpointer.request_runs_a_checkpoint") {
  ScratchDir dir;
  const std::string path = dir.file("c.db");
  Db db(path, Db::Mode::ReadWriteCreate);
  db.exec("PRAGMA journal_mode = WAL");
  Checkpointer ckpt(path, fanout::make_logger("ckpt-test", spdlog::level::off));
  CHECK(ckpt.checkpoints() == 0);
  ckpt.request();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ckpt.checkpoints() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(ckpt.checkpoints() == 1);
}  // the destructor stops and joins the thread

// A connection that never read the database does not know it is in WAL mode, and its
// sqlite3_wal_checkpoint_v2() returns SQLITE_OK having done nothing: this failed until the
// checkpointer read once after opening (session 6).
TEST_CASE("store.checkpointer.request_copies_the_wal_into_the_database") {
  ScratchDir dir;
  const std::string path = dir.file("c.db");
  Db db(path, Db::Mode::ReadWriteCreate);
  db.exec("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0");  // only ours
  db.exec("CREATE TABLE t (v BLOB)");
  for (int i = 0; i < 50; ++i) db.exec("INSERT INTO t VALUES (randomblob(4000))");
  const auto before = fs::file_size(path);
  Checkpointer ckpt(path, fanout::make_logger("ckpt-test", spdlog::level::off));
  CHECK(ckpt.checkpoints() == 0);
  // A connection's first checkpoint may find nothing to do (it has not read the WAL yet), so the
  // test asks the way the writer does: after each commit, until the pages are copied.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (fs::file_size(path) <= before + 50 * 4000 && std::chrono::steady_clock::now() < deadline) {
    ckpt.request();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(ckpt.checkpoints() >= 1);
  // 50 rows of 4 kB now live in the database file itself.
  CHECK(fs::file_size(path) > before + 50 * 4000);
}
