// Tests for MLTable parsing (accepted files, near misses with code, key and line), glob_match and
// partition formats. Listing a table's files is tested in tests/unit/client/listing_test.cpp.
#include "fanout/config/mltable.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "scratch_dir.hpp"

namespace fs = std::filesystem;
using fanout::ErrorCode;
using namespace fanout::config;

using fanout::test::ScratchDir;
using fanout::test::slurp;

namespace {}  // namespace

TEST_CASE("config.mltable.accepts") {
  SUBCASE("full read_delimited and column steps") {
    auto t = parse_mltable(R"(type: mltable
paths:
  - file: ./a.csv
  - folder: ./more
  - pattern: ./data/**/*.csv
transformations:
  - read_delimited:
      delimiter: ';'
      encoding: latin1
      header: from_first_file
      empty_as_string: true
      include_path_column: true
  - extract_columns_from_partition_format:
      partition_format: "data/{year}/{month}/*.csv"
  - drop_columns: [a, b]
  - keep_columns: c
)",
                           "/x/MLTable");
    REQUIRE(t.has_value());
    REQUIRE(t->paths.size() == 3);
    CHECK(t->paths[0].kind == "file");
    CHECK(t->paths[0].value == "/x/a.csv");
    CHECK(t->paths[1].value == "/x/more");
    CHECK(t->paths[2].value == "./data/**/*.csv");
    CHECK(t->delimiter == ";");
    CHECK(t->encoding == "latin1");
    CHECK(t->header == "from_first_file");
    CHECK(t->empty_as_string);
    CHECK(t->include_path_column);
    CHECK(t->partition_format == "data/{year}/{month}/*.csv");
    CHECK(t->drop_columns == std::vector<std::string>{"a", "b"});
    CHECK(t->keep_columns == std::vector<std::string>{"c"});
  }
  SUBCASE("defaults") {
    auto t = parse_mltable("paths:\n  - file: a.csv\n", "/x/MLTable");
    REQUIRE(t.has_value());
    CHECK(t->delimiter == ",");
    CHECK(t->header == "all_files_same_headers");
    CHECK(t->encoding == "utf8");
    CHECK(!t->include_path_column);
  }
  SUBCASE("tab delimiter written as \\t and partition format as a string") {
    auto t = parse_mltable(
        "paths:\n  - file: a.tsv\ntransformations:\n  - read_delimited: {delimiter: '\\t'}\n"
        "  - extract_columns_from_partition_format: '{k}.tsv'\n",
        "/x/MLTable");
    REQUIRE(t.has_value());
    CHECK(t->delimiter == "\t");
    CHECK(t->partition_format == "{k}.tsv");
  }
}

TEST_CASE("config.mltable.format_is_what_the_file_says") {
  // Only paths: Azure ML's file table; still read with delimited defaults.
  auto files = parse_mltable("paths:\n  - folder: ./images\n", "/x/MLTable");
  REQUIRE(files.has_value());
  CHECK(files->format == TableFormat::Files);
  CHECK(files->delimiter == ",");
  auto columns = parse_mltable("paths:\n  - file: a.csv\ntransformations:\n  - drop_columns: a\n",
                               "/x/MLTable");
  REQUIRE(columns.has_value());
  CHECK(columns->format == TableFormat::Files);
  auto rows = parse_mltable("paths:\n  - file: a.csv\ntransformations:\n  - read_delimited:\n",
                            "/x/MLTable");
  REQUIRE(rows.has_value());
  CHECK(rows->format == TableFormat::Delimited);
}

TEST_CASE("config.mltable.rejects_near_misses") {
  struct Case {
    const char* text;
    const char* key;
    int line;
  };
  const std::vector<Case> cases = {
      {"[1, 2]\n", "", 1},
      {"transformations: []\n", "paths", 1},
      {"paths: []\n", "paths", 1},
      {"paths:\n  - files: a.csv\n", "paths[0]", 2},
      {"paths:\n  - file: https://x/a.csv\n", "paths[0].file", 2},
      {"paths:\n  - file: a.csv\npath: b\n", "path", 3},
      {"paths:\n  - file: a.csv\ntransformations:\n  - read_delimited:\n      header: maybe\n",
       "transformations[0].read_delimited.header", 5},
      {"paths:\n  - file: a.csv\ntransformations:\n  - read_delimited:\n      delimiter: ';;'\n",
       "transformations[0].read_delimited.delimiter", 5},
      {"paths:\n  - file: a.csv\ntransformations:\n  - read_delimited:\n      encoding: ebcdic\n",
       "transformations[0].read_delimited.encoding", 5},
      {"paths:\n  - file: a.csv\ntransformations:\n  - read_delimited:\n      quoting: none\n",
       "transformations[0].read_delimited.quoting", 5},
      {"paths:\n  - file: a.csv\ntransformations:\n  - read_parquet: {}\n", "transformations[0]",
       4},
      {"paths:\n  - file: a.csv\ntransformations:\n  - drop_columns: {x: 1}\n",
       "transformations[0].drop_columns", 4},
      {"paths:\n  - file: a.csv\ntransformations:\n  - extract_columns_from_partition_format: "
       "'a/b'\n",
       "transformations[0].extract_columns_from_partition_format", 4},
      {"paths:\n  - file: [a\n", "YAML", 3},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    auto t = parse_mltable(c.text, "d/MLTable");
    REQUIRE(!t.has_value());
    CHECK(t.error().code == ErrorCode::InvalidArgument);
    const std::string& m = t.error().message;
    CAPTURE(m);
    CHECK(m.rfind("d/MLTable:" + std::to_string(c.line) + ":", 0) == 0);
    CHECK(m.find(c.key) != std::string::npos);
  }
}

