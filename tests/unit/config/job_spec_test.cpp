// Tests for the job spec parser: a table of files it must accept, a table of near misses it must
// reject (code, key and line checked), and the helpers parse_batch_size and split_args.
#include "fanout/config/job_spec.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "scratch_dir.hpp"

namespace fs = std::filesystem;
using fanout::ErrorCode;
using fanout::config::JobConfig;

using fanout::test::ScratchDir;
using fanout::test::slurp;

namespace {

// What the baseline job (kBase) needs on disk, plus a few extras the cases use.
void make_tree(const ScratchDir& t) {
  t.write("data/a.txt", "a\n");
  t.write("data/b.txt", "b\n");
  t.write("my data/c.txt", "c\n");
  t.write("src/score.py", "def run(mini_batch):\n    return mini_batch\n");
  t.write("src/libx.so", "");
  t.write("model.pkl", "m");
  t.write("table/MLTable", "paths:\n  - file: ./a.csv\n");
  t.write("table/a.csv", "x\n1\n");
  t.mkdir("out");
}

// The smallest valid job; near misses edit one of its lines or append after line 9.
const std::string kBase =
    "type: parallel\n"                // 1
    "inputs:\n"                       // 2
    "  data:\n"                       // 3
    "    type: uri_folder\n"          // 4
    "    path: ./data\n"              // 5
    "input_data: ${{inputs.data}}\n"  // 6
    "task:\n"                         // 7
    "  code: ./src\n"                 // 8
    "  entry_script: score.py\n";     // 9

// kBase with line `n` (1-based) replaced by `text` (several lines allowed).
std::string base_with(int n, const std::string& text) {
  std::string out;
  std::size_t pos = 0;
  for (int line = 1; pos < kBase.size(); ++line) {
    std::size_t end = kBase.find('\n', pos);
    out += line == n ? text + "\n" : kBase.substr(pos, end + 1 - pos);
    pos = end + 1;
  }
  return out;
}

// `s` with the first `from` replaced by `to`.
std::string swap(std::string s, const std::string& from, const std::string& to) {
  return s.replace(s.find(from), from.size(), to);
}

// kBase with `outputs:` (given as its indented body) before `task:`, then `task_tail` appended.
std::string with_outputs(const std::string& body, const std::string& task_tail) {
  return base_with(1, "type: parallel\noutputs:\n" + body) + task_tail;
}

fanout::Expected<JobConfig> parse(const ScratchDir& t, const std::string& yaml) {
  return fanout::config::parse_job(yaml, t.path("job.yaml"));
}

}  // namespace

