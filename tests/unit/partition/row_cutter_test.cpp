// Property tests for RowCutter: every row lands in exactly one range, ranges are contiguous and
// never cut inside a quoted field, and none exceeds its bound unless it is a single row.
#include "fanout/partition/row_cutter.hpp"

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

using fanout::part::RowCutter;
using fanout::part::RowRange;

namespace {

// n rows; some hold quoted fields with delimiters, line breaks and doubled quotes.
std::vector<std::string> make_rows(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> rows;
  for (std::size_t i = 0; i < n; ++i) {
    std::string r = std::to_string(i) + ",";
    switch (rng() % 4) {
      case 0:
        r += "plain";
        break;
      case 1:
        r += "\"a,b\nc\"";
        break;
      case 2:
        r += "\"say \"\"hi\"\"\n\"";
        break;
      default:
        r += std::string(rng() % 200, 'x');
        break;
    }
    rows.push_back(r + "\n");
  }
  return rows;
}

std::vector<RowRange> cut(const std::string& text, std::uint64_t max, std::size_t chunk,
                          std::uint64_t start = 0) {
  RowCutter c(max, start);
  std::vector<RowRange> out;
  for (std::size_t i = 0; i < text.size(); i += chunk) {
    c.feed(std::string_view(text).substr(i, chunk), out);
  }
  if (auto r = c.finish()) out.push_back(*r);
  CHECK(!c.in_quotes());
  return out;
}

}  // namespace

TEST_CASE("partition.row_cutter.every_row_exactly_once") {
  for (std::size_t n : {0u, 1u, 7u, 1000u}) {
    for (std::uint64_t max : {1u, 50u, 1024u, 10240u, 1u << 30}) {
      for (std::size_t chunk : {1u, 7u, 65536u}) {
        CAPTURE(n);
        CAPTURE(max);
        CAPTURE(chunk);
        auto rows = make_rows(n, static_cast<unsigned>(n + max));
        std::string text;
        std::vector<std::uint64_t> ends;  // offset after each row
        for (const auto& r : rows) {
          text += r;
          ends.push_back(text.size());
        }
        auto ranges = cut(text, max, chunk);
        std::uint64_t pos = 0, rows_seen = 0;
        std::size_t next_row = 0;
        for (const auto& r : ranges) {
          CHECK(r.begin == pos);  // contiguous: nothing skipped, nothing twice
          CHECK(r.end > r.begin);
          CHECK(r.rows >= 1);
          if (r.rows > 1) CHECK(r.end - r.begin <= max);
          // The range ends exactly at a row end, after r.rows rows.
          next_row += r.rows;
          REQUIRE(next_row <= ends.size());
          CHECK(ends[next_row - 1] == r.end);
          rows_seen += r.rows;
          pos = r.end;
        }
        CHECK(pos == text.size());
        CHECK(rows_seen == n);
      }
    }
  }
}

TEST_CASE("partition.row_cutter.last_row_without_line_break_and_start_offset") {
  auto ranges = cut("a,b\nc,d", 1000, 3, 10);
  REQUIRE(ranges.size() == 1);
  CHECK(ranges[0].begin == 10);
  CHECK(ranges[0].end == 17);
  CHECK(ranges[0].rows == 2);
  CHECK(cut("", 10, 4).empty());
}

TEST_CASE("partition.row_cutter.unclosed_quote_is_reported") {
  RowCutter c(10);
  std::vector<RowRange> out;
  c.feed("a,\"b\nc\n", out);
  CHECK(out.empty());
  CHECK(c.in_quotes());
}

TEST_CASE("partition.row_cutter.split_row_and_first_row_end") {
  using fanout::part::split_row;
  CHECK(split_row("a,b,c\r\n", ',') == std::vector<std::string>{"a", "b", "c"});
  CHECK(split_row("\"x,y\",\"q\"\"\",", ',') == std::vector<std::string>{"x,y", "q\"", ""});
  CHECK(split_row("a\tb", '\t') == std::vector<std::string>{"a", "b"});
  CHECK(fanout::part::first_row_end("\"h\n1\",h2\nrest") == 9);
  CHECK(fanout::part::first_row_end("no end") == std::string_view::npos);
}
