// `fanout explore JOB_FILE`: runs the job on a reproducible sample of its input under a designed
// set of treatments (each a real job in the store, tagged with one experiment id), analyses the
// measured time per item and reports the best configuration. The design and the analysis are in
// src/fanout/report/explore.hpp; this runs the treatments. See docs/explore.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "client/launch/run_settings.hpp"
#include "fanout/util/log.hpp"

namespace fanout::client {

struct ExploreOptions {
  std::string job_file{};
  double budget_s = 600;                     // the experiment's wall-clock budget
  std::string sample{};                      // "N" files/rows or "P%"; empty: 10%
  std::string factors{};                     // comma-separated names; empty: the defaults
  std::vector<std::string> factor_levels{};  // NAME=L1,L2,... (repeatable)
  std::string write{};                       // the winning settings' YAML
  std::string resume{};                      // an experiment id to continue
  std::size_t repeats = 3;  // runs of each level (beside the base) before a verdict, at least 2
  std::uint64_t seed = 0;   // the rounds' shuffle; 0: from the experiment's id
  bool verbose = false;     // each run's own progress and summary too (else one line per run)
};

// Runs or resumes the experiment. Returns the exit code: 0 analysed (budget reached included),
// 2 bad options or job file, 1 no run succeeded, 3 the store could not be written.
int run_explore(const ExploreOptions& opt, const RunOverrides& ov, const Logger& log);

}  // namespace fanout::client
