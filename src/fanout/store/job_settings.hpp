// The settings a job was submitted with, typed: what `fanout run` records in jobs.settings (a
// JSON object, docs/store.md) and what `fanout resume` reads back to start the job's pools again.
// This file is the one definition of that object's keys, both ways.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/util/expected.hpp"

namespace fanout::store {

// One field per key of jobs.settings, in the order they are written. A key missing when read
// keeps the default below.
struct JobSettings {
  std::string mini_batch_size{};                   // as written in the job file
  std::uint32_t instance_count = 1;                // pools
  std::uint32_t max_concurrency_per_instance = 0;  // workers per pool; 0: not recorded
  std::uint32_t prefetch = 0;
  std::uint32_t poll_ms = 10;
  std::uint32_t heartbeat_period_ms = 2000;
  std::uint32_t heartbeat_threshold_ms = 10000;
  std::uint32_t max_retries = 3;
  double timeout_s = 60;
  std::int64_t error_threshold = -1;
  std::int64_t mini_batch_error_threshold = -1;
  double allowed_failed_percent = 100;
  std::string logging_level = "INFO";
  std::string python{};                    // the job's interpreter; empty: not recorded
  std::string task_type{};                 // run_function, command or native
  double resource_monitor_interval_s = 0;  // key resource_monitor_interval; 0: off
  std::string profiling_module{};          // "", cProfile or profile
  std::uint32_t priority = 1;              // weight in the fair share between jobs
  // Where the pools ran (docs/cluster.md); written only for a launcher other than local.
  std::string launcher{};       // "" (local) or "slurm"
  std::uint32_t nodes = 0;      // pool jobs at the start
  std::uint32_t min_nodes = 0;  // 0: nodes
  std::uint32_t max_nodes = 0;  // 0: nodes
  std::string partition{};
  std::string walltime{};
  // The pools' memory and recycling settings (docs/resources.md); written only when set.
  double mem_per_worker_gib = 0;                // key mem_per_worker
  std::uint64_t worker_memory_limit_bytes = 0;  // key worker_memory_limit
  std::uint32_t max_minibatches_per_worker = 0;
  // The pools' placement settings (docs/resources.md); written only when set.
  std::string accelerators{};                 // device ids, comma-separated
  std::string accelerator_kind{};             // cuda | rocm | ze; "": cuda
  std::uint32_t workers_per_accelerator = 0;  // 0: not set (1)
  std::uint32_t cores_per_worker = 0;
  std::string cpu_affinity{};  // none | block | alternating | list:...; "": none
  // The declared folder output a job without an append_row file writes to (its output_dir), the
  // one its end summary names; written only when set.
  std::string output_dir{};
  // What `fanout resume --accept-changed-input` found changed in the job's input and resumed
  // anyway, one note per such resume (record_input_change); written only when set.
  std::vector<std::string> input_changed_on_resume{};
};

// The JSON object recorded with the job (JobSpec::settings_json): compact, keys in field order,
// a whole number written without a fraction ("timeout_s":60, as the store has always held it).
[[nodiscard]] std::string settings_json(const JobSettings& s);

// Reads a settings object. Keys it does not know, and known keys holding another JSON type, are
// ignored. Error{InvalidArgument} when `json` is not a JSON object.
[[nodiscard]] Expected<JobSettings> parse_settings_json(std::string_view json);

// The settings recorded with job `job_id` in the store at `path` (opened read-only): nullopt when
// there is no such job, defaults when its settings are NULL. Throws Failure{Database} when the
// store cannot be read, Failure{InvalidArgument} naming the job when its settings are not a JSON
// object.
[[nodiscard]] std::optional<JobSettings> read_job_settings(const std::string& path,
                                                           std::uint64_t job_id);

// Appends `note` to input_changed_on_resume in the settings of job `job_id` in the store at
// `path` (opened read-write; it must exist): what a resume found changed and accepted. Throws
// Failure{Database} when the store cannot be written, Failure{NotFound} naming the job when it
// has no such job.
void record_input_change(const std::string& path, std::uint64_t job_id, const std::string& note);

}  // namespace fanout::store
