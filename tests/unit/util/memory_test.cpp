// Tests for fanout::keep_freed_memory (src/fanout/util/memory.hpp): freed memory stays in the
// process, and a user's own malloc tunables are left alone.
#include "fanout/util/memory.hpp"

#include <doctest/doctest.h>
#include <malloc.h>
#include <stdlib.h>

#include <cstring>

TEST_CASE("util.memory.a_users_malloc_tunables_are_left_alone") {
  const char* none[] = {"PATH=/usr/bin", "HOME=/root", "GLIBC_TUNABLES=glibc.rtld.nns=2", nullptr};
  CHECK_FALSE(fanout::malloc_tunables_set(none));
  const char* tunables[] = {"PATH=/usr/bin", "GLIBC_TUNABLES=glibc.malloc.trim_threshold=0",
                            nullptr};
  CHECK(fanout::malloc_tunables_set(tunables));
  const char* variable[] = {"MALLOC_ARENA_MAX=2", nullptr};
  CHECK(fanout::malloc_tunables_set(variable));
  const char* perturb[] = {"HOME=/", "MALLOC_PERTURB_=165", nullptr};  // as meson test sets
  CHECK(fanout::malloc_tunables_set(perturb));
  CHECK_FALSE(fanout::malloc_tunables_set(nullptr));
}

TEST_CASE("util.memory.a_freed_block_of_megabytes_stays_in_the_heap") {
  // meson test sets MALLOC_PERTURB_, which would (rightly) leave the defaults in place.
  ::unsetenv("MALLOC_PERTURB_");
  ::unsetenv("MALLOC_CHECK_");
  extern char** environ;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "MALLOC_", 7) == 0 || std::strncmp(*e, "GLIBC_TUNABLES=", 15) == 0) {
      MESSAGE("skipped: the environment sets ", *e);
      return;
    }
  }
  fanout::keep_freed_memory();
  // With glibc's defaults an 8 MiB block is mapped on its own and unmapped when freed; now it
  // comes from the heap and, once freed, stays there (the heap's free top, mallinfo's keepcost).
  constexpr std::size_t kBlock = 8u << 20;
  char* p = static_cast<char*>(std::malloc(kBlock));
  REQUIRE(p != nullptr);
  std::memset(p, 1, kBlock);
  const struct mallinfo2 in_use = ::mallinfo2();
  CHECK(in_use.hblkhd < kBlock);  // not a separate mapping
  std::free(p);
  const struct mallinfo2 after = ::mallinfo2();
  CHECK(after.keepcost >= kBlock);
}
