// Tests for the report's CSV files (src/fanout/report/csv.hpp): header, one line per row, NULL
// as an empty field, quoting, and the field count of a header.
#include "fanout/report/csv.hpp"

#include <doctest/doctest.h>

#include <string>

#include "fanout/store/report_source.hpp"
#include "fanout/util/atomic_file.hpp"

#include "../store/report_fixtures.hpp"
#include "scratch_dir.hpp"

using fanout::AtomicFile;
using fanout::store::ReportSource;
using fanout::store::ReportTable;
using fanout::test::make_report_store;
using fanout::test::ScratchDir;
using fanout::test::slurp;
namespace report = fanout::report;

TEST_CASE("report.csv.field_count") {
  CHECK(report::csv_field_count("A") == 1);
  CHECK(report::csv_field_count("A,B C,D") == 3);
  CHECK(report::csv_field_count("") == 1);
}

TEST_CASE("report.csv.writes_header_then_rows") {
  ScratchDir dir;
  const std::string db = dir.file("fanout.db");
  make_report_store(db);
  ReportSource src(db);
  {
    AtomicFile f(dir.file("disk.csv"));
    report::write_csv(src.rows(ReportTable::NodeDiskUsage, 1, "node1"),
                      "Time,Pool,Mount,Total MB,Used MB,Free MB,Used Percent", f);
    f.commit();
  }
  const std::string text = slurp(dir.file("disk.csv"));
  CHECK(text.rfind("Time,Pool,Mount,Total MB,Used MB,Free MB,Used Percent\n", 0) == 0);
  CHECK(text.find("\n2023-11-14T22:13:21.000Z,pool-a,/,100.0,40.0,60.0,40.0\n") !=
        std::string::npos);
  std::size_t lines = 0;
  for (char c : text) lines += c == '\n' ? 1 : 0;
  CHECK(lines == 5);  // header and four samples

  // A message with a comma, quotes and line breaks is one quoted field; NULL is empty.
  {
    AtomicFile f(dir.file("pm.csv"));
    report::write_csv(src.rows(ReportTable::ProcessedMiniBatches, 1), "a,b,c,d,e,f,g,h,i,j,k,l,m,n",
                      f);
    f.commit();
  }
  CHECK(slurp(dir.file("pm.csv")).find("\"ValueError: bad \"\"row\"\", really\nTraceback") !=
        std::string::npos);
  src.finish();
}
