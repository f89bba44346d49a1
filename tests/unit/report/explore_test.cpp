// The analysis of `fanout explore` (the model fit, the measures) on constructed data, and the
// dashboard's job list showing an experiment as one row.
#include "fanout/report/explore.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "fanout/report/dashboard_pages.hpp"
#include "fanout/store/reader.hpp"

using namespace fanout::report;

namespace {

std::vector<ExploreFactor> four_factors() {
  return {{"mini_batch_size", {"1", "4", "16"}, 1},
          {"prefetch", {"0", "2"}, 0},
          {"poll_ms", {"1", "10", "50"}, 1},
          {"log_level", {"WARNING", "INFO"}, 1}};
}

// A synthetic time per item: log y = known intercept, main effects and one interaction.
double synthetic(const std::vector<ExploreFactor>& f, const Treatment& t) {
  const double a = coded_level(f[0], t[0]), b = coded_level(f[1], t[1]);
  const double c = coded_level(f[2], t[2]), d = coded_level(f[3], t[3]);
  return std::exp(-3.0 + 1.0 * a - 0.2 * b + 0.05 * c + 0.0 * d + 0.3 * a * b);
}

}  // namespace

TEST_CASE("report.explore.least_squares_recovers_known_coefficients") {
  // y = 2 - x1 + 0.5 x2 + 3 x1 x2 over a full grid: exact.
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (double a : {-1.0, 0.0, 1.0}) {
    for (double b : {-1.0, 1.0}) {
      x.push_back({1, a, b, a * b});
      y.push_back(2 - a + 0.5 * b + 3 * a * b);
    }
  }
  const auto c = least_squares(x, y);
  REQUIRE(c.size() == 4);
  CHECK(c[0] == doctest::Approx(2).epsilon(1e-6));
  CHECK(c[1] == doctest::Approx(-1).epsilon(1e-6));
  CHECK(c[2] == doctest::Approx(0.5).epsilon(1e-6));
  CHECK(c[3] == doctest::Approx(3).epsilon(1e-6));
}

TEST_CASE("report.explore.analysis_ranks_factors_and_names_the_interaction") {
  const auto f = four_factors();
  // Every treatment once (a full factorial), the base three times with a little noise.
  std::vector<ExploreRun> runs;
  for (std::size_t a = 0; a < 3; ++a) {
    for (std::size_t b = 0; b < 2; ++b) {
      for (std::size_t c = 0; c < 3; ++c) {
        for (std::size_t d = 0; d < 2; ++d) {
          const Treatment t{a, b, c, d};
          runs.push_back({.treatment = t, .seconds_per_item = synthetic(f, t)});
        }
      }
    }
  }
  const Treatment base{1, 0, 1, 1};
  for (double k : {0.99, 1.01})
    runs.push_back({.treatment = base, .seconds_per_item = k * synthetic(f, base)});
  const auto an = analyse(f, runs);
  // The model recovers the coefficients (the base's two noisy repeats move them only a little).
  REQUIRE(an.coefficients.size() == 1 + 4 + 6);
  CHECK(an.coefficients[1] == doctest::Approx(1.0).epsilon(0.02));
  CHECK(an.coefficients[2] == doctest::Approx(-0.2).epsilon(0.02));
  CHECK(std::abs(an.coefficients[4]) < 0.01);
  // mini_batch_size (index 0) ranks first, log_level (no effect) last and within noise.
  CHECK(an.effects.front().factor == 0);
  CHECK(an.effects.back().factor == 3);
  CHECK_FALSE(an.effects.back().matters);
  CHECK(an.effects.front().matters);
  // The largest interaction is mini_batch_size × prefetch, named in words.
  REQUIRE_FALSE(an.interactions.empty());
  CHECK(an.interactions.front().a == 0);
  CHECK(an.interactions.front().b == 1);
  CHECK(an.interactions.front().coefficient == doctest::Approx(0.3).epsilon(0.02));
  CHECK(an.interactions.front().words.find("when prefetch=0") != std::string::npos);
  // The best measured treatment is the true best: log y - intercept = a - 0.2b + 0.3ab +
  // 0.05c is least at a = -1, b = +1, c = -1 (mini_batch_size 1, prefetch 2, poll_ms 1).
  CHECK(an.best[0] == 0);
  CHECK(an.best[1] == 1);
  CHECK(an.best[2] == 0);
  CHECK(an.speedup.mean > 1.5);
  const auto page = explore_html("exp-1", f, runs, an, "summary");
  CHECK(page.find("chart-explore-effects") != std::string::npos);
  CHECK(page.find("\"kind\":\"explore\"") != std::string::npos);
}

