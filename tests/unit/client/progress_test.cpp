// The progress line (client/session/progress.hpp), read as its specification: its figures count
// from the job's own start, and it fits the width it is given, dropping fields by priority. No
// terminal: times and widths are passed in.
#include "client/session/progress.hpp"

#include <doctest/doctest.h>

#include <string>

using fanout::client::kOwnRateAfterS;
using fanout::client::progress_figures;
using fanout::client::progress_line;
using fanout::client::ProgressBaseline;
using fanout::client::ProgressFigures;
namespace proto = fanout::proto;

namespace {

proto::JobProgress progress(std::uint64_t done, std::uint64_t total) {
  proto::JobProgress p;
  p.job_id = 3;
  p.total = total;
  p.submitted = total;
  p.succeeded = done;
  p.items_succeeded = done * 10;
  p.attempts_failed = 12;
  return p;
}

}  // namespace

TEST_CASE("a client attaching late shows the job's elapsed time and average, not its own") {
  // The job started 100 s ago and finished 500 of 1000 mini-batches; the client just attached.
  const double now = 1'000'100;
  const auto p = progress(500, 1000);
  const ProgressBaseline first{now, 5000, 500};
  const ProgressFigures f = progress_figures(p, 1'000'000, first, now);
  CHECK(f.elapsed_s == doctest::Approx(100));
  CHECK(f.items_per_s == doctest::Approx(50));  // 5000 items in 100 s, not 5000 in ~0 s
  CHECK(f.eta_s == doctest::Approx(100));       // 500 left at 5 per second
}

TEST_CASE("after following a while, the rate is what the client saw (a resumed job's pace)") {
  // Started an hour ago, down most of that time: 500 done at attach, 600 ten seconds later.
  const double start = 1'000'000, attached = start + 3600;
  const ProgressBaseline first{attached, 5000, 500};
  auto p = progress(600, 1000);
  const ProgressFigures f = progress_figures(p, start, first, attached + 10);
  CHECK(f.elapsed_s == doctest::Approx(3610));
  CHECK(f.items_per_s == doctest::Approx(100));  // 1000 items in 10 s
  CHECK(f.eta_s == doctest::Approx(40));         // 400 left at 10 per second
  // Before kOwnRateAfterS of following, the job's own average stands.
  const ProgressFigures early = progress_figures(p, start, first, attached + kOwnRateAfterS / 2);
  CHECK(early.items_per_s == doctest::Approx(6000 / (3600 + kOwnRateAfterS / 2)));
}

TEST_CASE("no ETA before anything finished, nor once all did, nor without a total") {
  const ProgressBaseline first{10, 0, 0};
  CHECK(progress_figures(progress(0, 10), 0, first, 20).eta_s < 0);
  CHECK(progress_figures(progress(10, 10), 0, first, 20).eta_s < 0);
  CHECK(progress_figures(progress(5, 0), 0, first, 20).eta_s < 0);
}

TEST_CASE("the whole line when it fits, in its usual order") {
  const ProgressFigures f{65, 76.9, 65};
  const std::string line = progress_line(progress(500, 1000), f);
  CHECK(
      line ==
      "mini-batches 500/1000 (50%)  failed 0  items 5000 (76.9/s)  failed attempts 12  eta 1m05s  "
      "elapsed 1m05s");
}

TEST_CASE("fields are dropped by priority until the line fits the width") {
  const ProgressFigures f{3725, 12345.6, 7300};
  const auto p = progress(123456, 1000000);
  const std::string full = progress_line(p, f);
  REQUIRE(full.size() > 79);
  const std::string w79 = progress_line(p, f, 79);
  CHECK(w79.size() <= 79);
  // Failed attempts go first, then elapsed; the counts and the ETA stay.
  CHECK(w79.find("failed attempts") == std::string::npos);
  CHECK(w79.find("mini-batches 123456/1000000 (12%)") == 0);
  CHECK(w79.find("eta 2h01m") != std::string::npos);
  const std::string w40 = progress_line(p, f, 40);
  CHECK(w40 == "mini-batches 123456/1000000 (12%)");
  // Even the counts are cut rather than wrapped.
  CHECK(progress_line(p, f, 10) == "mini-batch");
  for (std::size_t w = 1; w < full.size() + 2; ++w) CHECK(progress_line(p, f, w).size() <= w);
}
