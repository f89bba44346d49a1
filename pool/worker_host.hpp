// The C++ side of a worker process (`fanout-worker`): the command and native runtimes, and the
// loop that serves them over the worker pipe (pool/worker_pipe.hpp, docs/worker-pipe.md; fds 3
// and 4), the same frames the Python shim speaks. Single-threaded; one Runtime per process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/util/expected.hpp"
#include "pool/worker_pipe.hpp"

namespace fanout::worker {

// One mini-batch, decoded from a T frame. The views point into the frame buffer and live only
// during Runtime::run().
struct Batch {
  std::uint64_t task_id = 0;
  std::uint64_t index = 0;
  std::string_view detail{};
  std::vector<const char*> items{};  // NUL-terminated
};

// What run() produced, as a D frame carries it.
struct Outcome {
  pipe::DoneStatus status = pipe::DoneStatus::Ok;  // Raised: error is "<Category>: <message>..."
  std::uint64_t n_result = 0;
  std::string output{};  // rows, each ending in '\n' (empty in summary_only mode)
  std::string error{};
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  // Loads what the runtime hosts. On failure the Error's message is the L frame's text
  // ("<Category>: <message>"), and the worker exits 3.
  [[nodiscard]] virtual Expected<void> init() = 0;
  // Runs one mini-batch; `out` is reset by the caller. Never throws.
  virtual void run(const Batch& batch, Outcome& out) = 0;
  virtual void shutdown() = 0;
  // For the R frame, e.g. "native builtin:noop".
  [[nodiscard]] virtual std::string describe() const = 0;
};

struct RuntimeOptions {
  std::string kind{};               // "command" | "native"
  std::string target{};             // the command line, or the library path / "builtin:<name>"
  std::vector<std::string> args{};  // the job's user arguments
  bool append_row = true;           // false: summary_only, no rows are kept
  // command: a mini-batch that exits 0 succeeds for all its items, whatever it prints (GNU
  // parallel's rule; FANOUT_COMMAND_ITEMS=exit_status). Else each stdout line is one result.
  bool items_by_exit_status = false;
};

// Error{InvalidArgument} for an unknown kind.
[[nodiscard]] Expected<std::unique_ptr<Runtime>> make_runtime(const RuntimeOptions& opts);

// True for the built-in native libraries (`builtin:noop`).
[[nodiscard]] bool is_builtin_library(std::string_view target);

// Serves `rt` on the pipe: sends R (or L and returns 3), answers each T with one D, stops on Q
// or EOF (calling shutdown(), returning 0). Returns 5 on a malformed frame (reason on stderr).
int serve(Runtime& rt, int in_fd, int out_fd);

}  // namespace fanout::worker
