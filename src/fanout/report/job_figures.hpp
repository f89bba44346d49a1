// The derived figures of one job (rates, utilisation, overhead, idle gaps, tail) that report.html,
// `fanout compare` and `fanout tune` all show, computed once from ReportData so the three
// agree. Definitions: docs/tuning.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fanout/report/report_data.hpp"

namespace fanout::report {

struct JobFigures {
  struct PoolUse {
    std::string name{}, node{};
    std::uint64_t workers = 0;
    double run_share = 0;   // Σ run() / (workers × span): worker time inside run()
    double busy_share = 0;  // Σ attempt time / (workers × span)
  };
  double duration_s = 0;                 // job start to its end (or the snapshot)
  double span_s = 0;                     // first attempt's start to last attempt's end
  double items_per_s = 0;                // items done (succeeded + failed) over duration_s
  double minibatches_per_s = 0;          // mini-batches done over duration_s
  std::uint64_t workers = 0;             // worker processes of the pools that ran attempts
  double run_share = 0, busy_share = 0;  // overall, as in PoolUse
  std::vector<PoolUse> pools{};
  std::uint64_t measured = 0;  // successful attempts, the base of the next four
  double mean_run_s = 0;       // mean run() time
  double mean_overhead_s = 0;  // mean attempt time − run() time
  double overhead_share = 0;   // mean_overhead_s / mean_run_s (0 when run() takes no time)
  double cpu_share = 0;        // CPU seconds per wall-clock second inside an attempt
  double mean_gap_s = 0;       // mean idle time between two tasks of one worker
  std::uint64_t gaps = 0;      // how many gaps that mean is over
  double tail_s = 0;           // mean time a worker sat idle at the end (after its last task)
  double tail_share = 0;       // Σ tail / (workers seen × span)
  double cores_used = 0;       // Σ CPU seconds / span: cores kept busy on average
};

// Computes the figures. Pure: no I/O.
JobFigures job_figures(const ReportData& d);

}  // namespace fanout::report
