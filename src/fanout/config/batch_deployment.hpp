// Azure ML batch deployment files (batchDeployment.schema.json): the same init()/run() scoring
// scripts as a parallel job, configured by the deployment and run by `fanout run deployment.yml
// --input DIR_OR_FILE [--output DIR]` as a parallel job. See docs/job-spec.md#batch-deployments.
#pragma once

#include <string>

#include "fanout/config/job_spec.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::config {

// What the command line gives a deployment: the data to score and where results go.
struct DeploymentRun {
  std::string input{};   // a folder (uri_folder) or a file (uri_file); relative to `cwd`
  std::string output{};  // the output folder; empty: <deployment's folder>/outputs/<name>
  std::string cwd{};     // resolves `input` and `output`
};

// True when the file is a batch deployment: a mapping with `endpoint_name` or
// `code_configuration` at the top (a parallel job or pipeline has neither). False when it cannot
// be read or parsed (load_job() then reports why).
[[nodiscard]] bool is_batch_deployment(const std::string& path);

// Reads a batch deployment and the run's input and output into the JobConfig of a parallel job:
// code_configuration.{code, scoring_script} -> task.{code, entry_script}; mini_batch_size,
// max_concurrency_per_instance, retry_settings, error_threshold, logging_level,
// environment_variables (top-level or under `settings:`, which wins); resources.instance_count;
// output_action append_row (default; file output_file_name, default predictions.csv) or
// summary_only; a local `model:` path -> model_path (see lay_out_model_dir). `compute`,
// `environment` and azureml: models become notices. Errors name the file, line and key, as
// load_job's; a missing --input is an error naming it.
[[nodiscard]] Expected<JobConfig> load_batch_deployment(const std::string& path,
                                                        const DeploymentRun& run);

// Lays out AZUREML_MODEL_DIR as Azure ML does: the registered model's folder (or file) sits
// inside it under its own base name, so both os.path.join(AZUREML_MODEL_DIR, "model") (for a
// model folder named model) and glob(AZUREML_MODEL_DIR + "/*/") find it. Makes `folder` holding
// a symbolic link named after cfg.model_path's base name, and returns `folder`: the value the
// run gives AZUREML_MODEL_DIR. Returns "" and makes nothing when model_path is empty or
// environment_variables sets AZUREML_MODEL_DIR already (the user's value wins). Error{Io} naming
// the link when it cannot be made.
[[nodiscard]] Expected<std::string> lay_out_model_dir(const JobConfig& cfg,
                                                      const std::string& folder);

}  // namespace fanout::config
