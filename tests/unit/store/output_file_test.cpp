// Tests for the output files (src/fanout/store/detail/output_file.hpp): rows go at the file's
// end, a failed batch is cut off, a finished job's file closes after its batch, and recovery
// cuts a file back to its committed end. docs/store.md section 5.
#include "fanout/store/detail/output_file.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fanout/util/error.hpp"
#include "fanout/util/log.hpp"

#include "scratch_dir.hpp"

using fanout::Failure;
using fanout::store::detail::OutputFile;
using fanout::store::detail::OutputFiles;
using fanout::store::detail::restore_output;
using fanout::test::ScratchDir;
using fanout::test::slurp;
namespace fs = std::filesystem;

namespace {

fanout::Logger quiet() { return fanout::make_logger("output-test", spdlog::level::off); }

void write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace

TEST_CASE("store.output_file.appends_after_the_existing_end_and_commits") {
  ScratchDir dir;
  const std::string path = dir.file("a/b/out.txt");  // folders are made
  OutputFiles files;
  CHECK(files.find(1) == nullptr);
  OutputFile& f = files.open(1, path);
  CHECK(files.find(1) == &f);
  CHECK(f.end == 0);
  CHECK(files.append(f, "r0\n") == 0);
  CHECK(files.append(f, "r1\nr2\n") == 3);
  CHECK(slurp(path).empty());  // nothing before write_and_sync()
  CHECK(files.write_and_sync().empty());
  files.commit();
  CHECK(slurp(path) == "r0\nr1\nr2\n");
  CHECK(f.end == 9);
  CHECK(f.pending.empty());

  // Opened again (a resumed job): never truncated, new rows at its end.
  OutputFiles again;
  OutputFile& g = again.open(1, path);
  CHECK(g.end == 9);
  CHECK(again.append(g, "r3\n") == 9);
  CHECK(again.write_and_sync().empty());
  again.commit();
  CHECK(slurp(path) == "r0\nr1\nr2\nr3\n");
}

TEST_CASE("store.output_file.discard_cuts_back_to_the_committed_end") {
  ScratchDir dir;
  const std::string path = dir.file("out.txt");
  OutputFiles files;
  OutputFile& f = files.open(7, path);
  files.append(f, "kept\n");
  CHECK(files.write_and_sync().empty());
  files.commit();
  // A batch whose bytes were written but whose transaction then failed.
  files.append(f, "lost\n");
  CHECK(files.write_and_sync().empty());
  CHECK(slurp(path) == "kept\nlost\n");
  files.discard();
  CHECK(slurp(path) == "kept\n");
  CHECK(f.pending.empty());
  CHECK(files.append(f, "next\n") == 5);
}

TEST_CASE("store.output_file.finished_job_closes_after_its_batch") {
  ScratchDir dir;
  OutputFiles files;
  OutputFile& f = files.open(1, dir.file("out.txt"));
  files.append(f, "x\n");
  files.close_after_batch(1);
  CHECK(files.find(1) != nullptr);  // its bytes still go out with this batch
  CHECK(files.write_and_sync().empty());
  files.commit();
  CHECK(files.find(1) == nullptr);
  CHECK(slurp(dir.file("out.txt")) == "x\n");
  files.close_after_batch(2);  // no such file: nothing happens

  // Opened again in the same batch as it finished: it stays open.
  OutputFile& g = files.open(3, dir.file("three.txt"));
  (void)g;
  files.close_after_batch(3);
  files.open(3, dir.file("three.txt"));
  files.commit();
  CHECK(files.find(3) != nullptr);
}

TEST_CASE("store.output_file.open_failure_names_the_file") {
  ScratchDir dir;
  write(dir.file("blocker"), "a file, not a folder");
  OutputFiles files;
  try {
    files.open(1, dir.file("blocker/out.txt"));
    FAIL("opened a file under a file");
  } catch (const Failure& e) {
    CHECK(e.error().code == fanout::ErrorCode::Io);
    CHECK(e.error().message.find("blocker") != std::string::npos);
  }
}

TEST_CASE("store.output_file.restore_cuts_creates_and_never_pads") {
  ScratchDir dir;
  SUBCASE("longer: cut back") {
    write(dir.file("out.txt"), "r0\nr1\ngarbage");
    restore_output(dir.file("out.txt"), 6, quiet());
    CHECK(slurp(dir.file("out.txt")) == "r0\nr1\n");
  }
  SUBCASE("missing: created empty, with its folders") {
    restore_output(dir.file("x/out.txt"), 0, quiet());
    REQUIRE(fs::exists(dir.file("x/out.txt")));
    CHECK(fs::file_size(dir.file("x/out.txt")) == 0);
  }
  SUBCASE("shorter: left alone") {
    write(dir.file("out.txt"), "r0\n");
    restore_output(dir.file("out.txt"), 100, quiet());
    CHECK(slurp(dir.file("out.txt")) == "r0\n");
  }
}

TEST_CASE("store.output_file.a_file_that_cannot_be_written_fails_alone") {
  ScratchDir dir;
  const std::string path = dir.file("out.txt");
  OutputFiles files;
  OutputFile& good = files.open(1, path);
  OutputFile& full = files.open(2, "/dev/full");  // every write: ENOSPC
  files.append(good, "row\n");
  files.append(full, "lost\n");
  const auto failed = files.write_and_sync();
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].job_id == 2);
  CHECK(failed[0].reason == "/dev/full: write: No space left on device (ENOSPC)");
  files.commit();
  CHECK(slurp(path) == "row\n");
  CHECK(files.find(2) == nullptr);  // closed after the batch
  CHECK(files.find(1) != nullptr);
}
