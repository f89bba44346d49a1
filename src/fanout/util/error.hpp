// Error values (bad input, a peer's bytes) and the Failure exception (the environment refused).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace fanout {

enum class ErrorCode : std::uint8_t {
  Ok = 0,
  InvalidArgument,  // bad user input: CLI flag, job spec, entry script
  NotFound,         // a named file, job or record does not exist
  Io,               // the operating system refused a call
  Protocol,         // a peer sent bytes we cannot accept
  Version,          // a peer speaks another protocol version
  Database,         // SQLite reported an error
  Runtime,          // a worker runtime failed
  State,            // the operation is not valid in the current state
};

// The name of `code`, for messages ("invalid_argument").
const char* to_string(ErrorCode code) noexcept;

// A value-type error: what went wrong and where. The message names the place (file, message
// type, field), what was expected and what was found.
struct Error {
  ErrorCode code = ErrorCode::Ok;
  std::string message{};
};

// Thrown by constructors that cannot return a status (RAII over sockets, SQLite, processes).
class Failure final : public std::runtime_error {
 public:
  explicit Failure(Error err) : std::runtime_error(err.message), error_(std::move(err)) {}
  Failure(ErrorCode code, std::string message) : Failure(Error{code, std::move(message)}) {}
  [[nodiscard]] const Error& error() const noexcept { return error_; }

 private:
  Error error_;
};

// Aborts with file and line when an internal invariant is broken. Never for external input.
[[noreturn]] void assert_fail(const char* expr, const char* file, int line) noexcept;

}  // namespace fanout

#define FANOUT_ASSERT(cond) \
  ((cond) ? static_cast<void>(0) : ::fanout::assert_fail(#cond, __FILE__, __LINE__))
