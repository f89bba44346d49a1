// Error names and the assertion handler.
#include "fanout/util/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace fanout {

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::Ok:
      return "ok";
    case ErrorCode::InvalidArgument:
      return "invalid_argument";
    case ErrorCode::NotFound:
      return "not_found";
    case ErrorCode::Io:
      return "io";
    case ErrorCode::Protocol:
      return "protocol";
    case ErrorCode::Version:
      return "version";
    case ErrorCode::Database:
      return "database";
    case ErrorCode::Runtime:
      return "runtime";
    case ErrorCode::State:
      return "state";
  }
  return "unknown";
}

void assert_fail(const char* expr, const char* file, int line) noexcept {
  std::fprintf(stderr, "fanout: assertion failed: %s (%s:%d)\n", expr, file, line);
  std::abort();
}

}  // namespace fanout
