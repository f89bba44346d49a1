// Azure ML SDK v1 ParallelRunConfig files (what ParallelRunConfig.save_to_yaml writes): the
// settings of a ParallelRunStep without its inputs, which in v1 belong to the step. `fanout run
// parallel_run_config.yml --input DIR_OR_FILE [--output DIR]` runs one as a parallel job. See
// docs/job-spec.md#parallelrunconfig-files.
#pragma once

#include <string>

#include "fanout/config/batch_deployment.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::config {

// True when the file is a ParallelRunConfig: a mapping with `entry_script` and `output_action`
// or `error_threshold` at the top, and no `type`, `task` or `jobs` (a job or pipeline file has
// them). False when it cannot be read or parsed (load_job() then reports why).
[[nodiscard]] bool is_parallel_run_config(const std::string& path);

// Reads a ParallelRunConfig and the run's input and output (the same DeploymentRun a batch
// deployment takes) into the JobConfig of a parallel job: entry_script and source_directory ->
// task; mini_batch_size, partition_keys, error_threshold, allowed_failed_count (->
// mini_batch_error_threshold), allowed_failed_percent, logging_level, run_invocation_timeout,
// run_max_try, environment_variables as the job keys; node_count -> resources.instance_count;
// process_count_per_node -> max_concurrency_per_instance; output_action append_row writes
// <output>/<append_row_file_name, default parallel_run_step.txt>; environment and compute_target
// become notices. The input is a uri_folder, a uri_file, or an mltable (a folder holding an
// MLTable file). Errors name the file, line and key; a missing --input is an error naming the
// file and --input.
[[nodiscard]] Expected<JobConfig> load_parallel_run_config(const std::string& path,
                                                           const DeploymentRun& run);

}  // namespace fanout::config
