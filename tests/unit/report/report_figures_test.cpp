// Tests for the report's figures as pure functions of constructed rows
// (src/fanout/report/report_figures.hpp): no store, no files. Each test builds AttemptRows as
// the store's one pass hands them over and checks one figure.
#include "fanout/report/report_figures.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <vector>

namespace report = fanout::report;
namespace store = fanout::store;

namespace {

// An attempt of mini-batch `mb`, try `attempt`, on `process` of pool `pool_id` (none when
// empty), from `start` for `elapsed` seconds, `run` of them in run().
store::AttemptRow row(std::uint64_t mb, std::int64_t attempt, std::string_view status,
                      std::string_view process, double start, double elapsed, double run,
                      std::uint64_t pool_id = 1) {
  store::AttemptRow a;
  a.minibatch_id = mb;
  a.attempt = attempt;
  a.status = status;
  a.pool_id = pool_id;
  a.pool = pool_id == 1 ? "pool1" : "pool2";
  a.node = "node-a";
  a.process = process;
  a.start = start;
  a.elapsed_s = elapsed;
  a.run_s = run;
  a.cpu_s = run;
  a.items = 10;
  a.has_start = a.has_elapsed = a.has_run = a.has_cpu = a.has_items = true;
  if (status != "RUN_DONE") {
    a.error_category = "UserError";
    a.error_message = "boom\nsecond line";
  }
  return a;
}

// The tally of `rows`, and a ReportData holding a job of `total` mini-batches from t = 1000.
struct Job {
  report::AttemptTally tally{};
  report::ReportData r{};
  explicit Job(const std::vector<store::AttemptRow>& rows, std::uint64_t total = 0) {
    for (const auto& a : rows) tally.add(a);
    r.started = 1000;
    r.total_known = true;
    r.total = total;
    r.snapshot = 2000;
  }
};

std::uint64_t sum(const std::vector<report::ReportData::Bin>& bins,
                  std::uint64_t report::ReportData::Bin::*field) {
  std::uint64_t n = 0;
  for (const auto& b : bins) n += b.*field;
  return n;
}

}  // namespace

TEST_CASE("report.report_figures.workers_ordered_by_pool_then_process") {
  Job j({row(1, 1, "RUN_DONE", "w2", 1000, 1, 1), row(2, 1, "RUN_DONE", "w1", 1001, 2, 1),
         row(3, 1, "RUN_DONE", "w0", 1002, 1, 1, 2), row(4, 1, "LOST", "", 1003, 0, 0)});
  report::order_workers(j.tally, j.r);
  REQUIRE(j.r.workers.size() == 3);
  CHECK(j.r.workers[0].process == "w1");
  CHECK(j.r.workers[1].process == "w2");
  CHECK(j.r.workers[2].pool == "pool2");
  CHECK(j.r.worker_attempts == 3);
  CHECK(j.r.first_start == 1000);
  CHECK(j.r.last_end == 1003);
  // The points follow their workers' new places; the one that reached none keeps kNoWorker.
  const auto points = j.tally.points.to_vector();
  CHECK(points[0].worker == 1);
  CHECK(points[1].worker == 0);
  CHECK(points[3].worker == report::kNoWorker);
}

TEST_CASE("report.report_figures.histograms_span_min_to_max_of_successful_attempts") {
  Job j({row(1, 1, "RUN_DONE", "w", 1000, 1.5, 1), row(2, 1, "RUN_DONE", "w", 1002, 2.5, 2),
         row(3, 1, "RUN_DONE", "w", 1005, 3.5, 3), row(4, 1, "RUN_EXCEPTION", "w", 1009, 9, 9)});
  report::ReportData::Histogram run, over;
  report::fill_histograms(j.tally.points, 4, run, over);
  CHECK(run.n == 3);  // the failed attempt is not measured
  CHECK(run.min == doctest::Approx(1));
  CHECK(run.max == doctest::Approx(3));
  CHECK(run.mean == doctest::Approx(2));
  CHECK(run.width == doctest::Approx(0.5));
  REQUIRE(run.counts.size() == 4);
  CHECK(run.counts == std::vector<std::uint64_t>{1, 0, 1, 1});  // the last bin holds the maximum
  // Every overhead is 0.5: one bin.
  CHECK(over.counts == std::vector<std::uint64_t>{3});
  CHECK(over.mean == doctest::Approx(0.5));
}