TEST_CASE("config.mltable.a_missing_mltable_is_not_found") {
  ScratchDir d;
  auto t3 = load_mltable(d.path("nowhere"));
  REQUIRE(!t3.has_value());
  CHECK(t3.error().code == ErrorCode::NotFound);
}

TEST_CASE("config.mltable.glob_match") {
  CHECK(glob_match("data/**/*.csv", "data/a.csv"));
  CHECK(glob_match("data/**/*.csv", "data/x/y/a.csv"));
  CHECK(!glob_match("data/*.csv", "data/x/a.csv"));
  CHECK(glob_match("**", "a/b/c"));
  CHECK(glob_match("d?t[a-c]/f[!0-9].txt", "data/fx.txt"));
  CHECK(!glob_match("d?t[a-c]/f[!0-9].txt", "data/f1.txt"));
  CHECK(!glob_match("*.csv", "a.tsv"));
}

TEST_CASE("config.mltable.partition_format") {
  auto m = match_partition_format("{user}/{season}/{genre}.wav", "ann/2020/jazz.wav");
  REQUIRE(m.ok);
  CHECK(m.values == std::vector<std::pair<std::string, std::string>>{
                        {"user", "ann"}, {"season", "2020"}, {"genre", "jazz"}});
  CHECK(match_partition_format("/{a}/*.csv", "x/y.csv").ok);
  CHECK(!match_partition_format("{a}/{b}.wav", "x/y/z.wav").ok);
  CHECK(!match_partition_format("{a}.wav", ".wav").ok);
  CHECK(partition_format_keys("{a}/x/{b}.csv") == std::vector<std::string>{"a", "b"});
}

// The MLTable file written into an mltable output reads back as what was written.
TEST_CASE("config.mltable.output_mltable_reads_back") {
  SUBCASE("append_row file in the folder: delimited with the separator, no header") {
    const std::string text =
        output_mltable_text("/out/res", "/out/res/parallel_run_step.txt", " ", false);
    auto t = parse_mltable(text, "/out/res/MLTable");
    REQUIRE_MESSAGE(t.has_value(), (t ? "" : t.error().message));
    CHECK(t->format == TableFormat::Delimited);
    REQUIRE(t->paths.size() == 1);
    CHECK(t->paths[0].kind == "file");
    CHECK(t->paths[0].value == "/out/res/parallel_run_step.txt");
    CHECK(t->delimiter == " ");
    CHECK(t->header == "no_header");
  }
  SUBCASE("tab and comma separators, header, quote in a name") {
    auto tab = parse_mltable(output_mltable_text("/o", "/o/it's.tsv", "\t", true), "/o/MLTable");
    REQUIRE_MESSAGE(tab.has_value(), (tab ? "" : tab.error().message));
    CHECK(tab->delimiter == "\t");
    CHECK(tab->header == "all_files_same_headers");
    CHECK(tab->paths[0].value == "/o/it's.tsv");
    auto comma = parse_mltable(output_mltable_text("/o", "/o/sub/r.csv", ",", false), "/o/MLTable");
    REQUIRE(comma.has_value());
    CHECK(comma->delimiter == ",");
    CHECK(comma->paths[0].value == "/o/sub/r.csv");
  }
  SUBCASE("no append_row file in the folder: a table of the folder's files") {
    for (const std::string& row : {std::string(), std::string("/elsewhere/rows.txt")}) {
      auto t = parse_mltable(output_mltable_text("/o", row, " ", false), "/o/MLTable");
      REQUIRE(t.has_value());
      CHECK(t->format == TableFormat::Files);
      REQUIRE(t->paths.size() == 1);
      CHECK(t->paths[0].kind == "folder");
      CHECK(t->paths[0].value == "/o");
    }
  }
}

