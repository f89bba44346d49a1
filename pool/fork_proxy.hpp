// The worker side of fanout.worker_start: fork (docs/resources.md). fanout-pool starts a Python
// worker as `fanout-worker fork-via NAME -- <the shim's command line>`: this proxy, the pool's own
// child in its own process group, asks the job's fork server (pool/python/fanout_worker.py,
// listening on the abstract unix socket NAME) to fork a worker that takes over its fds 0-4,
// process group, folder, CPUs and environment, then exits as that worker exits. When the server
// cannot be reached it runs the shim's command line itself (plain spawning).
#pragma once

namespace fanout::pool {

// argv: {"fanout-worker", "fork-via", NAME, "--", program, args...}. Returns only on a usage
// error or when the fallback cannot be exec'd (an exit code); otherwise exits or execs.
int run_fork_proxy(int argc, char** argv);

}  // namespace fanout::pool
