// What a job runs with (client/launch/run_settings.hpp): command-line overrides, the job spec the
// interchange receives, the settings recorded with the job, and the settings the embedded
// interchange and pools are started with for `fanout run` and `fanout resume`.
#include "client/launch/run_settings.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include "client/output/job_outputs.hpp"

using fanout::client::apply_overrides;
using fanout::client::job_spec;
using fanout::client::recorded_settings;
using fanout::client::resumed_settings;
using fanout::client::run_settings;
using fanout::client::RunOverrides;
using fanout::client::summary_output;
using fanout::client::workers_per_pool;
using fanout::config::JobConfig;

namespace {

JobConfig base() {
  JobConfig c;
  c.spec_path = "/jobs/job.yaml";
  c.name = "score";
  c.mini_batch_size = "2";
  c.instance_count = 2;
  c.max_concurrency_per_instance = 3;
  c.code_dir = "/jobs/src";
  c.entry_script = "score.py";
  c.input_data = "files";
  c.append_row_to = "/out/results.txt";
  c.user_args = {"--x", "1"};
  c.environment_variables = {{"B", "2"}, {"A", "1"}};
  c.logging_level = "WARNING";
  return c;
}

const std::uint32_t kCores = std::max(1u, std::thread::hardware_concurrency());

}  // namespace

TEST_CASE("client.run_settings.command_line_overrides_replace_the_job_files_values") {
  JobConfig c = base();
  RunOverrides ov;
  SUBCASE("unset overrides keep the job file's") {
    apply_overrides(c, ov);
    CHECK(c.fanout.python == "python3");
    CHECK(c.fanout.prefetch == 0);
    CHECK(c.fanout.poll_ms == 10);
    CHECK(c.instance_count == 2);
  }
  SUBCASE("set ones win") {
    ov.python = "/venv/bin/python";
    ov.workers = 5;
    ov.prefetch = 0;  // 0 is a value: -1 means unset
    ov.poll_ms = 1;
    ov.pools = 4;
    ov.db = "/tmp/x.db";
    ov.run_dir = "/tmp/runs";
    c.fanout.prefetch = 9;
    apply_overrides(c, ov);
    CHECK(c.fanout.python == "/venv/bin/python");
    CHECK(c.fanout.workers == 5);
    CHECK(c.fanout.prefetch == 0);
    CHECK(c.fanout.poll_ms == 1);
    CHECK(c.instance_count == 4);
    CHECK(c.fanout.db == "/tmp/x.db");
    CHECK(c.fanout.run_dir == "/tmp/runs");
  }
}

TEST_CASE("client.run_settings.workers_from_fanout_workers_then_max_concurrency_then_cores") {
  JobConfig c = base();
  CHECK(workers_per_pool(c) == 3);
  c.fanout.workers = 6;
  CHECK(workers_per_pool(c) == 6);
  c.fanout.workers = 0;
  c.max_concurrency_per_instance = 0;
  CHECK(workers_per_pool(c) == kCores);
}

TEST_CASE("client.run_settings.run_starts_pools_from_the_job_and_the_command_line") {
  JobConfig c = base();
  c.fanout.prefetch = 4;
  c.fanout.poll_ms = 3;
  c.fanout.heartbeat_period_ms = 100;
  c.fanout.heartbeat_threshold_ms = 900;
  c.fanout.python = "/venv/bin/python";  // the job spec's interpreter, not the pools' flag
  c.system_args = {{"resource_monitor_interval", "0.5"}};
  RunOverrides ov;
  auto rs = run_settings(c, ov);
  CHECK(rs.pools == 2);
  CHECK(rs.workers == 3);
  CHECK(rs.prefetch == 4);
  CHECK(rs.poll_ms == 3);
  CHECK(rs.heartbeat_period_ms == 100);
  CHECK(rs.heartbeat_threshold_ms == 900);
  CHECK(rs.log_level == "WARNING");  // logging_level unless fanout.log_level says otherwise
  CHECK(rs.python.empty());          // pools get --python only from the command line
  CHECK(rs.resource_monitor_interval_s == 0.5);
  CHECK(rs.window == 0);
  c.fanout.log_level = "debug";
  ov.python = "/usr/bin/python3.11";
  rs = run_settings(c, ov);
  CHECK(rs.log_level == "debug");
  CHECK(rs.python == "/usr/bin/python3.11");
  c.instance_count = 0;
  CHECK(run_settings(c, ov).pools == 1);
}

