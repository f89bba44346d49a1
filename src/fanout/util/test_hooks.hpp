// Failure injection for the integration tests, compiled in only by a test build
// (meson -Dtest_hooks=true defines FANOUT_TEST_HOOKS). In a build without it env() is a
// compile-time nullopt, so the shipped programs hold neither the hooks' code nor their
// variable names. See docs/architecture.md, "Test hooks".
#pragma once

#include <optional>
#include <string_view>

#ifdef FANOUT_TEST_HOOKS
#include <cstdlib>
#endif

namespace fanout::test_hooks {

#ifdef FANOUT_TEST_HOOKS
inline constexpr bool kEnabled = true;

// The value of the environment variable `name` (a test hook), nullopt when it is not set. The
// view stays valid while the environment is not changed.
[[nodiscard]] inline std::optional<std::string_view> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string_view(v);
}
#else
inline constexpr bool kEnabled = false;

// Built without test hooks: always nullopt, decided while compiling (consteval), so `name` is
// never stored in the program.
[[nodiscard]] consteval std::optional<std::string_view> env(const char* /*name*/) {
  return std::nullopt;
}
#endif

}  // namespace fanout::test_hooks