TEST_CASE("config.job_spec.accepts_full_example") {
  ScratchDir t;
  make_tree(t);
  const std::string yaml = R"(
$schema: https://azuremlschemas.azureedge.net/latest/parallelJob.schema.json
type: parallel
name: score-files
display_name: Score files
experiment_name: demo
description: Scores every file
compute: azureml:cpu-cluster
inputs:
  images:
    type: uri_folder
    path: ./data
    mode: ro_mount
  model:
    type: uri_file
    path: ./model.pkl
outputs:
  scores:
    type: uri_file
    path: ./out/scores.txt
input_data: ${{inputs.images}}
mini_batch_size: "10"
partition_keys: [a, b]
resources:
  instance_count: 1
  instance_type: Standard_D2
max_concurrency_per_instance: 2
mini_batch_error_threshold: 5
error_threshold: -1
allowed_failed_percent: 100
logging_level: INFO
retry_settings:
  max_retries: 2
  timeout: 30
environment_variables:
  FOO: bar
environment: azureml:AzureML-sklearn@latest
task:
  type: run_function
  code: ./src
  entry_script: score.py
  program_arguments: >-
    --model ${{inputs.model}} --error_threshold 5 --job_output_path ${{outputs.scores}}
  append_row_to: ${{outputs.scores}}
  environment: azureml:AzureML-sklearn@latest
fanout:
  prefetch: 4
  poll_ms: 10
  heartbeat_period_ms: 2000
  heartbeat_threshold_ms: 10000
  python: /usr/bin/python3
  db: ./runs/fanout.db
  run_dir: ./runs
  log_level: info
  workers: 2
  row_separator: " "
  row_header: false
)";
  auto r = parse(t, yaml);
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
  const JobConfig& c = *r;
  CHECK(c.spec_path == t.path("job.yaml"));
  CHECK(c.base_dir == t.path());
  CHECK(c.name == "score-files");
  CHECK(c.display_name == "Score files");
  CHECK(c.description == "Scores every file");
  REQUIRE(c.inputs.size() == 2);
  CHECK(c.inputs[0].name == "images");
  CHECK(c.inputs[0].type == "uri_folder");
  CHECK(c.inputs[0].path == t.path("data"));
  CHECK(c.inputs[0].mode == "ro_mount");
  CHECK(c.inputs[1].path == t.path("model.pkl"));
  CHECK(c.input_data == "images");
  REQUIRE(c.outputs.size() == 1);
  CHECK(c.outputs[0].name == "scores");
  CHECK(c.outputs[0].type == "uri_file");
  CHECK(c.outputs[0].path == t.path("out/scores.txt"));
  CHECK(c.mini_batch_size == "10");
  CHECK(c.mini_batch_files == 10);
  CHECK(c.mini_batch_bytes == 0);
  CHECK(c.partition_keys == std::vector<std::string>{"a", "b"});
  CHECK(c.instance_count == 1);
  CHECK(c.max_concurrency_per_instance == 2);
  CHECK(c.mini_batch_error_threshold == 5);
  CHECK(c.error_threshold == 5);  // --error_threshold in program_arguments wins over the key
  CHECK(c.allowed_failed_percent == 100);
  CHECK(c.logging_level == "INFO");
  CHECK(c.max_retries == 2);
  CHECK(c.timeout_s == 30);
  CHECK(c.environment_variables.at("FOO") == "bar");
  CHECK(c.task_type == "run_function");
  CHECK(c.code_dir == t.path("src"));
  CHECK(c.entry_script == "score.py");
  CHECK(c.program_arguments == "--model " + t.path("model.pkl") +
                                   " --error_threshold 5 --job_output_path " +
                                   t.path("out/scores.txt"));
  CHECK(c.user_args == std::vector<std::string>{"--model", t.path("model.pkl"), "--job_output_path",
                                                t.path("out/scores.txt")});
  CHECK(c.system_args == std::map<std::string, std::string>{{"error_threshold", "5"}});
  CHECK(c.append_row_to == t.path("out/scores.txt"));
  CHECK(c.fanout.prefetch == 4);
  CHECK(c.fanout.poll_ms == 10);
  CHECK(c.fanout.heartbeat_period_ms == 2000);
  CHECK(c.fanout.heartbeat_threshold_ms == 10000);
  CHECK(c.fanout.python == "/usr/bin/python3");
  CHECK(c.fanout.db == t.path("runs/fanout.db"));
  CHECK(c.fanout.run_dir == t.path("runs"));
  CHECK(c.fanout.log_level == "info");
  CHECK(c.fanout.workers == 2);
  CHECK(c.fanout.row_separator == " ");
  CHECK(c.fanout.row_header == false);
  // compute, environment and task.environment are reported; the threshold override too.
  // partition_keys together with mini_batch_size: partition_keys win, with a warning (Azure ML v2).
  REQUIRE(c.notices.size() == 5);
  CHECK(c.notices[0] == "compute: azureml:cpu-cluster ignored (fanout runs locally)");
  CHECK(c.notices[1].starts_with("environment: azureml:AzureML-sklearn@latest ignored"));
  CHECK(c.notices[2] == "mini_batch_size: 10 ignored: partition_keys decide the mini-batches");
  CHECK(c.notices[3].starts_with("task.environment:"));
  CHECK(c.notices[4] == "task.program_arguments --error_threshold overrides error_threshold");
}

