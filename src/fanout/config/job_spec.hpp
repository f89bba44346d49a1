// The job spec: Azure ML's parallel-job YAML (type: parallel) as plain structs, plus fanout's own
// `fanout:` block. See docs/job-spec.md for every key, its default and its ParallelRunStep origin.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/util/expected.hpp"

namespace fanout::config {

struct InputSpec {
  std::string name{};   // key under `inputs:`
  std::string type{};   // "uri_folder" | "uri_file" | "mltable" | "literal" | "fanout_list"
                        // (a text file whose lines are the items), or a model type
                        // (custom_model, mlflow_model, triton_model: a path, never input_data)
  std::string path{};   // absolute, resolved against the YAML file's folder
  std::string mode{};   // as written (ro_mount, download, ...); informational
  std::string value{};  // literal inputs (strings, numbers) as text
  std::string partition_format{};  // file inputs: "{user}/{season}/*.wav" groups files by key
};

struct OutputSpec {
  std::string name{};
  std::string type{};  // "uri_file" | "uri_folder" | "mltable" (a folder)
  std::string path{};  // absolute; empty when none was given

  // A folder output (uri_folder, or mltable: a folder with an MLTable file).
  bool is_folder() const { return type != "uri_file"; }
};

// Where the pools run (docs/cluster.md): `launcher: local` (the embedded pools, the default) or
// `slurm` (one batch job per node, each running one pool with srun), with Parsl's SlurmProvider
// options, or `sge` (one Grid Engine job per host: queue, else partition, is the queue; account
// the project).
// Counts of 0 mean "not given".
struct LauncherSettings {
  std::string kind = "local";         // "local" | "slurm" | "sge" | "pbs" | "lsf" | "condor"
  std::string partition{};            // #SBATCH --partition
  std::string account{};              // #SBATCH --account
  std::string qos{};                  // #SBATCH --qos
  std::string walltime{};             // #SBATCH --time, as Slurm reads it ("01:00:00")
  std::uint32_t nodes = 0;            // pool jobs at the start; 0: resources.instance_count
  std::uint32_t min_nodes = 0;        // pool jobs kept pending or running; 0: nodes
  std::uint32_t max_nodes = 0;        // pool jobs submitted over the job in all; 0: nodes
  std::uint32_t cores_per_node = 0;   // #SBATCH --cpus-per-task; 0: not asked
  std::string gpus_per_node{};        // #SBATCH --gpus-per-node ("4", "a100:4"); "": not asked
  std::string mem_per_node{};         // #SBATCH --mem ("64G", "4000"); "": not asked
  bool exclusive = false;             // #SBATCH --exclusive
  std::string scheduler_options{};    // extra #SBATCH lines, as written
  std::string worker_init{};          // shell lines run before the pool starts
  std::string interchange_address{};  // what the nodes connect to; empty: first non-loopback
  int line = 0;                       // where `launcher` was written (0: not written)
  // PBS, LSF and HTCondor (docs/cluster.md): the queue (#PBS -q, #BSUB -q), nodes in one pool
  // job (one pool on each), and which PBS writes the node request (pro: -l select, torque:
  // -l nodes).
  std::string queue{};                // #PBS -q, #BSUB -q; "": the scheduler's default
  std::uint32_t nodes_per_block = 0;  // nodes in one pool job; 0: 1
  std::string pbs_flavor{};           // "pro" | "torque"; "": pro
  // kind "ssh" (docs/cluster.md, section 10): one pool per host over ssh, with these keys.
  // The ssh launcher (docs/cluster.md): the hosts one pool each is started on, the options
  // every ssh command takes (split at white space: "-p 2222", "-i key"), and the pool binary's
  // path on the hosts ("": the client's own fanout-pool, the shared-filesystem assumption).
  std::vector<std::string> hosts{};
  std::vector<std::string> ssh_options{};
  std::string pool_command{};
  // Elastic pool jobs (docs/cluster.md, section 6), Parsl's init_blocks, parallelism and
  // max_idletime; scaling is on when any of the three is given. 0 / negative: not given.
  std::uint32_t init_nodes = 0;  // pool jobs at the start (replaces nodes)
  double parallelism = -1;       // slots wanted per outstanding mini-batch (0..1)
  double max_idletime_s = -1;    // a pool idle this long while nothing waits is released
  [[nodiscard]] bool elastic() const {
    return init_nodes > 0 || parallelism >= 0 || max_idletime_s >= 0;
  }
};

// The launchers `fanout run --launcher` and `fanout.launcher` take.
[[nodiscard]] bool is_launcher_kind(std::string_view kind);

// Whether each non-empty line of `text` is a scheduler_options line the launcher `kind` passes
// through: "#SBATCH ..." (slurm), "#PBS ..." (pbs), "#BSUB ..." (lsf), a submit description
// command "key = value" or "+Attr = value" (condor); anything for local. "" when fine, else
// "line N: expected an #SBATCH line (got '...')".
[[nodiscard]] std::string check_scheduler_options(std::string_view kind, std::string_view text);

// "h1, h2,h3" → {"h1", "h2", "h3"}: fanout.hosts and --hosts as one text (empty parts dropped).
[[nodiscard]] std::vector<std::string> split_host_list(std::string_view text);
// "-p 2222 -i key" → {"-p", "2222", "-i", "key"}: ssh options split at white space (no quoting).
[[nodiscard]] std::vector<std::string> split_words(std::string_view text);

// Where a pool's workers run on its node (docs/resources.md): fanout-pool's placement options.
struct PlacementSettings {
  std::string accelerators{};                 // device ids, comma-separated; "": the pool's own
  std::string accelerator_kind{};             // cuda | rocm | ze; "": cuda
  std::uint32_t workers_per_accelerator = 0;  // 0: not written (1)
  std::uint32_t cores_per_worker = 0;         // 0: not written
  std::string cpu_affinity{};                 // none | block | alternating | list:...; "": none
};

// The environment variable that names a worker's devices for an accelerator kind: cuda
// (CUDA_VISIBLE_DEVICES), rocm (ROCR_VISIBLE_DEVICES), ze (ZE_AFFINITY_MASK); "" for another.
[[nodiscard]] constexpr std::string_view accelerator_variable(std::string_view kind) {
  if (kind == "cuda") return "CUDA_VISIBLE_DEVICES";
  if (kind == "rocm") return "ROCR_VISIBLE_DEVICES";
  if (kind == "ze") return "ZE_AFFINITY_MASK";
  return {};
}

// fanout's own settings (the `fanout:` key), each also a CLI flag.
struct FanoutSettings {
  std::uint32_t prefetch = 0;  // extra mini-batches per pool beyond free workers
  std::uint32_t poll_ms = 10;  // pool/interchange poll period when idle
  std::uint32_t heartbeat_period_ms = 2000;
  std::uint32_t heartbeat_threshold_ms = 10000;
  std::string python = "python3";   // interpreter for the python runtime
  std::string db{};                 // store path; empty: the default (see docs)
  std::string run_dir{};            // where logs/ goes; empty: the default
  std::string log_level{};          // fanout's own processes; empty: logging_level
  std::uint32_t workers = 0;        // overrides max_concurrency_per_instance when > 0
  std::string row_separator = " ";  // DataFrame rows: column separator
  bool row_header = false;          // DataFrame rows: write a header line
  std::uint32_t priority = 1;       // weight in the interchange's fair share between jobs
  LauncherSettings launch{};        // where the pools run
  PlacementSettings placement{};    // devices, CPUs and threads of each worker
  bool allow_partial = false;       // a `partial` job exits 0, as in ParallelRunStep
  // How the pool starts Python workers (docs/resources.md): "fork" from a fork server that
  // imported the entry script once, or "spawn" a fresh interpreter each.
  std::string worker_start = "fork";
  // Memory (docs/resources.md): each worker's share of MemAvailable in GiB, which bounds the
  // worker count (Parsl's mem_per_worker; 0: no bound); the RSS of a worker's process group
  // past which it is stopped (0: none); mini-batches after which a worker is replaced
  // (multiprocessing's maxtasksperchild; 0: never).
  double mem_per_worker_gib = 0;
  std::uint64_t worker_memory_limit_bytes = 0;
  std::uint32_t max_minibatches_per_worker = 0;
  std::string metrics_listen{};  // the embedded interchange's --metrics-listen; empty: none
};

struct JobConfig {
  std::string spec_path{};  // absolute path of the YAML file
  std::string base_dir{};   // its folder: relative paths resolve against it
  std::string name{};       // `name`, else `display_name`, else the file's stem
  std::string display_name{};
  std::string description{};

