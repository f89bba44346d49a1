// Private to config/: parsing a parallel job from a YAML node already loaded (a pipeline's inline
// step, or a component file with its bindings filled in). yaml-cpp stays in config/*.cpp: only
// its Node type is named here.
#pragma once

#include <string>

#include "fanout/config/job_spec.hpp"

namespace YAML {
class Node;
}

namespace fanout::config::detail {

// Like parse_job(), from `root`. `file` names the file in messages (lines come from the node's
// marks); relative paths resolve against the folder of `spec_path`. With check_files false the
// input, code and entry-script paths are not checked (a pipeline step whose input an earlier
// step makes).
[[nodiscard]] Expected<JobConfig> parse_job_node(const YAML::Node& root, const std::string& file,
                                                 const std::string& spec_path, bool check_files);

}  // namespace fanout::config::detail