TEST_CASE("client.run_settings.pools_of_a_python_job_that_forks_start_a_warm_interpreter") {
  JobConfig c = base();
  c.task_type = "run_function";
  RunOverrides ov;
  CHECK(run_settings(c, ov).warm_python);
  c.fanout.worker_start = "spawn";
  CHECK_FALSE(run_settings(c, ov).warm_python);
  c.fanout.worker_start = "fork";
  c.fanout.launch.pool_command = "/opt/other/fanout-pool";  // may not know --warm-python
  CHECK_FALSE(run_settings(c, ov).warm_python);
  c.fanout.launch.pool_command.clear();
  c.task_type = "command";
  CHECK_FALSE(run_settings(c, ov).warm_python);
}

TEST_CASE("client.run_settings.job_spec_names_the_runtime_and_entry_of_each_task_type") {
  JobConfig c = base();
  auto spec = job_spec(c, "/runs/r/logs");
  CHECK(spec.runtime == "python");
  CHECK(spec.entry_script == "score.py");
  c.task_type = "command";
  c.command = "wc -l";
  spec = job_spec(c, "/runs/r/logs");
  CHECK(spec.runtime == "command");
  CHECK(spec.entry_script == "wc -l");
  c.task_type = "native";
  c.library = "/lib/libupper.so";
  spec = job_spec(c, "/runs/r/logs");
  CHECK(spec.runtime == "native");
  CHECK(spec.entry_script == "/lib/libupper.so");
}

TEST_CASE("client.run_settings.job_spec_carries_the_jobs_fields") {
  JobConfig c = base();
  c.max_retries = 2;
  c.timeout_s = 7.5;
  c.error_threshold = 4;
  c.mini_batch_error_threshold = 3;
  c.allowed_failed_percent = 10;
  c.task_overhead_timeout_s = 1;
  c.first_task_creation_timeout_s = 2;
  c.progress_update_timeout_s = 3;
  c.fanout.row_separator = ",";
  c.fanout.row_header = true;
  c.system_args = {{"resource_monitor_interval", "2"}, {"profiling_module", "cProfile"}};
  const auto spec = job_spec(c, "/runs/r/logs");
  CHECK(spec.name == "score");
  CHECK(spec.spec_path == "/jobs/job.yaml");
  CHECK(spec.code_dir == "/jobs/src");
  CHECK(spec.python == "python3");
  CHECK(spec.args == std::vector<std::string>{"--x", "1"});
  // The job's variables (sorted by name), then fanout's own, the profiler last.
  CHECK(spec.env == std::vector<std::string>{"A=1", "B=2", "FANOUT_ROW_SEP=,",
                                             "FANOUT_ROW_HEADER=1", "FANOUT_LOGGING_LEVEL=WARNING",
                                             "FANOUT_PROFILING_MODULE=cProfile"});
  CHECK(spec.output_path == "/out/results.txt");
  CHECK(spec.log_dir == "/runs/r/logs");
  CHECK(spec.max_tries == 3);  // max_retries + 1
  CHECK(spec.run_timeout_s == 7.5);
  CHECK(spec.error_threshold == 4);
  CHECK(spec.mini_batch_error_threshold == 3);
  CHECK(spec.allowed_failed_percent == 10);
  CHECK(spec.input_name == "files");
  CHECK(spec.task_overhead_timeout_s == 1);
  CHECK(spec.first_task_creation_timeout_s == 2);
  CHECK(spec.progress_update_timeout_s == 3);
  CHECK(spec.resource_monitor_interval_s == 2);
}

TEST_CASE("client.run_settings.the_recorded_settings_text_is_what_the_store_has_always_held") {
  JobConfig c = base();
  c.system_args = {{"resource_monitor_interval", "0.25"}, {"profiling_module", "cProfile"}};
  // The text settings_json() of client.cpp wrote before the record was typed.
  CHECK(job_spec(c, "/l").settings_json ==
        R"({"mini_batch_size":"2","instance_count":2,"max_concurrency_per_instance":3,)"
        R"("prefetch":0,"poll_ms":10,"heartbeat_period_ms":2000,"heartbeat_threshold_ms":10000,)"
        R"("max_retries":3,"timeout_s":60,"error_threshold":-1,"mini_batch_error_threshold":-1,)"
        R"("allowed_failed_percent":100,"logging_level":"WARNING","python":"python3",)"
        R"("task_type":"run_function","resource_monitor_interval":0.25,)"
        R"("profiling_module":"cProfile","priority":1})");
  CHECK(recorded_settings(c).max_concurrency_per_instance == 3);
}

