// See memory.hpp.
#include "fanout/util/memory.hpp"

#include <malloc.h>

#include <cstring>

extern char** environ;

namespace fanout {

bool malloc_tunables_set(const char* const* env) noexcept {
  for (const char* const* e = env; e != nullptr && *e != nullptr; ++e) {
    const char* v = *e;
    if (std::strncmp(v, "GLIBC_TUNABLES=", 15) == 0 && std::strstr(v, "glibc.malloc") != nullptr) {
      return true;
    }
    // MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_, MALLOC_MMAP_THRESHOLD_, MALLOC_ARENA_MAX, ...
    if (std::strncmp(v, "MALLOC_", 7) == 0) return true;
  }
  return false;
}

void keep_freed_memory() noexcept {
  if (malloc_tunables_set(environ)) return;
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 64 << 20);
  ::mallopt(M_TOP_PAD, 16 << 20);
}

}  // namespace fanout
