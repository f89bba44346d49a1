// Clocks: steady for deadlines, system for timestamps shown to users.
#pragma once

#include <chrono>
#include <string>

namespace fanout {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// Seconds since the Unix epoch, with sub-second precision (for the store).
double unix_now() noexcept;

// "2026-11-22T04:34:12.123Z" for a Unix time in seconds.
std::string iso_utc(double unix_seconds);

// CPU seconds the calling thread has used (CLOCK_THREAD_CPUTIME_ID).
double thread_cpu_seconds() noexcept;

}  // namespace fanout
