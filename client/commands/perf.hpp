// `fanout perf`: pushes no-op mini-batches through the real path (client -> interchange -> pool
// -> worker -> result -> store commit) with an embedded interchange and pools, and reports the
// rate, the per-process CPU cost, and the transport ceiling measured in the same run.
// See docs/performance.md.
#pragma once

#include <cstdint>
#include <string>

#include "fanout/util/log.hpp"

namespace fanout::client {

struct PerfOptions {
  std::uint64_t tasks = 20000;   // mini-batches (ignored when seconds > 0)
  double seconds = 0;            // submit for this long instead of a fixed count
  std::string runtime = "noop";  // "noop" (native builtin:noop) | "python" (an empty run())
  std::string python = "python3";
  std::uint32_t workers = 2;
  std::uint32_t pools = 1;
  std::int64_t prefetch = -1;  // -1: 256 per pool
  std::uint32_t poll_ms = 10;
  std::string log_level = "warning";  // of the interchange and pools
  std::uint32_t sleep_ms = 0;         // each mini-batch sleeps this long
  std::uint32_t items_per_batch = 1;
  std::uint32_t window = 0;  // the interchange's client window; 0: its default
  bool json = false;
  bool sweep = false;
  bool ceiling = true;   // also run tools' ZeroMQ relay probe (fanout-zmq-relay) for the ratio
  bool baseline = true;  // python runtime: also run the multiprocessing.Pool baseline
  bool curve = false;    // also run over Curve-encrypted TCP and print its ratio to the main run
  // The measured runs' link: ipc:// in a private 0700 folder (the default, closed to other
  // local users), Curve-encrypted TCP (--encrypted), or plaintext TCP loopback (--insecure-tcp:
  // UNSAFE, any local user may submit jobs that run as this user while it runs; the link of the
  // older figures in docs/performance.md).
  bool encrypted = false;
  bool insecure_tcp = false;
  std::string keep_dir{};        // keep the temp folder here (logs, store) instead of removing it
  std::string metrics_listen{};  // the interchange serves Prometheus metrics there (its cost)
};

// Runs the benchmark (or the sweep) and prints the report on stdout. Returns an exit code: 0
// when every mini-batch succeeded and the store holds one committed attempt for each, 1 when
// the counts are wrong, 3 when the run could not be done.
int run_perf(const PerfOptions& opts, Logger log);

}  // namespace fanout::client
