// Tests for report::read_report_data (src/fanout/report/report_data.hpp): the figures behind
// report.html, compare and tune, read from constructed histories. The time-binned path taken for
// jobs of many attempts must agree with the per-attempt path.
#include "fanout/report/report_data.hpp"

#include <doctest/doctest.h>

#include <numeric>
#include <string>

#include "fanout/store/db.hpp"
#include "fanout/util/error.hpp"

#include "report_history.hpp"
#include "scratch_dir.hpp"

namespace report = fanout::report;
namespace store = fanout::store;
using fanout::test::uniform;
using fanout::test::write_store;

namespace {

const std::string kSettings = R"({"mini_batch_size":"10","prefetch":0,"max_retries":3})";

std::uint64_t started(const report::ReportData& d) {
  std::uint64_t n = 0;
  for (const auto& b : d.bins) n += b.started;
  return n;
}

}  // namespace

TEST_CASE("report.report_data.reads_workers_series_and_histograms") {
  fanout::test::ScratchDir dir("queries");
  const auto path = write_store(dir, uniform(3, 20, kSettings, {.run_s = 0.01, .gap_s = 0.002}));
  auto d = report::read_report_data(path, 1);
  REQUIRE(d);
  CHECK(d->state == "succeeded");
  CHECK(d->total == 60);
  CHECK(d->worker_attempts == 60);
  REQUIRE(d->workers.size() == 3);
  CHECK(d->workers[0].attempts == 20);
  REQUIRE(d->pools.size() == 1);
  CHECK(d->pools[0].workers == 3);
  CHECK(d->setting("mini_batch_size") == "10");
  CHECK_FALSE(d->timeline_binned);
  CHECK(d->segments.size() == 60);
  CHECK(started(*d) == 60);
  std::uint64_t ended = 0;
  for (const auto& b : d->bins) ended += b.succeeded;
  CHECK(ended == 60);
  CHECK(d->bins.back().queued == 0);  // everything finished by the end
  CHECK(d->run_hist.n == 60);
  CHECK(std::accumulate(d->run_hist.counts.begin(), d->run_hist.counts.end(), 0ULL) == 60);
  CHECK(d->run_hist.mean == doctest::Approx(0.01));
}

TEST_CASE("report.report_data.binned_path_agrees_with_per_attempt_path") {
  fanout::test::ScratchDir dir("queries");
  const auto path = write_store(dir, uniform(4, 30, kSettings, {.run_s = 0.01, .gap_s = 0.003}));
  auto exact = report::read_report_data(path, 1);
  auto binned =
      report::read_report_data(path, 1, {.max_timeline_attempts = 10, .max_timeline_segments = 50});
  REQUIRE(exact);
  REQUIRE(binned);
  CHECK(binned->timeline_binned);
  CHECK(binned->segments.size() <= 50 + 4);  // merged down to the limit (one spill per worker)
  CHECK_FALSE(binned->segments.empty());
  REQUIRE(binned->workers.size() == exact->workers.size());
  for (std::size_t i = 0; i < exact->workers.size(); ++i) {
    CHECK(binned->workers[i].attempts == exact->workers[i].attempts);
    CHECK(binned->workers[i].first_start == doctest::Approx(exact->workers[i].first_start));
    CHECK(binned->workers[i].last_end == doctest::Approx(exact->workers[i].last_end));
    CHECK(binned->workers[i].run_s == doctest::Approx(exact->workers[i].run_s));
  }
  CHECK(started(*binned) == 120);
  CHECK(binned->run_hist.n == exact->run_hist.n);
  CHECK(binned->run_hist.mean == doctest::Approx(exact->run_hist.mean));
  CHECK(binned->overhead_hist.max == doctest::Approx(exact->overhead_hist.max));
  CHECK(binned->run_hist.counts == exact->run_hist.counts);
  CHECK(binned->run_cpu_s == doctest::Approx(exact->run_cpu_s));
  std::uint64_t ended = 0;
  for (const auto& b : binned->bins) ended += b.ended;
  CHECK(ended == 120);
  std::uint64_t in_bars = 0;
  for (const auto& s : binned->segments) {
    in_bars += s.attempts;
    CHECK(s.t_end >= s.t_start);
    CHECK(s.t_end - s.t_start <= binned->timeline_bin_s * (1 + 1e-9));
  }
  CHECK(in_bars == 120);
}