TEST_CASE("report.report_figures.a_mini_batch_finishes_on_success_or_on_its_last_try") {
  // Mini-batch 1 fails its first two tries; mini-batch 2 succeeds at once.
  const std::vector<store::AttemptRow> rows{row(1, 1, "RUN_EXCEPTION", "w", 1000, 1, 1),
                                            row(2, 1, "RUN_DONE", "w", 1001, 1, 1),
                                            row(1, 2, "RUN_EXCEPTION", "w", 1002, 1, 1)};
  SUBCASE("one retry: the second failure is final") {
    Job j(rows, 2);
    report::order_workers(j.tally, j.r);
    report::fill_series_bins(j.tally.points, 10, 1, j.r);
    CHECK(sum(j.r.bins, &report::ReportData::Bin::finished) == 2);
    CHECK(j.r.bins.back().queued == 0);
  }
  SUBCASE("three retries: mini-batch 1 is not finished") {
    Job j(rows, 2);
    report::order_workers(j.tally, j.r);
    report::fill_series_bins(j.tally.points, 10, 3, j.r);
    CHECK(sum(j.r.bins, &report::ReportData::Bin::finished) == 1);
    CHECK(j.r.bins.back().queued == 1);
  }
}

TEST_CASE("report.report_figures.series_bins_count_starts_ends_and_running") {
  // From t0 = 1000 to the end at 1010; 10 bins asked for, but the median attempt takes 2 s: 5
  // bins of 2 s, and one more for the end itself.
  Job j({row(1, 1, "RUN_DONE", "w", 1000.5, 2, 1), row(2, 1, "RUN_DONE", "w", 1004.5, 5, 1),
         row(3, 1, "RUN_EXCEPTION", "w", 1009.5, 0.5, 0.1)},
        3);
  j.r.ended = 1010;
  report::order_workers(j.tally, j.r);
  report::fill_series_bins(j.tally.points, 10, 0, j.r);
  CHECK(j.r.t0 == 1000);
  CHECK(j.r.bin_s == doctest::Approx(2));
  REQUIRE(j.r.bins.size() == 6);
  CHECK(j.r.bins[0].started == 1);
  CHECK(j.r.bins[1].ended == 1);  // 1000.5 + 2
  CHECK(j.r.bins[1].items == 10);
  CHECK(j.r.bins[1].running == 1);  // started in bin 0, not ended before bin 1
  CHECK(j.r.bins[3].running == 1);
  CHECK(j.r.bins[4].ended == 1);  // 1004.5 + 5
  CHECK(j.r.bins[5].failed == 1);
  CHECK(sum(j.r.bins, &report::ReportData::Bin::started) == 3);
  CHECK(j.r.bins[5].queued == 0);
}

TEST_CASE("report.report_figures.series_bins_are_never_narrower_than_the_typical_task") {
  // 100 ms attempts on 2 workers for 2 s: 200 bins of 10 ms would hold 0 or 1 completion each
  // (a comb from 0 to 100/s); bins of 100 ms hold 2.
  std::vector<store::AttemptRow> rows;
  for (int i = 0; i < 40; ++i) {
    rows.push_back(row(static_cast<std::uint64_t>(i + 1), 1, "RUN_DONE", i % 2 ? "w1" : "w0",
                       1000 + 0.1 * (i / 2), 0.1, 0.09));
  }
  Job j(rows, 40);
  j.r.ended = 1002;
  report::order_workers(j.tally, j.r);
  report::fill_series_bins(j.tally.points, 200, 0, j.r);
  CHECK(j.r.bin_s == doctest::Approx(0.1));
  CHECK(j.r.bins.size() == 21);
  CHECK(sum(j.r.bins, &report::ReportData::Bin::succeeded) == 40);
  // A long job keeps its duration-based bins, rounded to 1, 2 or 5 × 10^k s.
  j.r.ended = 1000 + 3000;
  report::fill_series_bins(j.tally.points, 200, 0, j.r);
  CHECK(j.r.bin_s == doctest::Approx(20));  // 3000 / 200 = 15, rounded up
}