TEST_CASE("config.job_spec.accepts_table") {
  struct Case {
    std::string name;
    std::string yaml;
    std::function<void(const JobConfig&, const ScratchDir&)> check;
  };
  const std::vector<Case> cases = {
      {"defaults", kBase,
       [](const JobConfig& c, const ScratchDir& t) {
         CHECK(c.name == "job");  // the file's stem
         CHECK(c.task_type == "run_function");
         CHECK(c.code_dir == t.path("src"));
         CHECK(c.mini_batch_size == "10");
         CHECK(c.mini_batch_files == 10);
         CHECK(c.mini_batch_bytes == 0);
         CHECK(c.instance_count == 1);
         CHECK(c.max_concurrency_per_instance == 0);
         CHECK(c.error_threshold == -1);
         CHECK(c.mini_batch_error_threshold == -1);
         CHECK(c.allowed_failed_percent == 100);
         CHECK(c.max_retries == 3);
         CHECK(c.timeout_s == 60);
         CHECK(c.logging_level == "INFO");
         CHECK(c.user_args.empty());
         CHECK(c.system_args.empty());
         CHECK(c.append_row_to.empty());
         CHECK(c.notices.empty());
         CHECK(c.fanout.python == "python3");
         CHECK_FALSE(c.mini_batch_size_written);
       }},
      {"display_name_names_the_job", kBase + "display_name: Nice name\n",
       [](const JobConfig& c, const ScratchDir&) { CHECK(c.name == "Nice name"); }},
      {"code_defaults_to_yaml_folder",
       swap(swap(kBase, "  code: ./src\n", ""), "score.py", "src/score.py"),
       [](const JobConfig& c, const ScratchDir& t) {
         CHECK(c.code_dir == t.path());
         CHECK(c.entry_script == "src/score.py");
       }},
      {"size_kb", kBase + "mini_batch_size: \"10kb\"\n",
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.mini_batch_size == "10kb");
         CHECK(c.mini_batch_files == 0);
         CHECK(c.mini_batch_bytes == 10240);
       }},
      {"size_MB_upper", kBase + "mini_batch_size: 1MB\n",
       [](const JobConfig& c, const ScratchDir&) { CHECK(c.mini_batch_bytes == 1048576); }},
      {"size_gb_space", kBase + "mini_batch_size: 2 gb\n",
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.mini_batch_bytes == 2ull * 1024 * 1024 * 1024);
         CHECK(c.mini_batch_files == 0);
       }},
      {"size_int", kBase + "mini_batch_size: 25\n",
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.mini_batch_files == 25);
         CHECK(c.mini_batch_bytes == 0);
       }},
      {"numeric_strings_and_whole_floats",
       kBase + "max_concurrency_per_instance: \"4\"\nerror_threshold: 2.0\n"
               "allowed_failed_percent: -1\nretry_settings:\n  timeout: \"2.5\"\n",
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.max_concurrency_per_instance == 4);
         CHECK(c.error_threshold == 2);
         CHECK(c.allowed_failed_percent == 100);  // -1: ignore
         CHECK(c.timeout_s == 2.5);
       }},
      {"run_max_try_v1", kBase + "run_max_try: 5\nrun_invocation_timeout: 120\n",
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.max_retries == 4);
         CHECK(c.timeout_s == 120);
       }},
      {"run_max_try_overrides_retry_settings",
       kBase + "retry_settings:\n  max_retries: 7\nrun_max_try: 1\n",
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.max_retries == 0);
         REQUIRE(c.notices.size() == 1);
         CHECK(c.notices[0] == "run_max_try overrides retry_settings.max_retries");
       }},
      {"literal_inputs",
       base_with(2, "inputs:\n  threshold: 0.5\n  label: \"cat dog\"") +
           "  program_arguments: --threshold ${{inputs.threshold}} --label ${{inputs.label}}\n",
       [](const JobConfig& c, const ScratchDir&) {
         REQUIRE(c.inputs.size() == 3);
         CHECK(c.inputs[0].name == "threshold");
         CHECK(c.inputs[0].type == "literal");
         CHECK(c.inputs[0].value == "0.5");
         CHECK(c.inputs[0].path.empty());
         CHECK(c.user_args == std::vector<std::string>{"--threshold", "0.5", "--label", "cat dog"});
       }},
      {"literal_input_component_form",
       base_with(2, "inputs:\n  k:\n    type: integer\n    default: 3") +
           "  program_arguments: --k=${{inputs.k}}\n",
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.inputs[0].type == "literal");
         CHECK(c.inputs[0].value == "3");
         CHECK(c.user_args == std::vector<std::string>{"--k=3"});
       }},
      {"program_arguments_consumed",
       kBase + "  program_arguments: >-\n"
               "    --model ${{inputs.data}} --error_threshold 5 --allowed_failed_count=3\n"
               "    --foo 'a b' --run_max_try 2 --bar=1 --logging_level debug\n"
               "    --progress_update_timeout 100 --node_count=2 --process_count_per_node 3\n"
               "    --allowed_failed_percent 25 --run_invocation_timeout 9 --mini_batch_size 3kb\n"
               "    \"x\\\"y\" --error_threshold=-1 last\n",
       [](const JobConfig& c, const ScratchDir& t) {
         CHECK(c.user_args == std::vector<std::string>{"--model", t.path("data"), "--foo", "a b",
                                                       "--bar=1", "x\"y", "last"});
         CHECK(c.system_args.at("error_threshold") == "-1");  // repeated: the last wins
         CHECK(c.system_args.at("allowed_failed_count") == "3");
         CHECK(c.system_args.at("progress_update_timeout") == "100");
         CHECK(c.system_args.size() == 10);
         CHECK(c.error_threshold == -1);
         CHECK(c.mini_batch_error_threshold == 3);
         CHECK(c.max_retries == 1);
         CHECK(c.logging_level == "DEBUG");
         CHECK(c.instance_count == 2);
         CHECK(c.max_concurrency_per_instance == 3);
         CHECK(c.allowed_failed_percent == 25);
         CHECK(c.timeout_s == 9);
         CHECK(c.mini_batch_bytes == 3072);
         CHECK(c.mini_batch_files == 0);
       }},
      {"path_with_spaces_stays_one_argument",
       base_with(5, "    path: ./my data") + "  program_arguments: --in ${{inputs.data}}\n",
       [](const JobConfig& c, const ScratchDir& t) {
         CHECK(c.user_args == std::vector<std::string>{"--in", t.path("my data")});
       }},
      {"append_row_file_name_into_first_folder_output",
       with_outputs("  res:\n    type: uri_folder\n    path: ./out",
                    "  program_arguments: --append_row_file_name rows.txt\n"),
       [](const JobConfig& c, const ScratchDir& t) {
         CHECK(c.append_row_to == t.path("out/rows.txt"));
         CHECK(c.system_args.at("append_row_file_name") == "rows.txt");
       }},
      {"append_row_file_name_into_yaml_folder",
       with_outputs("  res:\n    type: uri_file\n    path: ./out/x.txt",
                    "  program_arguments: --append_row_file_name=rows.txt\n"),
       [](const JobConfig& c, const ScratchDir& t) {
         CHECK(c.append_row_to == t.path("rows.txt"));
       }},
      {"append_row_to_folder_output",
       with_outputs("  res: {type: uri_folder, path: ./out}",
                    "  append_row_to: ${{outputs.res}}\n"),
       [](const JobConfig& c, const ScratchDir& t) {
         CHECK(c.append_row_to == t.path("out/parallel_run_step.txt"));
       }},
      // An mltable output is a folder (SDK v2 pipelines declare them).
      {"append_row_to_mltable_output",
       with_outputs("  res: {type: mltable, path: ./out}", "  append_row_to: ${{outputs.res}}\n"),
       [](const JobConfig& c, const ScratchDir& t) {
         REQUIRE(c.outputs.size() == 1);
         CHECK(c.outputs[0].type == "mltable");
         CHECK(c.outputs[0].is_folder());
         CHECK(c.append_row_to == t.path("out/parallel_run_step.txt"));
       }},
      {"append_row_file_name_into_mltable_output",
       with_outputs("  res:\n    type: mltable\n    path: ./out",
                    "  program_arguments: --append_row_file_name=rows.txt\n"),
       [](const JobConfig& c, const ScratchDir& t) {
         CHECK(c.append_row_to == t.path("out/rows.txt"));
       }},
      // ./ and ../ values are relative to the job file, said in a notice; others kept.
      {"environment_variables_relative_to_the_job_file",
       kBase + "environment_variables:\n  AZUREML_MODEL_DIR: ./models\n  UP: ../x\n  WORD: models\n"
               "  URL: http://a/./b\n",
       [](const JobConfig& c, const ScratchDir& t) {
         CHECK(c.environment_variables.at("AZUREML_MODEL_DIR") == t.path("models"));
         CHECK(c.environment_variables.at("UP") ==
               fs::path(t.path()).parent_path().string() + "/x");
         CHECK(c.environment_variables.at("WORD") == "models");
         CHECK(c.environment_variables.at("URL") == "http://a/./b");
         REQUIRE(c.notices.size() == 2);
         CHECK(c.notices[0] == "environment_variables.AZUREML_MODEL_DIR: ./models is " +
                                   t.path("models") + " (relative to the job file)");
       }},
      {"mini_batch_size_written_or_not", kBase + "mini_batch_size: \"1\"\n",
       [](const JobConfig& c, const ScratchDir&) { CHECK(c.mini_batch_size_written); }},
      {"append_row_to_plain_path", kBase + "  append_row_to: ./out/rows.txt\n",
       [](const JobConfig& c, const ScratchDir& t) {
         CHECK(c.append_row_to == t.path("out/rows.txt"));
       }},
      {"empty_output_is_a_folder_without_path", kBase + "outputs:\n  res:\n",
       [](const JobConfig& c, const ScratchDir&) {
         REQUIRE(c.outputs.size() == 1);
         CHECK(c.outputs[0].type == "uri_folder");
         CHECK(c.outputs[0].path.empty());
       }},
      {"uri_file_input", swap(swap(kBase, "uri_folder", "uri_file"), "./data", "./model.pkl"),
       [](const JobConfig& c, const ScratchDir& t) {
         CHECK(c.inputs[0].type == "uri_file");
         CHECK(c.inputs[0].path == t.path("model.pkl"));
       }},
      {"mltable_sizes_in_bytes",
       swap(swap(kBase, "uri_folder", "mltable"), "./data", "./table") + "mini_batch_size: 1024\n",
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.mini_batch_files == 0);
         CHECK(c.mini_batch_bytes == 1024);
       }},
      {"mltable_default_size", swap(swap(kBase, "uri_folder", "mltable"), "./data", "./table"),
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.mini_batch_size == "1MB");
         CHECK(c.mini_batch_files == 0);
         CHECK(c.mini_batch_bytes == 1048576);
       }},
      {"command_task", base_with(9, "  type: command\n  command: wc -l ${{inputs.data}}/a.txt"),
       [](const JobConfig& c, const ScratchDir& t) {
         CHECK(c.task_type == "command");
         CHECK(c.command == "wc -l " + t.path("data") + "/a.txt");
         CHECK(c.entry_script.empty());
       }},
      {"native_task", base_with(9, "  type: native\n  library: ./libx.so"),
       [](const JobConfig& c, const ScratchDir& t) {
         CHECK(c.task_type == "native");
         CHECK(c.library == t.path("src/libx.so"));  // relative to task.code
       }},
      {"native_builtin_noop", base_with(9, "  type: native\n  library: builtin:noop"),
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.task_type == "native");
         CHECK(c.library == "builtin:noop");  // no file, not resolved against task.code
       }},
      {"task_overhead_timeout_python", kBase + "  program_arguments: --task_overhead_timeout 2.5\n",
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.task_overhead_timeout_s == 2.5);
         CHECK(c.notices.empty());
       }},
      {"task_overhead_timeout_ignored_by_command",
       base_with(9,
                 "  type: command\n  command: true\n"
                 "  program_arguments: --task_overhead_timeout 2"),
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.task_overhead_timeout_s == 2);
         REQUIRE(c.notices.size() == 1);
         CHECK(c.notices[0] ==
               "task.program_arguments --task_overhead_timeout ignored (the command runtime has no "
               "loading phase; retry_settings.timeout bounds each mini-batch)");
       }},
      {"compute_local_is_quiet",
       kBase + "compute: local\ntags: {a: b}\nidentity:\n  type: managed\n",
       [](const JobConfig& c, const ScratchDir&) { CHECK(c.notices.empty()); }},
      {"inline_environment_is_reported",
       kBase + "environment:\n  image: python:3.11\n  conda_file: env.yml\n",
       [](const JobConfig& c, const ScratchDir&) {
         REQUIRE(c.notices.size() == 1);
         CHECK(c.notices[0] == "environment: inline definition ignored (fanout runs locally)");
       }},
      {"environment_variables_and_partition_keys",
       kBase + "environment_variables:\n  FOO: bar\n  N: 3\n  EMPTY:\npartition_keys:\n  - a\n",
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.environment_variables ==
               std::map<std::string, std::string>{{"EMPTY", ""}, {"FOO", "bar"}, {"N", "3"}});
         CHECK(c.partition_keys == std::vector<std::string>{"a"});
       }},
      {"fanout_settings",
       kBase + "fanout:\n  python: ./venv/bin/python\n  log_level: WARNING\n  row_header: yes\n"
               "  heartbeat_period_ms: 100\n  heartbeat_threshold_ms: 101\n",
       [](const JobConfig& c, const ScratchDir& t) {
         CHECK(c.fanout.python == t.path("venv/bin/python"));
         CHECK(c.fanout.log_level == "warning");
         CHECK(c.fanout.row_header);
         CHECK(c.fanout.heartbeat_threshold_ms == 101);
       }},
      {"memory_settings",
       kBase + "fanout:\n  mem_per_worker: 1.5\n  worker_memory_limit: 200mb\n"
               "  max_minibatches_per_worker: 3\n",
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.fanout.mem_per_worker_gib == 1.5);
         CHECK(c.fanout.worker_memory_limit_bytes == 200ull * 1024 * 1024);
         CHECK(c.fanout.max_minibatches_per_worker == 3);
       }},
      {"memory_settings_default_to_none", kBase,
       [](const JobConfig& c, const ScratchDir&) {
         CHECK(c.fanout.mem_per_worker_gib == 0);
         CHECK(c.fanout.worker_memory_limit_bytes == 0);
         CHECK(c.fanout.max_minibatches_per_worker == 0);
       }},
      {"spaced_reference", base_with(6, "input_data: \"${{ inputs.data }}\""),
       [](const JobConfig& c, const ScratchDir&) { CHECK(c.input_data == "data"); }},
  };
  for (const auto& tc : cases) {
    CAPTURE(tc.name);
    CAPTURE(tc.yaml);
    ScratchDir t;
    make_tree(t);
    auto r = parse(t, tc.yaml);
    REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
    tc.check(*r, t);
  }
}

