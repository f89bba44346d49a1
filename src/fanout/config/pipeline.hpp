// Azure ML pipeline job files (type: pipeline): the jobs, their wiring and the order to run them
// in, with every path made local. See docs/job-spec.md#pipelines.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fanout/config/job_spec.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::config {

// A value bound to a step's input: a path (with its type) or a literal.
struct BoundValue {
  std::string type{};   // uri_folder, uri_file, mltable, ... or "literal"
  std::string value{};  // absolute path, or the literal's text
};

// One job of a pipeline, ready to run.
struct PipelineStep {
  std::string name{};  // key under `jobs:`
  std::string type{};  // "command" | "parallel"
  std::string file{};  // the file holding its definition (the pipeline, or its component)
  int line = 0;        // where the job is written in the pipeline file
  std::vector<std::string> after{};  // jobs it depends on (through ${{parent.jobs.*}})
  std::map<std::string, BoundValue> inputs{};
  std::map<std::string, BoundValue> outputs{};  // always with a path

  // type: command
  std::string command{};  // ${{inputs.x}} / ${{outputs.x}} already substituted
  std::string cwd{};      // its code folder, else the folder of its file
  std::map<std::string, std::string> environment_variables{};

  // type: parallel: the job, parsed without checking the paths an earlier step makes; call
  // check_step_files() when its turn comes.
  JobConfig job{};
};

struct Pipeline {
  std::string spec_path{};  // absolute
  std::string name{};
  std::string run_dir{};
  std::vector<PipelineStep> steps{};  // in an order that respects dependencies (file order
                                      // where free)
  std::map<std::string, BoundValue> outputs{};  // pipeline outputs, with paths
  std::vector<std::string> notices{};           // ignored compute/environment, azureml:// maps
};

// The `type:` of a job file ("parallel", "pipeline", "command" ...), "deployment" for a batch
// deployment (endpoint_name at the top, whatever its type), or "" when it has none.
// Error when the file cannot be read or is not YAML.
[[nodiscard]] Expected<std::string> job_file_type(const std::string& path);

// Reads a pipeline file. Outputs without a path, and azureml:// output paths, get folders under
// `run_dir` (<run_dir>/<job>/<output>). Errors name the file (pipeline or component), the line
// and the key: unknown jobs or outputs in ${{parent.jobs...}}, cycles, unknown inputs, bad steps.
[[nodiscard]] Expected<Pipeline> load_pipeline(const std::string& path, const std::string& run_dir);

// Checks, when a parallel step's turn comes, that its input, code folder and entry script exist.
// Error{NotFound} naming the step, the file and the key.
[[nodiscard]] Expected<void> check_step_files(const PipelineStep& step);

// A command step's command line run with `python` (the interpreter of --python / fanout.python):
// when its first word is `python` or `python3`, that word is replaced by `python`, quoted for
// /bin/sh; any other command, or an empty `python`, is returned unchanged.
[[nodiscard]] std::string with_interpreter(const std::string& command, const std::string& python);

}  // namespace fanout::config
