// Clock helpers.
#include "fanout/util/clock.hpp"

#include <fmt/format.h>

#include <cmath>
#include <ctime>

namespace fanout {

double unix_now() noexcept {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string iso_utc(double unix_seconds) {
  std::time_t secs = static_cast<std::time_t>(std::floor(unix_seconds));
  int millis = static_cast<int>((unix_seconds - static_cast<double>(secs)) * 1000.0);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
}

}  // namespace fanout

namespace fanout {

double thread_cpu_seconds() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace fanout