TEST_CASE("config.job_spec.reads_metrics_listen") {
  ScratchDir t;
  make_tree(t);
  auto cfg = parse(t, kBase + "fanout:\n  metrics_listen: \"127.0.0.1:9464\"\n");
  REQUIRE(cfg);
  CHECK(cfg->fanout.metrics_listen == "127.0.0.1:9464");
  auto plain = parse(t, kBase);
  REQUIRE(plain);
  CHECK(plain->fanout.metrics_listen.empty());
}

TEST_CASE("config.job_spec.rejects_table") {
  struct Case {
    std::string name;
    std::string yaml;
    std::string key;        // must appear in the message, followed by ": "
    int line;               // must appear as "<file>:<line>: "; 0: no line
    std::string also = {};  // another piece of text the message must hold
  };
  const std::vector<Case> cases = {
      {"yaml_syntax", kBase + "partition_keys: [a, b\nerror_threshold: 1\n", "YAML syntax error",
       11},
      {"unknown_nested_key", base_with(9, "  entry_scrpt: score.py"), "task.entry_scrpt", 9,
       "unknown key (did you mean entry_script?)"},
      {"unknown_top_key", kBase + "jobs: {}\n", "jobs", 10, "unknown key"},
      {"unknown_input_key", base_with(5, "    path: ./data\n    pth: ./x"), "inputs.data.pth", 6,
       "unknown key"},
      {"unknown_fanout_key", kBase + "fanout:\n  prefech: 2\n", "fanout.prefech", 11,
       "did you mean prefetch?"},
      {"metrics_listen_without_port", kBase + "fanout:\n  metrics_listen: localhost\n",
       "fanout.metrics_listen", 11, "expected HOST:PORT"},
      {"unknown_resources_key", kBase + "resources:\n  instance_cout: 2\n",
       "resources.instance_cout", 11},
      {"string_where_number", kBase + "max_concurrency_per_instance: two\n",
       "max_concurrency_per_instance", 10, "expected an integer >= 1 (got \"two\")"},
      {"mapping_where_number", kBase + "error_threshold:\n  x: 1\n", "error_threshold", 11,
       "(got a mapping)"},
      {"fraction_where_integer", kBase + "mini_batch_error_threshold: 1.5\n",
       "mini_batch_error_threshold", 10},
      {"instance_count_zero", kBase + "resources:\n  instance_count: 0\n",
       "resources.instance_count", 11, "expected an integer >= 1 (got 0)"},
      {"threshold_below_minus_one", kBase + "error_threshold: -2\n", "error_threshold", 10},
      {"percent_above_100", kBase + "allowed_failed_percent: 150\n", "allowed_failed_percent", 10},
      {"negative_retries", kBase + "retry_settings:\n  max_retries: -1\n",
       "retry_settings.max_retries", 11},
      // Tries are retries + 1 in 32 bits: the largest count would wrap to 0 tries.
      {"retries_wrap_tries_to_zero", kBase + "retry_settings:\n  max_retries: 4294967295\n",
       "retry_settings.max_retries", 11, "expected an integer <= 4294967294 (got 4294967295)"},
      {"retries_beyond_u32", kBase + "retry_settings:\n  max_retries: 8589934593\n",
       "retry_settings.max_retries", 11},
      // The bounds fanout-pool and fanout-interchange accept on their command line.
      {"heartbeat_period_beyond_cli", kBase + "fanout:\n  heartbeat_period_ms: 3600001\n",
       "fanout.heartbeat_period_ms", 11, "expected an integer <= 3600000"},
      {"heartbeat_threshold_beyond_cli", kBase + "fanout:\n  heartbeat_threshold_ms: 86400001\n",
       "fanout.heartbeat_threshold_ms", 11, "expected an integer <= 86400000"},
      {"poll_ms_beyond_cli", kBase + "fanout:\n  poll_ms: 60001\n", "fanout.poll_ms", 11},
      {"workers_beyond_cli", kBase + "fanout:\n  workers: 100001\n", "fanout.workers", 11},
      // 0 is "none"; below it is an error.
      {"negative_timeout", kBase + "retry_settings:\n  timeout: -1\n", "retry_settings.timeout", 11,
       "expected a number of seconds >= 0 (0: none) (got -1)"},
      {"run_max_try_zero", kBase + "run_max_try: 0\n", "run_max_try", 10},
      {"bad_logging_level", kBase + "logging_level: LOUD\n", "logging_level", 10},
      {"heartbeat_threshold_not_above_period",
       kBase + "fanout:\n  heartbeat_period_ms: 500\n  heartbeat_threshold_ms: 500\n",
       "fanout.heartbeat_threshold_ms", 12},
      {"bad_bool", kBase + "fanout:\n  row_header: maybe\n", "fanout.row_header", 11},
      {"mem_per_worker_zero", kBase + "fanout:\n  mem_per_worker: 0\n", "fanout.mem_per_worker", 11,
       "greater than 0"},
      {"mem_per_worker_text", kBase + "fanout:\n  mem_per_worker: 4gb\n", "fanout.mem_per_worker",
       11, "(got \"4gb\")"},
      {"memory_limit_without_unit", kBase + "fanout:\n  worker_memory_limit: 200\n",
       "fanout.worker_memory_limit", 11, "expected a size like \"200mb\""},
      {"memory_limit_bad_unit", kBase + "fanout:\n  worker_memory_limit: 2tb\n",
       "fanout.worker_memory_limit", 11, "(got \"2tb\")"},
      {"max_minibatches_negative", kBase + "fanout:\n  max_minibatches_per_worker: -1\n",
       "fanout.max_minibatches_per_worker", 11},
      {"size_parsecs", kBase + "mini_batch_size: \"10 parsecs\"\n", "mini_batch_size", 10,
       "(got \"10 parsecs\")"},
      {"size_zero", kBase + "mini_batch_size: \"0\"\n", "mini_batch_size", 10},
      {"size_negative_kb", kBase + "mini_batch_size: \"-1kb\"\n", "mini_batch_size", 10},
      {"size_empty", kBase + "mini_batch_size: \"\"\n", "mini_batch_size", 10},
      {"missing_input_folder", base_with(5, "    path: ./nope"), "inputs.data.path", 5,
       "which does not exist"},
      {"input_file_is_folder", base_with(4, "    type: uri_file"), "inputs.data.path", 5,
       "which is a folder"},
      {"mltable_without_meta", base_with(4, "    type: mltable"), "inputs.data.path", 5, "MLTable"},
      {"missing_entry_script", base_with(9, "  entry_script: missing.py"), "task.entry_script", 9,
       "missing.py"},
      {"missing_code_folder", base_with(8, "  code: ./nowhere"), "task.code", 8},
      {"missing_library", base_with(9, "  type: native\n  library: ./nope.so"), "task.library", 10},
      {"unknown_builtin_library", base_with(9, "  type: native\n  library: builtin:nope"),
       "task.library", 10, "builtin:noop"},
      {"azureml_input_path", base_with(5, "    path: azureml:images:1"), "inputs.data.path", 5,
       "not local"},
      {"remote_input_path", base_with(5, "    path: https://host/x"), "inputs.data.path", 5},
      {"unknown_input_reference", kBase + "  program_arguments: --x ${{inputs.nope}}\n",
       "task.program_arguments", 10, "${{inputs.nope}}"},
      {"unknown_output_reference", kBase + "  append_row_to: ${{outputs.nope}}\n",
       "task.append_row_to", 10, "${{outputs.nope}}"},
      {"output_without_path", with_outputs("  res:", "  append_row_to: ${{outputs.res}}\n"),
       "task.append_row_to", 12, "which has none"},
      {"unknown_reference_kind", kBase + "  program_arguments: ${{parent.inputs.x}}\n",
       "task.program_arguments", 10},
      {"unclosed_reference", kBase + "  program_arguments: ${{inputs.data\n",
       "task.program_arguments", 10},
      {"input_data_not_a_reference", base_with(6, "input_data: ./data"), "input_data", 6},
      {"input_data_unknown", base_with(6, "input_data: ${{inputs.nope}}"), "input_data", 6, "data"},
      {"input_data_literal",
       swap(base_with(2, "inputs:\n  k: 3"), "${{inputs.data}}", "${{inputs.k}}"), "input_data", 7,
       "of type literal"},
      {"missing_input_data", base_with(6, "#"), "input_data", 1},
      {"missing_task", kBase.substr(0, kBase.find("task:")), "task", 1},
      {"pipeline", base_with(1, "type: pipeline"), "type", 1, "pipelines are not supported yet"},
      {"missing_type", base_with(1, "name: x"), "type", 1},
      {"other_type", base_with(1, "type: command"), "type", 1, "\"parallel\""},
      {"unterminated_quote", kBase + "  program_arguments: --a 'b c\n", "task.program_arguments",
       10, "closing '"},
      {"system_flag_without_value", kBase + "  program_arguments: --x 1 --error_threshold\n",
       "task.program_arguments", 10, "--error_threshold"},
      {"system_flag_bad_value", kBase + "  program_arguments: --error_threshold=abc\n",
       "task.program_arguments: --error_threshold", 10, "(got \"abc\")"},
      {"entry_script_with_command_task", base_with(8, "  type: command\n  command: ls"),
       "task.entry_script", 10, "run_function"},
      {"command_task_without_command", base_with(9, "  type: command"), "task.command", 7},
      {"bad_task_type", base_with(8, "  type: spark\n  code: ./src"), "task.type", 8},
      {"duplicate_key", kBase + "error_threshold: 1\nerror_threshold: 2\n", "error_threshold", 11,
       "duplicate key (first at line 10)"},
      {"input_null", base_with(5, "    path: ./data\n  other:"), "inputs.other", 6},
      {"partition_keys_scalar", kBase + "partition_keys: a\n", "partition_keys", 10},
      {"inputs_not_mapping",
       "type: parallel\ninputs: [a]\ninput_data: ${{inputs.data}}\ntask:\n  entry_script: x.py\n",
       "inputs", 2, "expected a mapping"},
  };
  for (const auto& tc : cases) {
    CAPTURE(tc.name);
    CAPTURE(tc.yaml);
    ScratchDir t;
    make_tree(t);
    auto r = parse(t, tc.yaml);
    REQUIRE(!r.has_value());
    const std::string& msg = r.error().message;
    CAPTURE(msg);
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    std::string head = t.path("job.yaml");
    if (tc.line > 0) head += ":" + std::to_string(tc.line);
    head += ": ";
    CHECK(msg.starts_with(head));
    if (!tc.key.empty()) CHECK(msg.find(tc.key + ": ") != std::string::npos);
    if (!tc.also.empty()) CHECK(msg.find(tc.also) != std::string::npos);
  }
}