TEST_CASE("report.report_figures.overhead_is_never_negative") {
  // The worker timed run() 3 ms longer than the pool timed the attempt.
  Job j(
      {row(1, 1, "RUN_DONE", "w", 1000, 0.100, 0.103), row(2, 1, "RUN_DONE", "w", 1001, 0.1, 0.09)},
      2);
  report::ReportData::Histogram run, over;
  report::fill_histograms(j.tally.points, 10, run, over);
  CHECK(over.min == doctest::Approx(0));
  CHECK(over.lo >= 0);
  CHECK(over.clamped == 1);
  CHECK(over.max == doctest::Approx(0.01));
}

TEST_CASE("report.report_figures.timeline_is_binned_above_the_attempt_limit") {
  std::vector<store::AttemptRow> rows;
  std::vector<std::string> names{"w0", "w1"};
  for (int i = 0; i < 40; ++i) {
    rows.push_back(row(static_cast<std::uint64_t>(i), 1, i == 7 ? "RUN_TIMEOUT" : "RUN_DONE",
                       names[static_cast<std::size_t>(i % 2)], 1000 + i * 0.5, 0.4, 0.3));
  }
  SUBCASE("one bar per attempt, by start") {
    Job j(rows, 40);
    report::order_workers(j.tally, j.r);
    report::fill_series_bins(j.tally.points, 10, 3, j.r);
    report::fill_timeline(j.tally.points, j.tally.statuses, {}, j.r);
    CHECK_FALSE(j.r.timeline_binned);
    REQUIRE(j.r.segments.size() == 40);
    CHECK(j.r.segments[7].status == "RUN_TIMEOUT");
    CHECK(j.r.segments[7].minibatch == 7);
    CHECK(j.r.segments[7].t_end - j.r.segments[7].t_start == doctest::Approx(0.4));
  }
  SUBCASE("binned: every attempt counted once, a failed one marks its bin") {
    Job j(rows, 40);
    report::order_workers(j.tally, j.r);
    report::fill_series_bins(j.tally.points, 10, 3, j.r);
    report::fill_timeline(j.tally.points, j.tally.statuses,
                          {.max_timeline_attempts = 10, .max_timeline_segments = 20}, j.r);
    CHECK(j.r.timeline_binned);
    std::uint64_t attempts = 0, failed_bins = 0;
    for (const auto& s : j.r.segments) {
      attempts += s.attempts;
      failed_bins += s.status == "FAILED" ? 1 : 0;
      CHECK(s.t_end - s.t_start <= j.r.timeline_bin_s + 1e-9);
    }
    CHECK(attempts == 40);
    CHECK(failed_bins == 1);
  }
}

TEST_CASE("report.report_figures.failures_ranked_most_frequent_first") {
  report::AttemptTally tally(2);
  for (int i = 0; i < 3; ++i)
    tally.add(row(static_cast<std::uint64_t>(i), 1, "RUN_TIMEOUT", "w", 1000 + i, 1, 1));
  for (int i = 0; i < 5; ++i)
    tally.add(row(static_cast<std::uint64_t>(10 + i), 1, "RUN_EXCEPTION", "w", 1000 + i, 1, 1));
  tally.add(row(20, 1, "RUN_DONE", "w", 1010, 1, 1));
  report::ReportData r;
  report::rank_failures(tally, r);
  REQUIRE(r.by_status.size() == 2);
  CHECK(r.by_status[0] == std::pair<std::string, std::uint64_t>{"RUN_EXCEPTION", 5});
  CHECK(r.by_status[1] == std::pair<std::string, std::uint64_t>{"RUN_TIMEOUT", 3});
  REQUIRE(r.failures.size() == 2);
  CHECK(r.failures[0].status == "RUN_EXCEPTION");
  CHECK(r.failures[0].count == 5);
  REQUIRE(r.failures[0].first.size() == 2);                           // messages_per_failure
  CHECK(r.failures[0].first[0] == "mini-batch 10 try 1 on w: boom");  // the first line only
}

