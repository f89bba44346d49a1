// Tests for whole-or-nothing files (src/fanout/util/atomic_file.hpp).
#include "fanout/util/atomic_file.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fanout/util/error.hpp"

#include "scratch_dir.hpp"

using fanout::AtomicFile;
using fanout::ErrorCode;
using fanout::Failure;
using fanout::test::ScratchDir;
using fanout::test::slurp;
namespace fs = std::filesystem;

namespace {

// The names in `dir`, to see that no temporary file is left.
std::size_t entries(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("util.atomic_file.appears_only_on_commit") {
  ScratchDir dir;
  const std::string path = dir.file("a/b/report.txt");  // folders are made
  fanout::write_file_atomic(path, "old\n").value();
  {
    AtomicFile f(path);
    f.write("new ");
    f.write("text\n");
    CHECK(slurp(path) == "old\n");  // a reader still sees the old file
    f.commit();
  }
  CHECK(slurp(path) == "new text\n");
  CHECK(entries(dir.file("a/b")) == 1);
}

TEST_CASE("util.atomic_file.uncommitted_leaves_nothing") {
  ScratchDir dir;
  {
    AtomicFile f(dir.file("x.txt"));
    f.write("half");
  }
  CHECK_FALSE(fs::exists(dir.file("x.txt")));
  CHECK(entries(dir.path()) == 0);
}

TEST_CASE("util.atomic_file.errors_name_the_path") {
  ScratchDir dir;
  fanout::write_file_atomic(dir.file("blocker"), "a file, not a folder").value();
  auto r = fanout::write_file_atomic(dir.file("blocker/x.txt"), "text");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ErrorCode::Io);
  CHECK(r.error().message.find("blocker") != std::string::npos);
  try {
    AtomicFile f(dir.file("blocker/y.txt"));
    FAIL("opened a file under a file");
  } catch (const Failure& e) {
    CHECK(e.error().code == ErrorCode::Io);
  }
}

// The temporary files of a writer that was killed are removed, nothing else.
TEST_CASE("util.atomic_file.stale_temporaries_of_dead_writers_are_removed") {
  ScratchDir dir;
  // A pid that is surely not running: beyond pid_max's default and the kernel's limit.
  const std::string dead = dir.file("logs/sys/job_report/a.csv.tmp999999999");
  const std::string live = dir.file("logs/job_result.txt.tmp1");  // pid 1 is alive
  const std::string kept = dir.file("logs/job_result.txt");
  const std::string other = dir.file("logs/notes.tmpx");
  for (const auto& p : {dead, live, kept, other}) {
    fs::create_directories(fs::path(p).parent_path());
    std::ofstream(p) << "x";
  }
  CHECK(fanout::remove_stale_temporaries(dir.file("logs")) == 1);
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(live));
  CHECK(fs::exists(kept));
  CHECK(fs::exists(other));
}

// A symbolic link another user planted at the temporary file's name (a shared folder such as
// /tmp) is refused, with an error naming it: the file it points to is never written.
TEST_CASE("util.atomic_file.planted_symlink_at_the_temporary_name_is_refused") {
  ScratchDir dir;
  const std::string target = dir.file("victim.txt");
  fanout::write_file_atomic(target, "precious\n").value();
  const std::string path = dir.file("ready");
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  fs::create_symlink(target, tmp);
  auto r = fanout::write_file_atomic(path, "client=tcp://127.0.0.1:1\n");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ErrorCode::Io);
  CHECK(r.error().message.find(tmp) != std::string::npos);
  CHECK(r.error().message.find("symbolic link") != std::string::npos);
  CHECK(slurp(target) == "precious\n");
  CHECK_FALSE(fs::exists(path));
  CHECK(fs::is_symlink(tmp));  // left for its owner to see
}