TEST_CASE("config.job_spec.rejects_non_mapping_documents") {
  ScratchDir t;
  for (const char* yaml : {"", "# only a comment\n", "- a\n- b\n", "just text\n",
                           "type: parallel\n---\ntype: parallel\n"}) {
    CAPTURE(yaml);
    auto r = parse(t, yaml);
    REQUIRE(!r.has_value());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message.starts_with(t.path("job.yaml")));
  }
}

TEST_CASE("config.job_spec.load_job_reads_relative_to_the_yaml_folder") {
  ScratchDir t;
  make_tree(t);
  t.write("job.yaml", kBase);
  auto r = fanout::config::load_job(t.path("job.yaml"));
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
  CHECK(r->inputs[0].path == t.path("data"));
  CHECK(r->code_dir == t.path("src"));
}

TEST_CASE("config.job_spec.messages_name_the_path_as_given") {
  ScratchDir t;
  make_tree(t);
  t.write("job.yaml", base_with(9, "  entry_script: gone.py"));
  const fs::path cwd = fs::current_path();
  fs::current_path(t.path());
  auto r = fanout::config::load_job("job.yaml");
  fs::current_path(cwd);
  REQUIRE(!r.has_value());
  CHECK(r.error().code == ErrorCode::InvalidArgument);
  CHECK(r.error().message.starts_with("job.yaml:9: task.entry_script: "));
  CHECK(r.error().message.find(t.path("src/gone.py")) != std::string::npos);
}

