// The pool's walltime decisions (pool/walltime.hpp): whether a mini-batch fits in what is left
// of the allocation, the expected run() time, and the end given on the command line.
#include "pool/walltime.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace fanout::pool;

TEST_CASE("pool.walltime.fits_only_what_ends_before_the_margin") {
  struct Row {
    double now, end, margin, expected;
    bool fits;
  };
  // end 1000, margin 30: a mini-batch must end by 970.
  const Row rows[] = {
      {900, 1000, 30, 0, true},     // nothing known yet: fits while before the margin
      {970, 1000, 30, 0, true},     // exactly at the margin
      {971, 1000, 30, 0, false},    // inside the margin: nothing more starts
      {900, 1000, 30, 70, true},    // ends at 970
      {900, 1000, 30, 71, false},   // would end at 971
      {100, 1000, 30, 500, true},   // plenty left
      {600, 1000, 30, 500, false},  // the job's median does not fit
      {1001, 1000, 30, 0, false},   // past the end
      {900, 1000, 0, 100, true},    // no margin
      {900, 1000, -5, 100, true},   // a negative margin counts as none
  };
  for (const auto& r : rows) {
    CAPTURE(r.now);
    CAPTURE(r.expected);
    CHECK(fits_walltime(r.now, r.end, r.margin, r.expected) == r.fits);
  }
}

TEST_CASE("pool.walltime.running_tasks_may_run_until_the_margin") {
  CHECK(walltime_left(900, 1000, 30) == doctest::Approx(70));
  CHECK(walltime_left(970, 1000, 30) == doctest::Approx(0));
  CHECK(walltime_left(990, 1000, 30) == doctest::Approx(0));
}

TEST_CASE("pool.walltime.expected_time_is_the_median_of_the_job_kept_bounded") {
  RunTimes t;
  CHECK(t.median(1) == 0);
  CHECK(t.longest_median() == 0);
  for (double s : {5.0, 1.0, 100.0}) t.add(1, s);
  CHECK(t.median(1) == doctest::Approx(5));  // one slow outlier does not move it
  t.add(1, 7.0);
  CHECK(t.median(1) == doctest::Approx(6));  // even count: the middle two's mean
  t.add(2, 20.0);
  CHECK(t.longest_median() == doctest::Approx(20));
  t.forget(2);
  CHECK(t.longest_median() == doctest::Approx(6));
  for (int i = 0; i < 1000; ++i) t.add(3, 2.0);
  for (int i = 0; i < static_cast<int>(RunTimes::kKept); ++i) t.add(3, 9.0);
  CHECK(t.median(3) == doctest::Approx(9));  // only the last kKept count
}

TEST_CASE("pool.walltime.end_parses_unix_seconds_and_refuses_the_rest") {
  std::string why;
  CHECK(parse_walltime_end("1764140000", why) == 1764140000.0);
  CHECK(parse_walltime_end("1764140000.5", why) == 1764140000.5);
  for (const char* bad : {"", "0", "-5", "soon", "12s", "inf", "nan"}) {
    why.clear();
    CHECK_FALSE(parse_walltime_end(bad, why).has_value());
    CHECK(why.find(std::string("'") + bad + "'") != std::string::npos);
  }
}

TEST_CASE("pool.walltime.the_earlier_of_flag_and_slurm_end_wins") {
  using O = std::optional<double>;
  struct Row {
    O flag, env, want;
  };
  for (const Row& r : {Row{O{}, O{}, O{}}, Row{O{1000}, O{}, O{1000}}, Row{O{}, O{900}, O{900}},
                       Row{O{1000}, O{990}, O{990}}, Row{O{980}, O{990}, O{980}}}) {
    CHECK(earlier_end(r.flag, r.env) == r.want);
  }
}
