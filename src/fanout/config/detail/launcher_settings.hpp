// Private to config/: the launcher keys of the `fanout:` block (`launcher: slurm` and Parsl's
// SlurmProvider options). See docs/cluster.md and docs/job-spec.md#fanout.
#pragma once

#include <string_view>

#include "fanout/config/detail/located_yaml.hpp"
#include "fanout/config/job_spec.hpp"

namespace fanout::config::detail {

// Reads the launcher keys of the `fanout:` block `f` (already checked for unknown keys;
// fanout_settings.cpp lists them). Fails at the key's line on a launcher other than local/slurm, a
// walltime Slurm would not read, a scheduler_options line that is not an #SBATCH line, min_nodes >
// nodes or nodes > max_nodes.
[[nodiscard]] LauncherSettings read_launcher_settings(const YamlReader& r, const Fields& f);

// Whether `s` is a time limit Slurm reads: "M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S".
[[nodiscard]] bool is_slurm_time(std::string_view s);

}  // namespace fanout::config::detail