TEST_CASE("config.job_spec.load_job_missing_file_is_not_found") {
  ScratchDir t;
  auto r = fanout::config::load_job(t.path("absent.yaml"));
  REQUIRE(!r.has_value());
  CHECK(r.error().code == ErrorCode::NotFound);
  CHECK(r.error().message.find("absent.yaml") != std::string::npos);
}

TEST_CASE("config.job_spec.parse_batch_size_table") {
  using fanout::config::parse_batch_size;
  struct Good {
    const char* text;
    std::uint64_t files;
    std::uint64_t bytes;
  };
  for (const Good& g : std::vector<Good>{{"10", 10, 0},
                                         {" 7 ", 7, 0},
                                         {"1", 1, 0},
                                         {"10kb", 0, 10240},
                                         {"10KB", 0, 10240},
                                         {"10 kb", 0, 10240},
                                         {"1mb", 0, 1048576},
                                         {"1MB", 0, 1048576},
                                         {"1gb", 0, 1073741824},
                                         {"3Gb", 0, 3221225472ull}}) {
    CAPTURE(g.text);
    auto r = parse_batch_size(g.text);
    REQUIRE(r.has_value());
    CHECK(r->files == g.files);
    CHECK(r->bytes == g.bytes);
  }
  for (const char* bad : {"", "  ", "0", "0kb", "-1", "-1kb", "10 parsecs", "kb", "1.5mb", "10k",
                          "10 kb x", "+5", "99999999999999999999", "99999999999gb"}) {
    CAPTURE(bad);
    auto r = parse_batch_size(bad);
    REQUIRE(!r.has_value());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message.find("expected") != std::string::npos);
  }
}