TEST_CASE("report.explore.measures_per_treatment_and_per_level") {
  const std::vector<ExploreFactor> f{{"prefetch", {"0", "8"}, 0}, {"curve", {"on", "off"}, 0}};
  const Treatment base{0, 0}, pre{1, 0}, off{0, 1};
  std::vector<ExploreRun> runs{{.treatment = base,
                                .seconds_per_item = 0.10,
                                .wall_s = 10,
                                .job_id = 1,
                                .ok = true,
                                .overhead_s = 0.002,
                                .utilisation = 0.6,
                                .attempts = 10,
                                .attempts_failed = 0},
                               {.treatment = base,
                                .seconds_per_item = 0.12,
                                .wall_s = 12,
                                .job_id = 2,
                                .ok = true,
                                .overhead_s = 0.004,
                                .utilisation = 0.4,
                                .attempts = 10,
                                .attempts_failed = 0},
                               {.treatment = pre,
                                .seconds_per_item = 0.08,
                                .wall_s = 8,
                                .job_id = 3,
                                .ok = true,
                                .overhead_s = 0.001,
                                .utilisation = 0.8,
                                .attempts = 10,
                                .attempts_failed = 0},
                               {.treatment = off,
                                .seconds_per_item = 0.09,
                                .wall_s = 9,
                                .job_id = 4,
                                .ok = true,
                                .overhead_s = 0.003,
                                .utilisation = 0.7,
                                .attempts = 12,
                                .attempts_failed = 2}};
  const auto t = treatment_measures(runs);
  REQUIRE(t.size() == 3);
  CHECK(t[0].treatment == base);
  CHECK(t[0].runs == 2);
  CHECK(t[0].seconds_per_item == doctest::Approx(0.11));
  CHECK(t[0].half > 0);
  CHECK(t[0].overhead_s == doctest::Approx(0.003));
  CHECK(t[0].utilisation == doctest::Approx(0.5));
  CHECK_FALSE(t[0].has_failures);
  CHECK(t[2].failures == doctest::Approx(2.0 / 12));
  CHECK(t[2].has_failures);
  const auto l = level_measures(f, runs);
  REQUIRE(l.size() == 4);  // prefetch 0 and 8, curve on and off: the other at base
  CHECK(l[0].factor == 0);
  CHECK(l[0].level == 0);
  CHECK(l[0].runs == 2);
  CHECK(l[1].overhead_s == doctest::Approx(0.001));
  CHECK(l[3].failures == doctest::Approx(2.0 / 12));
  const auto a = analyse(f, runs);
  const auto text = explore_measures_text(f, runs);
  CHECK(text.find("overhead") != std::string::npos);
  CHECK(text.find("utilisation") != std::string::npos);
  CHECK(text.find("FAILURES: never the best") != std::string::npos);
  const auto page = explore_html("exp-2", f, runs, a, text);
  CHECK(page.find("id=\"treatments\"") != std::string::npos);
  CHECK(page.find("id=\"levels\"") != std::string::npos);
  CHECK(page.find("class=\"failures\"") != std::string::npos);
}

TEST_CASE("report.explore.a_treatment_with_failures_is_never_the_best") {
  const std::vector<ExploreFactor> f{{"prefetch", {"0", "8"}, 0}, {"poll_ms", {"1", "10"}, 1}};
  const Treatment base{0, 1}, fast_failing{1, 1}, slower{0, 0};
  std::vector<ExploreRun> runs{
      {.treatment = base, .seconds_per_item = 0.10, .attempts = 4},
      {.treatment = base, .seconds_per_item = 0.10, .attempts = 4},
      // Fastest, and ok (its failed attempt was retried), but it had a failure.
      {.treatment = fast_failing, .seconds_per_item = 0.02, .attempts = 5, .attempts_failed = 1},
      {.treatment = slower, .seconds_per_item = 0.05, .attempts = 4}};
  auto a = analyse(f, runs);
  CHECK(a.best == slower);
  for (const auto& e : a.effects) {
    if (e.factor == 0) CHECK(e.best_level == 0);  // prefetch 8 failed: not its best level
  }
  // Every other treatment failing: the base stays, never the failing one.
  runs.pop_back();
  a = analyse(f, runs);
  CHECK(a.best == base);
  // The base failing too: it stays the reference, the failing faster one is still not chosen.
  runs[0].attempts_failed = 1;
  a = analyse(f, runs);
  CHECK(a.best == base);
}

TEST_CASE("report.explore.the_dashboard_lists_an_experiment_as_one_row_that_opens_to_its_runs") {
  std::vector<fanout::store::JobSummary> jobs(4);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].id = 4 - i;
    jobs[i].name = "job" + std::to_string(4 - i);
    jobs[i].state = "succeeded";
    jobs[i].items_succeeded = 10;
  }
  jobs[0].experiment = jobs[1].experiment = jobs[3].experiment = "exp-20261128-170000";
  const auto page = dashboard_jobs_page(jobs, "", "");
  std::size_t rows = 0;
  for (auto at = page.find("<tr class=\"experiment\""); at != std::string::npos;
       at = page.find("<tr class=\"experiment\"", at + 1)) {
    ++rows;
  }
  CHECK(rows == 1);
  CHECK(page.find("exp-20261128-170000 (fanout explore): 3 runs, 30 items") != std::string::npos);
  CHECK(page.find("<a href=\"/jobs/1\">1</a>") != std::string::npos);  // opens to its runs
  CHECK(page.find("<td><a href=\"/jobs/2\">job2</a></td>") != std::string::npos);  // its own row
  CHECK(page.find("<td><a href=\"/jobs/3\">job3</a></td>") == std::string::npos);  // the runs': no
  CHECK(page.find("<td><a href=\"/jobs/4\">job4</a></td>") == std::string::npos);
  const auto json = dashboard_jobs_json(jobs);
  CHECK(json.find("\"experiment\":\"exp-20261128-170000\"") != std::string::npos);
  CHECK(json.find("\"experiment\":null") != std::string::npos);
}
