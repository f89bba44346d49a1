// Tests for jobs.settings, typed (src/fanout/store/job_settings.hpp): the JSON text the client
// records, reading it back with defaults for what is missing, and reading a job's settings from a
// store. docs/store.md, table jobs.
#include "fanout/store/job_settings.hpp"

#include <doctest/doctest.h>

#include <string>

#include "fanout/store/task_store.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/log.hpp"

#include "scratch_dir.hpp"

using fanout::ErrorCode;
using fanout::Failure;
using fanout::store::JobSettings;
using fanout::store::parse_settings_json;
using fanout::store::read_job_settings;
using fanout::store::settings_json;

namespace {

JobSettings sample() {
  JobSettings s;
  s.mini_batch_size = "10kb";
  s.instance_count = 2;
  s.max_concurrency_per_instance = 4;
  s.prefetch = 8;
  s.poll_ms = 5;
  s.heartbeat_period_ms = 1000;
  s.heartbeat_threshold_ms = 5000;
  s.max_retries = 1;
  s.timeout_s = 30;
  s.error_threshold = 7;
  s.mini_batch_error_threshold = -1;
  s.allowed_failed_percent = 12.5;
  s.logging_level = "DEBUG";
  s.python = "/usr/bin/python3";
  s.task_type = "run_function";
  s.resource_monitor_interval_s = 0.25;
  s.profiling_module = "cProfile";
  s.priority = 4;
  return s;
}

}  // namespace

TEST_CASE("store.job_settings.writes_every_key_in_order_and_whole_numbers_without_a_fraction") {
  CHECK(settings_json(sample()) ==
        R"({"mini_batch_size":"10kb","instance_count":2,"max_concurrency_per_instance":4,)"
        R"("prefetch":8,"poll_ms":5,"heartbeat_period_ms":1000,"heartbeat_threshold_ms":5000,)"
        R"("max_retries":1,"timeout_s":30,"error_threshold":7,"mini_batch_error_threshold":-1,)"
        R"("allowed_failed_percent":12.5,"logging_level":"DEBUG","python":"/usr/bin/python3",)"
        R"("task_type":"run_function","resource_monitor_interval":0.25,)"
        R"("profiling_module":"cProfile","priority":4})");
}

