// Tests for a worker's launch (pool/launch.hpp): the job's environment_variables reach the
// worker exactly as given and once each, and PYTHONPATH is merged instead of shadowed.
#include "pool/launch.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace fanout;
using namespace fanout::pool;

namespace {

proto::JobSpec python_spec() {
  proto::JobSpec spec;
  spec.runtime = "python";
  spec.code_dir = "/job/src";
  spec.entry_script = "score.py";
  spec.python = "python3";
  return spec;
}

LaunchContext context() {
  LaunchContext ctx;
  ctx.job_id = 7;
  ctx.node = "n1";
  ctx.process = "process001";
  ctx.shim_dir = "/usr/lib/fanout/python";
  return ctx;
}

// Each name once, or the test fails naming the repeated one.
std::map<std::string, std::string> unique_env(const WorkerLaunch& l) {
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : l.env) {
    INFO("variable " << k);
    CHECK(env.count(k) == 0);
    env[k] = v;
  }
  return env;
}

}  // namespace

TEST_CASE("pool.launch.job_variables_reach_the_worker_once_and_as_given") {
  auto spec = python_spec();
  spec.env = {"PYTHONPATH=/job/lib:/job/more", "MY_SETTING=a=b c",
              "EMPTY=", "FANOUT_OUTPUT_DIR=/job/out"};
  auto env = unique_env(make_launch(spec, context()));
  CHECK(env.at("MY_SETTING") == "a=b c");
  CHECK(env.at("EMPTY").empty());
  // A variable the pool also sets takes the job's value (how the client names the output folder).
  CHECK(env.at("FANOUT_OUTPUT_DIR") == "/job/out");
  // The job's PYTHONPATH comes first, then the shim's folder.
  const std::string pp = env.at("PYTHONPATH");
  CHECK(pp.rfind("/job/lib:/job/more:/usr/lib/fanout/python", 0) == 0);
}

TEST_CASE("pool.launch.pythonpath_without_job_entries_is_the_shim_then_the_pool") {
  CHECK(merged_pythonpath("", "/shim", nullptr) == "/shim");
  CHECK(merged_pythonpath("", "/shim", "") == "/shim");
  CHECK(merged_pythonpath("", "/shim", "/pool") == "/shim:/pool");
  CHECK(merged_pythonpath("/a:/b", "/shim", "/pool") == "/a:/b:/shim:/pool");
  auto env = unique_env(make_launch(python_spec(), context()));
  CHECK(env.at("PYTHONPATH").rfind("/usr/lib/fanout/python", 0) == 0);
  CHECK(env.at("FANOUT_ENTRY_SCRIPT") == "/job/src/score.py");
}
