// Tests for listing a table's files (client/input/listing.hpp): the order of files, folders and
// pattern matches, entries that name nothing, and plain CSV/TSV inputs described as tables.
#include "client/input/listing.hpp"
#include "client/input/tabular.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "scratch_dir.hpp"

using fanout::ErrorCode;
using fanout::client::list_table_files;
using fanout::client::plain_table;
using fanout::config::load_mltable;
using fanout::config::TablePath;
using fanout::config::TableSpec;
using fanout::test::ScratchDir;

TEST_CASE("client.listing.lists_files_in_a_stable_order") {
  ScratchDir d;
  d.write("data/2024/01/a.csv", "x\n");
  d.write("data/2024/02/b.csv", "x\n");
  d.write("data/2024/02/skip.txt", "x\n");
  d.write("data/top.csv", "x\n");
  d.write("one.csv", "x\n");
  d.write("MLTable", "paths:\n  - file: ./one.csv\n  - pattern: ./data/**/*.csv\n");
  auto t = load_mltable(d.path());
  REQUIRE(t.has_value());
  auto files = list_table_files(*t);
  REQUIRE(files.has_value());
  CHECK(*files == std::vector<std::string>{d.path("one.csv"), d.path("data/2024/01/a.csv"),
                                           d.path("data/2024/02/b.csv"), d.path("data/top.csv")});
  SUBCASE("a pattern matching nothing names its line") {
    d.write("MLTable", "paths:\n  - file: ./one.csv\n  - pattern: ./data/*.parquet\n");
    auto t2 = load_mltable(d.path("MLTable"));
    REQUIRE(t2.has_value());
    auto f2 = list_table_files(*t2);
    REQUIRE(!f2.has_value());
    CHECK(f2.error().code == ErrorCode::NotFound);
    CHECK(f2.error().message.find("MLTable:3: paths: pattern") != std::string::npos);
  }
}

TEST_CASE("client.listing.folders_recursively_and_sorted_patterns_absolute_or_relative") {
  ScratchDir d;
  d.write("f/b/2.csv", "x\n");
  d.write("f/a.csv", "x\n");
  d.write("f/b/1.csv", "x\n");
  TableSpec t;
  t.source = "MLTable";
  t.base_dir = d.path();
  t.paths = {TablePath{"folder", d.path("f"), 2}, TablePath{"pattern", d.path("f/b/*.csv"), 3},
             TablePath{"pattern", "f/[a]*", 4}};
  auto files = list_table_files(t);
  REQUIRE(files.has_value());
  CHECK(*files == std::vector<std::string>{d.path("f/a.csv"), d.path("f/b/1.csv"),
                                           d.path("f/b/2.csv"), d.path("f/b/1.csv"),
                                           d.path("f/b/2.csv"), d.path("f/a.csv")});
}

TEST_CASE("client.listing.entries_that_name_nothing_are_not_found") {
  ScratchDir d;
  d.write("real.csv", "x\n");
  struct Case {
    TablePath path;
    const char* must;
  };
  const std::vector<Case> cases = {
      {TablePath{"file", d.path("gone.csv"), 2},
       "t/MLTable:2: paths: file: expected an existing file"},
      {TablePath{"file", d.path(), 3}, "t/MLTable:3: paths: file: expected an existing file"},
      {TablePath{"folder", d.path("real.csv"), 4},
       "t/MLTable:4: paths: folder: expected an existing folder"},
      {TablePath{"pattern", "*.parquet", 5}, "t/MLTable:5: paths: pattern: expected a pattern"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.must);
    TableSpec t;
    t.source = "t/MLTable";
    t.base_dir = d.path();
    t.paths = {TablePath{"file", d.path("real.csv"), 1}, c.path};
    auto files = list_table_files(t);
    REQUIRE(!files.has_value());
    CHECK(files.error().code == ErrorCode::NotFound);
    CHECK(files.error().message.rfind(c.must, 0) == 0);
  }
}

TEST_CASE("client.listing.plain_table") {
  ScratchDir d;
  SUBCASE("a .tsv file is tab-separated, another file comma-separated") {
    auto t = plain_table(d.path("x.tsv"), false);
    CHECK(t.delimiter == "\t");
    REQUIRE(t.paths.size() == 1);
    CHECK(t.paths[0].kind == "file");
    CHECK(t.paths[0].value == d.path("x.tsv"));
    CHECK(t.base_dir == d.path());
    CHECK(plain_table(d.path("x.txt"), false).delimiter == ",");
  }
  SUBCASE("a folder is its .csv files, else its .tsv files") {
    d.write("in/a.tsv", "x\n");
    d.write("in/README", "x\n");
    auto t = plain_table(d.path("in"), true);
    CHECK(t.delimiter == "\t");
    REQUIRE(t.paths.size() == 1);
    CHECK(t.paths[0].kind == "pattern");
    CHECK(t.paths[0].value == "**/*.tsv");
    d.write("in/sub/b.csv", "x\n");
    auto t2 = plain_table(d.path("in"), true);
    CHECK(t2.delimiter == ",");
    CHECK(t2.paths[0].value == "**/*.csv");
    auto files = list_table_files(t2);
    REQUIRE(files.has_value());
    CHECK(*files == std::vector<std::string>{d.path("in/sub/b.csv")});
  }
}