TEST_CASE("report.report_data.missing_job_and_store") {
  fanout::test::ScratchDir dir("queries");
  auto none = report::read_report_data(dir.path() + "/nothing.db", 1);
  REQUIRE_FALSE(none);
  CHECK(none.error().code == fanout::ErrorCode::NotFound);
  const auto path = write_store(dir, uniform(1, 2, kSettings, {}));
  auto missing = report::read_report_data(path, 99);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == fanout::ErrorCode::NotFound);
  CHECK(missing.error().message.find("no job 99") != std::string::npos);
}

TEST_CASE("report.report_data.counts_of_a_clean_job_agree_with_the_mini_batch_scan") {
  // A succeeded job whose attempts all succeeded, one per mini-batch, takes its counts from
  // the pass; any other job from a scan of its mini-batches. Both must say the same.
  fanout::test::ScratchDir dir("queries");
  const auto path = write_store(dir, uniform(2, 30, kSettings, {}));
  auto clean = report::read_report_data(path, 1);
  REQUIRE(clean);
  CHECK(clean->total == 60);
  CHECK(clean->submitted == 60);
  CHECK(clean->succeeded == 60);
  CHECK(clean->failed == 0);
  CHECK(clean->pending == 0);
  CHECK(clean->items_succeeded == 600);
  CHECK(clean->items_failed == 0);
  {
    // One more attempt, a failed one: the scan's counts, which must be the same.
    fanout::store::Db db(path, fanout::store::Db::Mode::ReadWriteCreate);
    db.exec(
        "INSERT INTO attempts (job_id, minibatch_id, attempt, status, start, elapsed_s) "
        "VALUES (1, 0, 2, 'POOL_LOST', 1000, 0)");
  }
  auto scanned = report::read_report_data(path, 1);
  REQUIRE(scanned);
  CHECK(scanned->attempts_failed == 1);
  CHECK(scanned->total == clean->total);
  CHECK(scanned->submitted == clean->submitted);
  CHECK(scanned->succeeded == clean->succeeded);
  CHECK(scanned->items_succeeded == clean->items_succeeded);
  CHECK(scanned->items_failed == clean->items_failed);
}

TEST_CASE("report.report_data.retry_policy_is_the_one_of_the_job_settings") {
  // Mini-batch 0's only attempt failed. Whether that finished it is the job's retry policy as
  // store::JobSettings reads jobs.settings (so `fanout resume` would run it): max_retries 0
  // finishes it; settings without max_retries as a number get JobSettings' default, 3.
  auto finished = [](const std::string& settings) {
    fanout::test::ScratchDir dir("report-data");
    const auto path = write_store(dir, uniform(1, 3, settings, {}));
    {
      fanout::store::Db db(path, fanout::store::Db::Mode::ReadWriteCreate);
      db.exec("UPDATE attempts SET status = 'RUN_EXCEPTION' WHERE minibatch_id = 0");
      db.exec("UPDATE minibatches SET state = 'failed' WHERE id = 0");
    }
    auto d = report::read_report_data(path, 1);
    REQUIRE(d);
    std::uint64_t n = 0;
    for (const auto& b : d->bins) n += b.finished;
    return n;
  };
  CHECK(finished(R"({"max_retries":0})") == 3);
  CHECK(finished(R"({"max_retries":2})") == 2);
  CHECK(finished(R"({"max_retries":"0"})") == 2);  // text, not a number: JobSettings ignores it
  CHECK(finished("{}") == 2);
  CHECK(finished("not json") == 2);
}
