// The pool's wall clock. Every Unix time the pool reads comes from local_unix_now(): the system
// clock, plus FANOUT_TEST_CLOCK_OFFSET_S seconds when that variable is set in a test build
// (-Dtest_hooks=true: a network namespace cannot change the clock, so the many-host tests skew a
// pool's clock this way). The
// times a pool reports are corrected by clock_correction() measured at each registration, so a
// pool whose clock is off reports times on the interchange's clock. Durations and deadlines never
// use this clock: they come from the steady clock where the task runs. See docs/scaling.md.
#pragma once

#include <optional>
#include <string>

namespace fanout::pool {

// The system clock plus the test offset, in Unix seconds.
[[nodiscard]] double local_unix_now() noexcept;

// Parses FANOUT_TEST_CLOCK_OFFSET_S's value (seconds, may be negative or fractional). nullopt
// for text that is not a finite number within a day, `error` says why.
[[nodiscard]] std::optional<double> parse_clock_offset(const std::string& text, std::string& error);
// Sets the offset local_unix_now() adds. Call once at start, before any clock is read.
void set_test_clock_offset(double seconds) noexcept;

// What to add to our wall times to get the interchange's: its time in a Registered frame minus
// ours when it arrived (the reply comes straight back, so the error is one network latency).
// 0 when the interchange sent no time (ix_unix <= 0).
[[nodiscard]] double clock_correction(double ix_unix, double local_unix) noexcept;

}  // namespace fanout::pool
