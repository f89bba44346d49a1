// The pool's wall clock (pool/wall_clock.hpp): the test-only offset and the correction measured
// at registration, so that a pool on a host with a skewed clock records true times.
#include "pool/wall_clock.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "fanout/util/clock.hpp"

using namespace fanout::pool;

TEST_CASE("pool.wall_clock.offset_parses_signed_seconds_and_refuses_the_rest") {
  std::string why;
  CHECK(parse_clock_offset("600", why) == 600.0);
  CHECK(parse_clock_offset("-600", why) == -600.0);
  CHECK(parse_clock_offset("1.5", why) == 1.5);
  for (const char* bad : {"", "ten", "10s", "nan", "inf", "100000"}) {
    why.clear();
    CHECK_FALSE(parse_clock_offset(bad, why).has_value());
    CHECK_FALSE(why.empty());
  }
}

TEST_CASE("pool.wall_clock.offset_shifts_the_clock_and_the_correction_undoes_it") {
  set_test_clock_offset(-600);
  const double ix = fanout::unix_now();  // the interchange, on the right clock
  const double local = local_unix_now();
  CHECK(std::fabs(local - (ix - 600)) < 5);
  const double corr = clock_correction(ix, local);
  CHECK(std::fabs(corr - 600) < 5);
  // A start read later on the skewed clock lands, corrected, on the interchange's clock.
  const double start = local_unix_now();
  CHECK(std::fabs(start + corr - fanout::unix_now()) < 5);
  set_test_clock_offset(0);
  CHECK(std::fabs(local_unix_now() - fanout::unix_now()) < 5);
  // An interchange that sends no time: no correction.
  CHECK(clock_correction(0, local) == 0);
}
