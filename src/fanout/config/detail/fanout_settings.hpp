// Private to config/: the `fanout:` block of a job file, fanout's own settings (each also a CLI
// flag). See docs/job-spec.md#fanout.
#pragma once

#include <string>

#include "fanout/config/detail/located_yaml.hpp"
#include "fanout/config/job_spec.hpp"

namespace fanout::config::detail {

// Reads the block; paths (db, run_dir, a python with a '/') resolve against `base_dir`. Keys not
// given keep FanoutSettings' defaults. Fails on unknown keys and out-of-range values.
[[nodiscard]] FanoutSettings read_fanout_settings(const YamlReader& r, const Entry& e,
                                                  const std::string& base_dir);

}  // namespace fanout::config::detail