TEST_CASE("store.job_settings.quotes_strings_as_json") {
  JobSettings s;
  s.python = "C:\\py \"3\"\n";
  CHECK(settings_json(s).find(R"("python":"C:\\py \"3\"\n")") != std::string::npos);
}

TEST_CASE("store.job_settings.reads_back_what_it_writes") {
  const JobSettings s = sample();
  auto back = parse_settings_json(settings_json(s));
  REQUIRE(back);
  CHECK(back->mini_batch_size == s.mini_batch_size);
  CHECK(back->instance_count == s.instance_count);
  CHECK(back->max_concurrency_per_instance == s.max_concurrency_per_instance);
  CHECK(back->prefetch == s.prefetch);
  CHECK(back->poll_ms == s.poll_ms);
  CHECK(back->heartbeat_period_ms == s.heartbeat_period_ms);
  CHECK(back->heartbeat_threshold_ms == s.heartbeat_threshold_ms);
  CHECK(back->max_retries == s.max_retries);
  CHECK(back->timeout_s == s.timeout_s);
  CHECK(back->error_threshold == s.error_threshold);
  CHECK(back->mini_batch_error_threshold == s.mini_batch_error_threshold);
  CHECK(back->allowed_failed_percent == s.allowed_failed_percent);
  CHECK(back->logging_level == s.logging_level);
  CHECK(back->python == s.python);
  CHECK(back->task_type == s.task_type);
  CHECK(back->resource_monitor_interval_s == s.resource_monitor_interval_s);
  CHECK(back->profiling_module == s.profiling_module);
  CHECK(back->priority == 4);
}

TEST_CASE("store.job_settings.output_dir_is_written_only_when_set") {
  JobSettings s = sample();
  CHECK(settings_json(s).find("output_dir") == std::string::npos);
  s.output_dir = "/data/out/res";
  CHECK(settings_json(s).ends_with(R"("priority":4,"output_dir":"/data/out/res"})"));
  auto back = parse_settings_json(settings_json(s));
  REQUIRE(back);
  CHECK(back->output_dir == "/data/out/res");
}

TEST_CASE("store.job_settings.memory_settings_are_written_only_when_set_and_read_back") {
  JobSettings s = sample();
  const std::string plain = settings_json(s);
  CHECK(plain.find("mem_per_worker") == std::string::npos);
  CHECK(plain.find("worker_memory_limit") == std::string::npos);
  CHECK(plain.find("max_minibatches_per_worker") == std::string::npos);
  s.mem_per_worker_gib = 2.5;
  s.worker_memory_limit_bytes = 209715200;
  s.max_minibatches_per_worker = 3;
  CHECK(settings_json(s).ends_with(
      R"("priority":4,"mem_per_worker":2.5,"worker_memory_limit":209715200,)"
      R"("max_minibatches_per_worker":3})"));
  auto back = parse_settings_json(settings_json(s));
  REQUIRE(back);
  CHECK(back->mem_per_worker_gib == 2.5);
  CHECK(back->worker_memory_limit_bytes == 209715200);
  CHECK(back->max_minibatches_per_worker == 3);
}

TEST_CASE("store.job_settings.placement_settings_are_written_only_when_set_and_read_back") {
  JobSettings s = sample();
  const std::string plain = settings_json(s);
  for (const char* key : {"accelerators", "accelerator_kind", "workers_per_accelerator",
                          "cores_per_worker", "cpu_affinity"}) {
    CHECK(plain.find(key) == std::string::npos);
  }
  s.accelerators = "0,1";
  s.accelerator_kind = "rocm";
  s.workers_per_accelerator = 2;
  s.cores_per_worker = 3;
  s.cpu_affinity = "list:0-2:3-5";
  CHECK(settings_json(s).ends_with(
      R"("priority":4,"accelerators":"0,1","accelerator_kind":"rocm",)"
      R"("workers_per_accelerator":2,"cores_per_worker":3,"cpu_affinity":"list:0-2:3-5"})"));
  auto back = parse_settings_json(settings_json(s));
  REQUIRE(back);
  CHECK(back->accelerators == "0,1");
  CHECK(back->accelerator_kind == "rocm");
  CHECK(back->workers_per_accelerator == 2);
  CHECK(back->cores_per_worker == 3);
  CHECK(back->cpu_affinity == "list:0-2:3-5");
}

TEST_CASE("store.job_settings.missing_keys_and_keys_of_another_type_keep_the_defaults") {
  const JobSettings d;
  SUBCASE("an empty object") {
    auto s = parse_settings_json("{}");
    REQUIRE(s);
    CHECK(s->prefetch == d.prefetch);
    CHECK(s->poll_ms == d.poll_ms);
    CHECK(s->heartbeat_period_ms == d.heartbeat_period_ms);
    CHECK(s->heartbeat_threshold_ms == d.heartbeat_threshold_ms);
    CHECK(s->instance_count == d.instance_count);
    CHECK(s->max_concurrency_per_instance == 0);
    CHECK(s->logging_level == "INFO");
    CHECK(s->python.empty());
  }
  SUBCASE("wrong types, out of range, unknown keys") {
    auto s = parse_settings_json(
        R"({"prefetch":"8","poll_ms":-1,"instance_count":4294967296,"python":3,)"
        R"("timeout_s":"60","perf":true,"logging_level":null})");
    REQUIRE(s);
    CHECK(s->prefetch == d.prefetch);
    CHECK(s->poll_ms == d.poll_ms);
    CHECK(s->instance_count == d.instance_count);
    CHECK(s->python.empty());
    CHECK(s->timeout_s == d.timeout_s);
    CHECK(s->logging_level == "INFO");
  }
  SUBCASE("a whole number where a real is expected") {
    auto s = parse_settings_json(R"({"timeout_s":60,"allowed_failed_percent":5})");
    REQUIRE(s);
    CHECK(s->timeout_s == 60.0);
    CHECK(s->allowed_failed_percent == 5.0);
  }
}

TEST_CASE("store.job_settings.rejects_text_that_is_not_a_json_object") {
  for (const char* bad : {"", "[]", "{", "42", "null", "{\"a\":1}x"}) {
    CAPTURE(bad);
    auto s = parse_settings_json(bad);
    REQUIRE_FALSE(s);
    CHECK(s.error().code == ErrorCode::InvalidArgument);
    CHECK(s.error().message.find("settings") != std::string::npos);
  }
}

TEST_CASE("store.job_settings.reads_a_jobs_settings_from_the_store") {
  fanout::test::ScratchDir dir("job-settings");
  const std::string db = dir.path("fanout.db");
  {
    fanout::store::TaskStore store(db, fanout::make_logger("store-test", spdlog::level::off));
    fanout::proto::JobSpec spec;
    spec.name = "a";
    spec.settings_json = settings_json(sample());
    store.create_job(1, spec, 1.0);
    spec.settings_json.clear();  // stored as NULL
    store.create_job(2, spec, 2.0);
    spec.settings_json = "not json";
    store.create_job(3, spec, 3.0);
    store.flush();
  }
  auto one = read_job_settings(db, 1);
  REQUIRE(one);
  CHECK(one->instance_count == 2);
  CHECK(one->python == "/usr/bin/python3");
  auto two = read_job_settings(db, 2);
  REQUIRE(two);
  CHECK(two->poll_ms == JobSettings{}.poll_ms);
  CHECK_FALSE(read_job_settings(db, 9));
  try {
    (void)read_job_settings(db, 3);
    FAIL("no Failure for settings that are not JSON");
  } catch (const Failure& f) {
    CHECK(f.error().code == ErrorCode::InvalidArgument);
    CHECK(std::string(f.what()).find("job 3") != std::string::npos);
  }
}