TEST_CASE("config.job_spec.split_args_table") {
  using fanout::config::split_args;
  using V = std::vector<std::string>;
  struct Good {
    const char* text;
    V words;
  };
  for (const Good& g : std::vector<Good>{
           {"", V{}},
           {"   \t\n ", V{}},
           {"a b  c", V{"a", "b", "c"}},
           {"--x=1 --y 2", V{"--x=1", "--y", "2"}},
           {"'a b' \"c d\"", V{"a b", "c d"}},
           {"'' \"\"", V{"", ""}},
           {"a'b c'd", V{"ab cd"}},
           {R"("a \"q\" \\ \$ \n")", V{R"(a "q" \ $ \n)"}},
           {R"('no \escapes')", V{R"(no \escapes)"}},
           {R"(a\ b c\'d)", V{"a b", "c'd"}},
           {"a \\\n b", V{"a", "b"}},
           {"$HOME ~ *", V{"$HOME", "~", "*"}},
           {"trailing\\", V{"trailing\\"}},
       }) {
    CAPTURE(g.text);
    auto r = split_args(g.text);
    REQUIRE(r.has_value());
    CHECK(*r == g.words);
  }
  for (const char* bad : {"'open", "a \"open", "\"esc\\\"", "ok 'still open\n"}) {
    CAPTURE(bad);
    auto r = split_args(bad);
    REQUIRE(!r.has_value());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message.find("closing") != std::string::npos);
  }
}
