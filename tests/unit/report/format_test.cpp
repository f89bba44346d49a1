// Tests for the report's field formatting (src/fanout/report/format.hpp): CSV quoting, times.
#include "fanout/report/format.hpp"

#include <doctest/doctest.h>

#include <string>

namespace report = fanout::report;

TEST_CASE("report.format.csv_quoting") {
  std::string out;
  report::append_csv_field(out, "plain");
  out += '|';
  report::append_csv_field(out, "a,b");
  out += '|';
  report::append_csv_field(out, "say \"hi\"");
  out += '|';
  report::append_csv_field(out, "two\nlines");
  CHECK(out == "plain|\"a,b\"|\"say \"\"hi\"\"\"|\"two\nlines\"");
}

TEST_CASE("report.format.utc_text") {
  CHECK(report::utc_text(1700000001.5) == "2023-11-14T22:13:21.500Z");
  CHECK(report::utc_text(0) == "-");
  CHECK(report::utc_text(-1) == "-");
}
