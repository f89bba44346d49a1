// The exit statuses of the three programs, their one definition: what a shell, a scheduler or
// the client that started an interchange reads from them. README.md ("Exit status") lists them.
#pragma once

namespace fanout::proto {

// Every program.
inline constexpr int kExitOk = 0;     // done; also --help and --version
inline constexpr int kExitUsage = 2;  // bad command line or input; nothing was started

// `fanout` (the client): the job's outcome, or why it could not run.
inline constexpr int kExitFailed = 1;   // the job failed (a threshold, a timeout) or cancelled
inline constexpr int kExitInfra = 3;    // the interchange, the pools or the store failed us
inline constexpr int kExitPartial = 4;  // every mini-batch finished, some failed (in limits)
// `fanout cancel`: the job had already ended, nothing was cancelled.
inline constexpr int kExitNotCancelled = 1;

// `fanout-interchange` and `fanout-pool`.
inline constexpr int kExitRuntime = 1;  // the environment failed it (bind, store, a fatal error)
// `fanout-interchange` only: the store is owned by another live interchange. The embedded
// client that started it then sends its job to that owner.
inline constexpr int kExitStoreOwned = 4;

}  // namespace fanout::proto
