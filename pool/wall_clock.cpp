// The pool's wall clock. See wall_clock.hpp.
#include "pool/wall_clock.hpp"

#include <charconv>
#include <cmath>

#include "fanout/util/clock.hpp"

namespace fanout::pool {

namespace {
double g_offset_s = 0;  // set once at start, before any other thread exists
}  // namespace

double local_unix_now() noexcept { return unix_now() + g_offset_s; }

std::optional<double> parse_clock_offset(const std::string& text, std::string& error) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end || !std::isfinite(v)) {
    error = "'" + text + "' is not a number of seconds";
    return std::nullopt;
  }
  if (std::fabs(v) > 86400) {
    error = "'" + text + "' is more than a day";
    return std::nullopt;
  }
  return v;
}

void set_test_clock_offset(double seconds) noexcept { g_offset_s = seconds; }

double clock_correction(double ix_unix, double local_unix) noexcept {
  return ix_unix > 0 ? ix_unix - local_unix : 0;
}

}  // namespace fanout::pool