TEST_CASE("config.mltable.read_json_lines_and_steps_in_order") {
  auto t = parse_mltable(R"(type: mltable
paths:
  - pattern: ./logs/*.jsonl
transformations:
  - read_json_lines:
      encoding: latin1
      invalid_lines: drop
      include_path_column: true
  - skip: 2
  - take_random_sample:
      probability: 0.5
      seed: 7
  - take: 10
  - convert_column_types:
      - columns: [a, b]
        column_type: int
      - columns: when
        column_type:
          datetime:
            formats: ["%Y-%m-%d"]
      - columns: ok
        column_type:
          boolean:
            true_values: ["yes"]
            false_values: ["no"]
            mismatch_as: false
  - filter: 'col("a") >= 3 and col("name") != "x y"'
)",
                         "d/MLTable");
  REQUIRE_MESSAGE(t.has_value(), (t ? "" : t.error().message));
  CHECK(t->format == TableFormat::JsonLines);
  CHECK(t->encoding == "latin1");
  CHECK(t->invalid_lines == "drop");
  CHECK(t->include_path_column);
  REQUIRE(t->row_steps.size() == 3);
  CHECK(t->row_steps[0].kind == RowStep::Kind::Skip);
  CHECK(t->row_steps[0].count == 2);
  CHECK(t->row_steps[1].kind == RowStep::Kind::Sample);
  CHECK(t->row_steps[1].probability == 0.5);
  CHECK(t->row_steps[1].seed == 7);
  CHECK(t->row_steps[2].kind == RowStep::Kind::Take);
  CHECK(t->row_steps[2].count == 10);
  CHECK(t->column_steps ==
        R"([{"convert":[{"columns":["a","b"],"type":"int"},)"
        R"({"columns":["when"],"type":"datetime","formats":["%Y-%m-%d"]},)"
        R"({"columns":["ok"],"type":"boolean","true_values":["yes"],"false_values":["no"],)"
        R"("mismatch_as":"false"}]},)"
        R"({"filter":[["a",">=",3],["name","!=","x y"]]}])");
}

TEST_CASE("config.mltable.refuses_what_fanout_cannot_do_and_says_why") {
  struct Case {
    const char* steps;
    const char* key;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"  - read_parquet: {}\n", "transformations[0]", "no Parquet library"},
      {"  - read_delta_lake: {}\n", "transformations[0]", "convert the files to CSV"},
      {"  - read_json_lines:\n      invalid_lines: skip\n",
       "transformations[0].read_json_lines.invalid_lines", "error or drop"},
      {"  - take: -1\n", "transformations[0].take", ""},
      {"  - take_random_sample: {probability: 2}\n",
       "transformations[0].take_random_sample.probability", "from 0 to 1"},
      {"  - convert_column_types:\n      - columns: a\n        column_type: decimal\n",
       "transformations[0].convert_column_types[0].column_type", "int, float"},
      {"  - filter: 'col(\"a\") > 1 or col(\"b\") < 2'\n", "transformations[0].filter",
       "expected and or the end"},
      {"  - filter: 'col(\"a\").str.contains(\"x\")'\n", "transformations[0].filter",
       "==, !=, <, <=, > or >="},
      {"  - filter: 'col(\"a\") > 1'\n  - take: 5\n", "transformations[1].take",
       "put take before filter"},
  };
  for (const auto& c : cases) {
    const std::string text = std::string("paths:\n  - file: a.csv\ntransformations:\n") + c.steps;
    CAPTURE(text);
    auto t = parse_mltable(text, "d/MLTable");
    REQUIRE(!t.has_value());
    const std::string& m = t.error().message;
    CAPTURE(m);
    CHECK(m.rfind("d/MLTable:", 0) == 0);
    CHECK(m.find(c.key) != std::string::npos);
    CHECK(m.find(c.why) != std::string::npos);
  }
}

TEST_CASE("config.mltable.row_selector_applies_steps_in_order") {
  auto kept = [](std::vector<RowStep> steps, int rows) {
    RowSelector sel(std::move(steps));
    std::vector<int> out;
    for (int i = 0; i < rows && !sel.done(); ++i) {
      if (sel.keep()) out.push_back(i);
    }
    return out;
  };
  using K = RowStep::Kind;
  // skip 2 then take 3: rows 2, 3, 4 (pandas: df.iloc[2:][:3]).
  CHECK(kept({{K::Skip, 2}, {K::Take, 3}}, 10) == std::vector<int>{2, 3, 4});
  // take 3 then skip 2: row 2 only (df.iloc[:3].iloc[2:]).
  CHECK(kept({{K::Take, 3}, {K::Skip, 2}}, 10) == std::vector<int>{2});
  CHECK(kept({{K::Take, 0}}, 10).empty());
  CHECK(kept({{K::Skip, 20}}, 10).empty());
  // A sample is reproducible with its seed, a subset in order, and near its probability.
  RowStep s{K::Sample, 0, 0.3, 42};
  const auto a = kept({s}, 10000);
  CHECK(a == kept({s}, 10000));
  CHECK(a.size() > 2700);
  CHECK(a.size() < 3300);
  s.seed = 43;
  CHECK(a != kept({s}, 10000));
  // take after a sample takes the sample's first rows.
  const auto b = kept({{K::Sample, 0, 0.3, 42}, {K::Take, 5}}, 10000);
  CHECK(b == std::vector<int>(a.begin(), a.begin() + 5));
}