TEST_CASE("client.run_settings.resume_starts_pools_as_recorded_unless_the_command_line_says") {
  JobConfig c = base();
  c.fanout.prefetch = 4;
  c.fanout.poll_ms = 3;
  c.fanout.python = "/venv/bin/python";
  c.system_args = {{"resource_monitor_interval", "0.5"}};
  const auto recorded = recorded_settings(c);
  auto rs = resumed_settings(recorded, 0, 0, "");
  CHECK(rs.pools == 2);
  CHECK(rs.workers == 3);
  CHECK(rs.prefetch == 4);
  CHECK(rs.poll_ms == 3);
  CHECK(rs.log_level == "WARNING");
  CHECK(rs.python == "/venv/bin/python");
  CHECK(rs.resource_monitor_interval_s == 0);  // the resumed pools serve every unfinished job
  rs = resumed_settings(recorded, 7, 5, "/usr/bin/python3");
  CHECK(rs.workers == 7);
  CHECK(rs.pools == 5);
  CHECK(rs.python == "/usr/bin/python3");
}

TEST_CASE("client.run_settings.memory_settings_reach_the_pools_on_run_and_on_resume") {
  JobConfig c = base();
  c.fanout.mem_per_worker_gib = 1.5;
  c.fanout.worker_memory_limit_bytes = 200ull * 1024 * 1024;
  c.fanout.max_minibatches_per_worker = 3;
  for (const auto& rs :
       {run_settings(c, RunOverrides{}), resumed_settings(recorded_settings(c), 0, 0, "")}) {
    CHECK(rs.mem_per_worker_gib == 1.5);
    CHECK(rs.worker_memory_limit_bytes == 200ull * 1024 * 1024);
    CHECK(rs.max_minibatches_per_worker == 3);
  }
}

TEST_CASE("client.run_settings.resume_of_a_job_with_no_recorded_settings_uses_the_defaults") {
  const fanout::store::JobSettings none;
  auto rs = resumed_settings(none, 0, 0, "");
  CHECK(rs.pools == 1);
  CHECK(rs.workers == kCores);
  CHECK(rs.prefetch == 0);
  CHECK(rs.poll_ms == 10);
  CHECK(rs.heartbeat_period_ms == 2000);
  CHECK(rs.heartbeat_threshold_ms == 10000);
  CHECK(rs.log_level == "INFO");
  CHECK(rs.python.empty());
  fanout::store::JobSettings zero_pools;
  zero_pools.instance_count = 0;
  zero_pools.logging_level.clear();
  rs = resumed_settings(zero_pools, 0, 0, "");
  CHECK(rs.pools == 1);
  CHECK(rs.log_level == "INFO");
}

// Without append_row_to, the entry script's output_dir is the declared folder output.
TEST_CASE("client.run_settings.output_dir_is_the_declared_folder_output") {
  JobConfig c = base();
  c.outputs = {{"scores", "uri_file", "/out/s.txt"}, {"res", "mltable", "/out/res"}};
  // With append_row_to, the pool derives it from the output file: nothing extra is sent.
  auto has_output_env = [](const fanout::proto::JobSpec& s) {
    return std::any_of(s.env.begin(), s.env.end(),
                       [](const std::string& e) { return e.starts_with("FANOUT_OUTPUT_DIR="); });
  };
  CHECK_FALSE(has_output_env(job_spec(c, "/runs/r/logs")));
  c.append_row_to.clear();
  const auto spec = job_spec(c, "/runs/r/logs");
  CHECK(std::count(spec.env.begin(), spec.env.end(), "FANOUT_OUTPUT_DIR=/out/res") == 1);
  // No folder output with a path: the pool's default (<run folder>/outputs).
  c.outputs = {{"scores", "uri_file", "/out/s.txt"}, {"res", "uri_folder", ""}};
  CHECK_FALSE(has_output_env(job_spec(c, "/runs/r/logs")));
}