TEST_CASE("report.report_figures.pool_totals_fall_back_to_the_processes_seen") {
  Job j({row(1, 1, "RUN_DONE", "w0", 1000, 1, 1), row(2, 1, "RUN_DONE", "w1", 1000, 2, 1),
         row(3, 1, "RUN_DONE", "w0", 1001, 1, 1, 2)});
  report::order_workers(j.tally, j.r);
  std::map<std::uint64_t, store::PoolRow> rows{{1, {.state = "gone", .workers = 0, .prefetch = 4}}};
  const auto pools = report::pool_totals(j.r.workers, rows);
  REQUIRE(pools.size() == 2);
  CHECK(pools[0].state == "gone");
  CHECK(pools[0].workers == 2);  // not recorded: the processes seen
  CHECK(pools[0].prefetch == 4);
  CHECK(pools[0].attempts == 2);
  CHECK(pools[0].elapsed_s == doctest::Approx(3));
  CHECK(pools[0].last_end == doctest::Approx(1002));
  CHECK(pools[1].state.empty());  // no row in the store
  CHECK(pools[1].workers == 1);
}

TEST_CASE("report.report_figures.points_beyond_a_chunk_read_back_in_order_with_equal_figures") {
  // More points than PointLog keeps in memory: the figures made from those read back from its
  // temporary file equal the ones made from the same points kept in memory.
  const std::size_t n = 2 * report::PointLog::kChunk + 123;
  std::vector<store::AttemptRow> rows;
  for (std::size_t i = 0; i < n; ++i) {
    const double elapsed = 0.001 * static_cast<double>((i * 7919) % 1000 + 1);
    rows.push_back(row(i + 1, 1, i % 97 == 0 ? "RUN_EXCEPTION" : "RUN_DONE",
                       i % 3 == 0 ? "w2" : (i % 3 == 1 ? "w0" : "w1"),
                       1000 + 0.01 * static_cast<double>(i), elapsed, elapsed / 2));
  }
  Job j(rows, n);
  j.r.ended = 1000 + 0.01 * static_cast<double>(n) + 1;
  report::order_workers(j.tally, j.r);
  const auto points = j.tally.points.to_vector();
  REQUIRE(points.size() == n);
  for (std::size_t i = 0; i < n; i += 1001) {
    CAPTURE(i);
    CHECK(points[i].minibatch == i + 1);
    CHECK(points[i].start == doctest::Approx(1000 + 0.01 * static_cast<double>(i)));
    CHECK(j.r.workers[points[i].worker].process ==
          (i % 3 == 0 ? "w2" : (i % 3 == 1 ? "w0" : "w1")));
  }
  // The median of the times, as nth_element over them all finds it.
  std::vector<float> e;
  for (const auto& p : points) e.push_back(p.elapsed);
  std::nth_element(e.begin(), e.begin() + static_cast<std::ptrdiff_t>(e.size() / 2), e.end());
  CHECK(report::median_elapsed(j.tally.points) == static_cast<double>(e[e.size() / 2]));
  report::fill_series_bins(j.tally.points, 10, 0, j.r);
  CHECK(sum(j.r.bins, &report::ReportData::Bin::started) == n);
  report::ReportData::Histogram run, over;
  report::fill_histograms(j.tally.points, 10, run, over);
  CHECK(run.n == n - (n + 96) / 97);
  CHECK(std::accumulate(run.counts.begin(), run.counts.end(), std::uint64_t{0}) == run.n);
}
