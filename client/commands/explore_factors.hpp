// The factors of `fanout explore`: their default levels around the job's own settings, the user's
// levels, a treatment written into a job's configuration, and the text they are stored as. See
// docs/explore.md.
#pragma once

#include <string>
#include <vector>

#include "client/commands/explore.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/report/explore.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::client {

// Why Curve cannot be varied for this job's runs; empty when it can: only the interchange that
// explore starts itself (the local embedded default) listens as a treatment says.
std::string curve_fixed_reason(const config::JobConfig& cfg, const RunOverrides& ov);

// The factors of a new experiment: --factors (or the defaults), each with --factor's levels.
// Curve is dropped, said once, where it cannot be varied. Every level is an initial one.
Expected<std::vector<report::ExploreFactor>> make_factors(const config::JobConfig& cfg,
                                                          const ExploreOptions& opt,
                                                          const RunOverrides& ov);

// Writes a treatment's levels into a copy of the job's configuration.
Expected<void> apply_treatment(config::JobConfig& cfg,
                               const std::vector<report::ExploreFactor>& factors,
                               const report::Treatment& t);

// The factors as `experiments.factors` holds them: one line each, name, base index (and
// "/initial" levels when the walk added some), the levels, tab-separated; and back.
std::string factors_text(const std::vector<report::ExploreFactor>& factors);
std::vector<report::ExploreFactor> parse_factors(const std::string& text);

// A treatment as `experiment_runs.treatment` holds it: level indexes, space-separated.
std::string treatment_key(const report::Treatment& t);

}  // namespace fanout::client