  std::vector<InputSpec> inputs{};  // in file order
  std::string input_data{};         // name of the input that `input_data` refers to
  std::vector<OutputSpec> outputs{};

  std::string mini_batch_size = "10";    // as written
  bool mini_batch_size_written = false;  // false: the default (no key, no flag)
  std::uint64_t mini_batch_files = 10;   // when a count of files
  std::uint64_t mini_batch_bytes = 0;    // when a size ("10kb": 10240); then files is 0
  std::vector<std::string> partition_keys{};

  std::uint32_t instance_count = 1;                // resources.instance_count: local pools
  std::uint32_t max_concurrency_per_instance = 0;  // 0: the machine's cores
  std::int64_t error_threshold = -1;               // failed items; -1 ignores
  std::int64_t mini_batch_error_threshold = -1;    // failed mini-batches; -1 ignores
  double allowed_failed_percent = 100;             // 0..100
  std::uint32_t max_retries = 3;                   // retry_settings.max_retries: tries = this + 1
  double timeout_s = 60;                           // retry_settings.timeout: bound on one run()
  // ParallelRunStep's --task_overhead_timeout, --first_task_creation_timeout,
  // --progress_update_timeout in seconds; 0: not given (not enforced).
  double task_overhead_timeout_s = 0;
  double first_task_creation_timeout_s = 0;
  double progress_update_timeout_s = 0;
  std::string logging_level = "INFO";
  std::map<std::string, std::string> environment_variables{};

