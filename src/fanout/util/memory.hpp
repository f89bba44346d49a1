// The C library's memory settings for fanout's own long-running processes.
#pragma once

namespace fanout {

// The interchange, the pools and the client allocate and free buffers of up to megabytes at a
// high rate (frames, decoded mini-batches, rows). glibc's defaults give freed memory back to
// the kernel early (the heap's top beyond 128 KiB free, blocks above an adaptive mmap threshold,
// the threads' arenas as they empty) and then fault it in again: a system call and page faults
// each time, which on virtual machines where a system call costs microseconds was a tenth of
// the interchange's CPU per mini-batch (docs/performance.md). This keeps up to 64 MiB free per
// heap, grows the main heap 16 MiB at a time, and serves blocks under 32 MiB from the heap.
// The peak memory is unchanged: the memory kept is what was in use before. Does nothing when
// the user set glibc's malloc tunables (GLIBC_TUNABLES with glibc.malloc, or a MALLOC_*_
// variable): theirs stand. Call it first thing in main(); it applies to this process only, not
// to the processes it starts.
void keep_freed_memory() noexcept;

// True when `env` (an environ-style list) sets glibc's malloc tunables.
[[nodiscard]] bool malloc_tunables_set(const char* const* env) noexcept;

}  // namespace fanout