// The summary's output line comes from what the store records, so `wait` and `resume` print
// what `run` printed: the append_row file, else the folder output recorded in the settings.
TEST_CASE("client.run_settings.the_summary_output_is_recorded_with_the_job") {
  JobConfig c = base();
  c.outputs = {{"res", "uri_folder", "/out/res"}};
  auto rec = recorded_settings(c);
  CHECK(rec.output_dir.empty());  // the append_row file is jobs.output_path
  CHECK(summary_output(job_spec(c, "/l").output_path, rec) == "/out/results.txt");
  c.append_row_to.clear();
  rec = recorded_settings(c);
  CHECK(rec.output_dir == "/out/res");
  CHECK(summary_output(job_spec(c, "/l").output_path, rec) == "/out/res");
  c.outputs.clear();
  CHECK(summary_output("", recorded_settings(c)).empty());
}

TEST_CASE("client.run_settings.a_local_job_without_a_count_lets_pools_count_from_their_devices") {
  // The pools a local job starts inherit this environment; with devices in it and no worker
  // count, each pool counts its workers from its devices instead of taking one per core.
  JobConfig c = base();
  c.max_concurrency_per_instance = 0;
  const char* saved = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string before = saved != nullptr ? saved : "";
  ::setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3", 1);
  CHECK(run_settings(c, {}).workers == 0);
  c.max_concurrency_per_instance = 2;  // a count given wins
  CHECK(run_settings(c, {}).workers == 2);
  c.max_concurrency_per_instance = 0;
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);  // set but empty: no devices
  CHECK(run_settings(c, {}).workers == kCores);
  c.fanout.placement.accelerator_kind = "rocm";
  ::setenv("ROCR_VISIBLE_DEVICES", "0", 1);
  CHECK(run_settings(c, {}).workers == 0);
  ::unsetenv("ROCR_VISIBLE_DEVICES");
  if (saved != nullptr) {
    ::setenv("CUDA_VISIBLE_DEVICES", before.c_str(), 1);
  } else {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
  }
}

TEST_CASE("client.run_settings.placement_settings_reach_the_pools_on_resume") {
  JobConfig c = base();
  c.max_concurrency_per_instance = 0;
  auto& p = c.fanout.placement;
  p.accelerators = "0,1";
  p.accelerator_kind = "rocm";
  p.workers_per_accelerator = 2;
  p.cores_per_worker = 1;
  p.cpu_affinity = "block";
  // Through the text the store holds, as `fanout resume` reads it.
  auto recorded =
      fanout::store::parse_settings_json(fanout::store::settings_json(recorded_settings(c)));
  REQUIRE(recorded);
  CHECK(recorded->max_concurrency_per_instance == 0);  // the pools counted their workers
  for (const auto& rs : {run_settings(c, RunOverrides{}), resumed_settings(*recorded, 0, 0, "")}) {
    CHECK(rs.workers == 0);  // each pool counts them again from its devices
    CHECK(rs.placement.accelerators == "0,1");
    CHECK(rs.placement.accelerator_kind == "rocm");
    CHECK(rs.placement.workers_per_accelerator == 2);
    CHECK(rs.placement.cores_per_worker == 1);
    CHECK(rs.placement.cpu_affinity == "block");
  }
  CHECK(resumed_settings(*recorded, 3, 0, "").workers == 3);  // the command line's count wins
  // A count given is recorded and resumed as before.
  c.max_concurrency_per_instance = 2;
  recorded = fanout::store::parse_settings_json(fanout::store::settings_json(recorded_settings(c)));
  REQUIRE(recorded);
  CHECK(recorded->max_concurrency_per_instance == 2);
  CHECK(resumed_settings(*recorded, 0, 0, "").workers == 2);
}

TEST_CASE("client.run_settings.an_adhoc_job_without_timeout_runs_and_is_recorded_with_none") {
  // `fanout run -c` has no run timeout unless --timeout N, as GNU parallel; what the pools get and
  // what jobs.settings records say so (0: none; the pool sets no deadline for it).
  JobConfig c = base();
  c.task_type = "command";
  c.timeout_s = 0;
  const auto spec = job_spec(c, "/l");
  CHECK(spec.run_timeout_s == 0);
  CHECK(spec.settings_json.find(R"("timeout_s":0,)") != std::string::npos);
  CHECK(recorded_settings(c).timeout_s == 0);
}