  std::string task_type = "run_function";            // "run_function" | "command" | "native"
  std::string code_dir{};                            // absolute
  std::string entry_script{};                        // relative to code_dir (run_function)
  std::string command{};                             // task.type: command
  std::string library{};                             // task.type: native (absolute)
  std::string program_arguments{};                   // as written, after ${{...}} substitution
  std::vector<std::string> user_args{};              // what remains for the entry script's sys.argv
  std::map<std::string, std::string> system_args{};  // consumed ParallelRunStep flags, raw text
  std::string append_row_to{};                       // absolute output file; empty: summary_only
  // A batch deployment's local model (folder or file, absolute); lay_out_model_dir() makes the
  // AZUREML_MODEL_DIR folder that holds it.
  std::string model_path{};

  FanoutSettings fanout{};
  std::vector<std::string> notices{};  // e.g. "compute: azureml:cpu-cluster ignored"
  int partition_keys_line = 0;         // where partition_keys was written (0: not written)
};

// Reads and validates a job file. Every error names the file, the line where there is one, and
// the key: "job.yaml:12: mini_batch_size: expected a file count or a size like \"10kb\" (got
// \"10 parsecs\")". Error codes: NotFound (file missing), InvalidArgument (everything else).
// Checks that the input path and the entry script exist; does not start anything.
[[nodiscard]] Expected<JobConfig> load_job(const std::string& path);

// Same, from text already read; `path` is used for messages and for resolving relative paths.
[[nodiscard]] Expected<JobConfig> parse_job(const std::string& text, const std::string& path);

// Parses a mini_batch_size: "10" -> {files=10}, "10kb"/"1MB"/"1gb" -> bytes (units of 1024).
struct BatchSize {
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
};
[[nodiscard]] Expected<BatchSize> parse_batch_size(const std::string& text);

// Parses a memory size written as mini_batch_size writes one ("200mb", "4gb", "512kb"; units of
// 1024) into bytes. A bare number has no unit and is refused. Error{InvalidArgument}.
[[nodiscard]] Expected<std::uint64_t> parse_memory_size(const std::string& text);

// Splits a command line the way a POSIX shell would for words and quotes (no expansion).
[[nodiscard]] Expected<std::vector<std::string>> split_args(const std::string& text);

}  // namespace fanout::config
