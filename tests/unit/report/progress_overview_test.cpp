// Tests for the progress overview (src/fanout/report/progress_overview.hpp): its text, its file
// name, and its counters as read from the store.
#include "fanout/report/progress_overview.hpp"

#include <doctest/doctest.h>

#include <string>

namespace report = fanout::report;

TEST_CASE("report.progress_overview.text") {
  report::ProgressOverview p;
  p.job_id = 3;
  p.name = "demo";
  p.state = "running";
  p.total_known = true;
  p.total = 10;
  p.succeeded = 3;
  p.failed = 1;
  p.items_succeeded = 30;
  p.items_failed = 10;
  p.started = 1700000000;
  p.now = 1700000008;
  const std::string t = report::format_progress_overview(p);
  CHECK(t.find("job 3 (demo): running\n") == 0);
  CHECK(t.find("mini-batches: 4 of 10 done (40.0%): 3 succeeded, 1 failed\n") != std::string::npos);
  CHECK(t.find("rate: 0.500 mini-batches/s, 5.000 items/s\n") != std::string::npos);
  CHECK(t.find("eta_seconds: 12.0\n") != std::string::npos);
  CHECK(report::progress_overview_name(1700000000) == "job_progress_overview.2023111422.txt");
}
