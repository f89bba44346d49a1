// For the test cases that need a failure-injection hook of the programs (util/test_hooks.hpp):
// in a build configured without -Dtest_hooks=true the programs ignore the hook, so such a case
// cannot check anything and skips instead (meson counts exit status 77 as SKIP).
#pragma once

#include <cstdio>
#include <cstdlib>

#include "fanout/util/test_hooks.hpp"

namespace fanout::test {

// Exits 77 with a SKIP line when the programs were built without the test hooks.
inline void require_test_hooks_or_skip() {
  if (!test_hooks::kEnabled) {
    std::fprintf(stderr, "SKIP: built without -Dtest_hooks=true\n");
    std::exit(77);
  }
}

}  // namespace fanout::test
