// Tests for the checks on a store's files (src/fanout/store/file_trust.hpp, through store::Db):
// links, extra names, modes and folders others may write are refused, naming the file and why;
// the store's own files are taken. docs/security.md, "The store's files". The attacks of
// another user (a planted WAL, another user's store) are in it_store_trust.
#include "fanout/store/file_trust.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "fanout/store/db.hpp"
#include "fanout/util/error.hpp"

#include "scratch_dir.hpp"

using fanout::Failure;
using fanout::store::Db;
using fanout::test::ScratchDir;
namespace fs = std::filesystem;

namespace {

// A store with one table, in WAL mode (its -wal and -shm gone with the connection).
void make_store(const std::string& path) {
  Db db(path, Db::Mode::ReadWriteCreate);
  db.exec("PRAGMA journal_mode=WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1)");
}

// The message of the Failure opening `path` throws, or "" when it opens.
std::string refusal(const std::string& path, Db::Mode mode = Db::Mode::ReadWriteCreate) {
  try {
    Db db(path, mode);
    db.exec("SELECT * FROM t");
  } catch (const Failure& f) {
    return f.what();
  }
  return {};
}

bool has(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

}  // namespace

TEST_CASE("store.file_trust.the_stores_own_files_are_taken") {
  ScratchDir dir;
  const std::string db = dir.file("s.db");
  make_store(db);
  CHECK(refusal(db) == "");
  CHECK(refusal(db, Db::Mode::ReadOnly) == "");
  // A sticky folder open to all (as /tmp) holds a store of ours.
  REQUIRE(::chmod(dir.path().c_str(), 01777) == 0);
  CHECK(refusal(db) == "");
  REQUIRE(::chmod(dir.path().c_str(), 0700) == 0);
}

TEST_CASE("store.file_trust.a_link_at_the_store_path_is_refused") {
  ScratchDir dir;
  const std::string real = dir.file("real.db");
  make_store(real);
  fs::create_symlink(real, dir.file("link.db"));
  const std::string msg = refusal(dir.file("link.db"));
  CHECK(has(msg, dir.file("link.db") + ": is a symbolic link"));
  // A dangling one creates nothing.
  fs::create_symlink(dir.file("target.db"), dir.file("dangling.db"));
  CHECK(has(refusal(dir.file("dangling.db")), "symbolic link"));
  CHECK(!fs::exists(dir.file("target.db")));
}

TEST_CASE("store.file_trust.companions_others_may_write_or_with_two_names_are_refused") {
  ScratchDir dir;
  const std::string db = dir.file("s.db");
  make_store(db);
  SUBCASE("a -wal writable by others") {
    dir.write("s.db-wal", "");
    REQUIRE(::chmod((db + "-wal").c_str(), 0666) == 0);
    const std::string msg = refusal(db);
    CHECK(has(msg, db + "-wal: not trusted"));
    CHECK(has(msg, "writable by group or others"));
    CHECK(has(msg, "mode 0666"));
  }
  SUBCASE("a -journal with a second name") {
    dir.write("elsewhere", "");
    fs::create_hard_link(dir.file("elsewhere"), db + "-journal");
    CHECK(has(refusal(db), "has 2 names"));
  }
  SUBCASE("a -shm that is a link") {
    fs::create_symlink(dir.file("elsewhere"), db + "-shm");
    CHECK(has(refusal(db), db + "-shm: is a symbolic link"));
  }
}

TEST_CASE("store.file_trust.a_folder_others_may_write_is_refused_unless_sticky") {
  ScratchDir dir;
  const std::string db = dir.file("s.db");
  make_store(db);
  REQUIRE(::chmod(dir.path().c_str(), 0777) == 0);
  const std::string msg = refusal(db);
  CHECK(has(msg, "the store's folder " + dir.path()));
  CHECK(has(msg, "chmod +t"));
  // Readers run nothing: the folder is not theirs to judge.
  fanout::store::set_store_trust(fanout::store::StoreTrust::Reader);
  CHECK(refusal(db, Db::Mode::ReadOnly) == "");
  fanout::store::set_store_trust(fanout::store::StoreTrust::Owner);
  REQUIRE(::chmod(dir.path().c_str(), 0700) == 0);
}
