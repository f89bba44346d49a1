/* The C ABI of fanout's native runtime (task.type: native). A job's `library:` is a shared
 * library exporting the functions below; `fanout-worker` loads it with dlopen() once per worker
 * process and calls them. Plain C, so a library can be written in C, C++, Rust, Zig ...
 * See docs/job-spec.md#native and docs/examples/native-upper/.
 *
 * Lifecycle, in one worker process (one thread calls everything):
 *   fanout_init(argc, argv)   once; argv[0] is the library path, then the job's user arguments
 *   fanout_run(batch, ...)    once per mini-batch
 *   fanout_shutdown()         once, when the worker stops normally (optional)
 *
 * A worker that crashes or overruns the job's timeout fails only its current attempt: the pool
 * starts a new worker, which calls fanout_init() again.
 */
#ifndef FANOUT_NATIVE_H
#define FANOUT_NATIVE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. A library may export fanout_abi_version() returning it; a
 * library that exports another value is refused at load (LOAD_EXCEPTION). */
#define FANOUT_NATIVE_ABI_VERSION 1

/* One mini-batch. Every pointer is valid only during the fanout_run() call. */
typedef struct fanout_batch {
  uint64_t minibatch_index; /* the mini-batch's position in the input */
  const char* const* items; /* n_items NUL-terminated strings (file paths) */
  size_t n_items;
  const char* detail; /* the mini-batch detail (JSON), NUL-terminated; "" when none */
} fanout_batch;

/* Appends one result row (len bytes, without its newline; fanout adds one). Returns 0, or -1
 * once the rows of this mini-batch exceed what a reply can hold: the library should stop. */
typedef int (*fanout_emit_fn)(void* emit_ctx, const char* row, size_t len);

/* Required. Called once before the first mini-batch. Returns 0 on success; any other value fails
 * the worker's start (LOAD_EXCEPTION, with fanout_last_error() as the message). */
int fanout_init(int argc, const char* const* argv);

/* Required. Processes one mini-batch. Returns the length of its result, like len(run()) in the
 * Python runtime: succeeded items = min(result, n_items), the rest failed. The rows emitted are
 * the append_row output; a result may be longer than the rows emitted (a library that keeps no
 * rows, like builtin:noop, returns n_items and emits nothing). A negative return fails the
 * attempt (RUN_EXCEPTION, with fanout_last_error() as the message); rows emitted before are
 * dropped. */
int64_t fanout_run(const fanout_batch* batch, fanout_emit_fn emit, void* emit_ctx);

/* Optional. Called once when the worker stops normally. */
void fanout_shutdown(void);

/* Optional. A message for the last failure of fanout_init() or fanout_run(), NUL-terminated,
 * owned by the library; its first line should read "<Category>: <message>". */
const char* fanout_last_error(void);

/* Optional. Returns FANOUT_NATIVE_ABI_VERSION. */
uint32_t fanout_abi_version(void);

#ifdef __cplusplus
}
#endif

#endif /* FANOUT_NATIVE_H */