// The MLTable file is never one of its own table's files.
TEST_CASE("client.listing.the_mltable_file_is_never_its_own_item") {
  ScratchDir d;
  d.write("a.png", "\x89PNG");
  d.write("sub/b.png", "\x89PNG");
  for (const char* entry : {"folder: ./", "pattern: ./*", "pattern: ./**/*"}) {
    CAPTURE(entry);
    d.write("MLTable", std::string("paths:\n  - ") + entry + "\n");
    auto t = load_mltable(d.path());
    REQUIRE(t.has_value());
    CHECK(t->format == fanout::config::TableFormat::Files);
    auto files = list_table_files(*t);
    REQUIRE(files.has_value());
    for (const auto& f : *files) CHECK(f != d.path("MLTable"));
    CHECK(std::find(files->begin(), files->end(), d.path("a.png")) != files->end());
  }
}

// A table of files counts files per mini-batch; a size cannot cut files.
TEST_CASE("client.listing.a_table_of_files_is_cut_by_file_count") {
  fanout::config::JobConfig c;
  c.spec_path = "/jobs/job.yaml";
  c.input_data = "images";
  CHECK(fanout::client::file_table_batch(c).value() == 10);  // not written: Azure's default
  c.mini_batch_size_written = true;
  c.mini_batch_size = "1";
  CHECK(fanout::client::file_table_batch(c).value() == 1);
  c.mini_batch_size = "10kb";
  auto bad = fanout::client::file_table_batch(c);
  REQUIRE(!bad.has_value());
  CHECK(bad.error().message ==
        "/jobs/job.yaml: mini_batch_size: expected a file count: inputs.images is a table of "
        "files (its MLTable has paths and no read_delimited) (got \"10kb\")");
}

// A folder holding `ln -s . self` and `ln -s .. sub/up` once made the listing endless (every
// file under self/self/self/...): each folder is entered once, each file listed once, and each
// link that leads back is reported once.
TEST_CASE("client.listing.a_symbolic_link_loop_lists_each_file_once") {
  namespace fs = std::filesystem;
  ScratchDir d;
  for (int i = 0; i < 4; ++i) d.write("data/f" + std::to_string(i) + ".txt", "x\n");
  d.write("data/sub/g.txt", "x\n");
  fs::create_directory_symlink(".", d.path("data/self"));
  fs::create_directory_symlink("..", d.path("data/sub/up"));
  std::vector<std::string> files;
  std::vector<std::pair<std::string, std::string>> repeats;
  const bool done = fanout::client::walk_folder(
      d.path("data"),
      [&](const std::string& f) {
        files.push_back(f);
        return files.size() < 1000;  // an endless listing stops here and fails the checks
      },
      [&](const std::string& entry, const std::string& first) {
        repeats.emplace_back(entry, first);
      });
  CHECK(done);
  CHECK(files == std::vector<std::string>{d.path("data/f0.txt"), d.path("data/f1.txt"),
                                          d.path("data/f2.txt"), d.path("data/f3.txt"),
                                          d.path("data/sub/g.txt")});
  CHECK(repeats ==
        std::vector<std::pair<std::string, std::string>>{{d.path("data/self"), d.path("data")},
                                                         {d.path("data/sub/up"), d.path("data")}});

  SUBCASE("a link to a sibling folder is not a loop and is listed once, under the link") {
    d.write("other/h.txt", "x\n");
    fs::create_directory_symlink("../other", d.path("data/a_other"));
    files.clear();
    repeats.clear();
    fanout::client::walk_folder(
        d.path("data"),
        [&](const std::string& f) {
          files.push_back(f);
          return files.size() < 1000;
        },
        [&](const std::string& entry, const std::string& first) {
          repeats.emplace_back(entry, first);
        });
    CHECK(files.front() == d.path("data/a_other/h.txt"));
    CHECK(files.size() == 6);
  }
}

// Every entry is a file, a folder walked, a repeat, a refusal or one of the job's own: a FIFO
// and a link to nothing are refused with why, the job's own file and folder are left out.
TEST_CASE("client.listing.entries_that_are_no_files_are_refused_and_own_files_left_out") {
  namespace fs = std::filesystem;
  ScratchDir d;
  d.write("data/a.txt", "x\n");
  d.write("data/store.db", "not an input\n");
  d.write("data/runs/logs/job_result.txt", "x\n");
  d.write("elsewhere/store.db", "an input of the same name\n");
  fs::create_directory_symlink("../elsewhere", d.path("data/z"));
  REQUIRE(::mkfifo(d.path("data/pipe").c_str(), 0600) == 0);
  fs::create_symlink(d.path("nowhere"), d.path("data/dangling"));
  fanout::client::WalkHooks hooks;
  std::vector<std::string> refused, excluded, files;
  hooks.on_refused = [&](const std::string&, const std::string& why) { refused.push_back(why); };
  hooks.on_excluded = [&](const std::string& path) { excluded.push_back(path); };
  for (const auto& own : {d.path("data/store.db"), d.path("data/runs")}) {
    struct stat st {};
    REQUIRE(::stat(own.c_str(), &st) == 0);
    hooks.excluded.emplace(st.st_dev, st.st_ino);
  }
  hooks.excluded_names.insert("store.db");
  fanout::client::walk_folder(
      d.path("data"),
      [&](const std::string& f) {
        files.push_back(f);
        return true;
      },
      [](const std::string&, const std::string&) {}, hooks);
  CHECK(files == std::vector<std::string>{d.path("data/a.txt"), d.path("data/z/store.db")});
  CHECK(excluded == std::vector<std::string>{d.path("data/runs"), d.path("data/store.db")});
  REQUIRE(refused.size() == 2);
  CHECK(refused[0].find(d.path("data/dangling") + ": a symbolic link to nothing") == 0);
  CHECK(refused[0].find("(ENOENT)") != std::string::npos);
  CHECK(refused[1] == d.path("data/pipe") + ": a FIFO, not a regular file");
}
