// Tests for pipeline files: wiring, order, default and azureml:// output paths, components, and
// near misses rejected with the file, line and key.
#include "fanout/config/pipeline.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "scratch_dir.hpp"

namespace fs = std::filesystem;
using fanout::ErrorCode;
using namespace fanout::config;

using fanout::test::ScratchDir;
using fanout::test::slurp;

namespace {

// The parallel job comes first in the file but depends on the command job.
const char* kPipeline = R"(type: pipeline
name: p
inputs:
  n: 5
  raw:
    type: uri_folder
    path: ./raw
outputs:
  final:
    type: uri_file
    path: azureml://datastores/x/paths/final.txt
jobs:
  score:
    type: parallel
    inputs:
      data: ${{parent.jobs.prep.outputs.clean}}
      n: ${{parent.inputs.n}}
    outputs:
      rows: ${{parent.outputs.final}}
    input_data: ${{inputs.data}}
    mini_batch_size: "2"
    task:
      code: ./src
      entry_script: score.py
      program_arguments: --n ${{inputs.n}}
      append_row_to: ${{outputs.rows}}
  prep:
    component: ./prep.yml
    inputs:
      src: ${{parent.inputs.raw}}
)";

const char* kPrep = R"(type: command
inputs:
  src:
    type: uri_folder
  level:
    type: integer
    default: 3
outputs:
  clean:
    type: uri_folder
code: ./code
command: ./clean.sh ${{inputs.src}} ${{outputs.clean}} ${{inputs.level}}
environment_variables:
  MODE: fast
)";

}  // namespace

TEST_CASE("config.pipeline.wiring_order_and_paths") {
  ScratchDir d;
  d.write("pipeline.yaml", kPipeline);
  d.write("comp/prep.yml", kPrep);
  d.write("comp/code/clean.sh", "true\n");
  std::string p = kPipeline;
  p.replace(p.find("./prep.yml"), 10, "./comp/prep.yml");
  d.write("pipeline.yaml", p);
  auto pl = load_pipeline(d.path("pipeline.yaml"), d.path("run"));
  REQUIRE_MESSAGE(pl.has_value(), pl.error().message);
  REQUIRE(pl->steps.size() == 2);
  const auto& prep = pl->steps[0];
  const auto& score = pl->steps[1];
  CHECK(prep.name == "prep");
  CHECK(score.name == "score");
  CHECK(score.after == std::vector<std::string>{"prep"});
  CHECK(prep.type == "command");
  CHECK(prep.cwd == d.path("comp/code"));
  CHECK(prep.outputs.at("clean").value == d.path("run") + "/prep/clean");
  CHECK(prep.command == "./clean.sh " + d.path("raw") + " " + d.path("run") + "/prep/clean 3");
  CHECK(prep.environment_variables.at("MODE") == "fast");
  // The parallel job reads the command job's output; its output is the pipeline's, mapped.
  CHECK(score.job.inputs.size() == 2);
  CHECK(score.job.input_data == "data");
  CHECK(score.job.user_args == std::vector<std::string>{"--n", "5"});
  // A uri_file output keeps the azureml:// URI's file name.
  CHECK(score.job.append_row_to == d.path("run") + "/outputs/final/final.txt");
  CHECK(pl->outputs.at("final").value == d.path("run") + "/outputs/final/final.txt");
  REQUIRE(!pl->notices.empty());
  CHECK(pl->notices[0].find("azureml://datastores/x/paths/final.txt is written to") !=
        std::string::npos);
  // The input does not exist yet: checked when its turn comes.
  auto chk = check_step_files(score);
  REQUIRE(!chk.has_value());
  CHECK(chk.error().message.find("jobs.score: inputs.data") != std::string::npos);
}

TEST_CASE("config.pipeline.rejects_near_misses") {
  struct Case {
    std::string from;
    std::string to;
    std::string must;  // "<file>:<line>: <key>"
  };
  const std::vector<Case> cases = {
      {"prep.outputs.clean", "prep.outputs.dirty", "pipeline.yaml:16: jobs.score.inputs.data"},
      {"parent.jobs.prep", "parent.jobs.pre", "pipeline.yaml:16: jobs.score.inputs"},
      {"parent.inputs.n}}", "parent.inputs.m}}", "pipeline.yaml:17: jobs.score.inputs.n"},
      {"parent.outputs.final", "parent.outputs.last", "pipeline.yaml:19: jobs.score.outputs.rows"},
      {"    component: ./prep.yml", "    component: azureml:prep:1",
       "pipeline.yaml:28: jobs.prep.component"},
      {"    type: parallel", "    type: automl", "pipeline.yaml:14: jobs.score.type"},
      {"jobs:", "jbos:", "pipeline.yaml:12: jbos"},
      {"      src: ${{parent.inputs.raw}}", "      src: ${{parent.jobs.score.outputs.rows}}",
       "cycle among score, prep"},
      {"    mini_batch_size: \"2\"", "    mini_batch_size: \"2 parsecs\"",
       "pipeline.yaml:21: mini_batch_size"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.from);
    ScratchDir d;
    d.write("prep.yml", kPrep);
    d.write("code/clean.sh", "true\n");
    std::string p = kPipeline;
    REQUIRE(p.find(c.from) != std::string::npos);
    p.replace(p.find(c.from), c.from.size(), c.to);
    d.write("pipeline.yaml", p);
    const std::string cwd = fs::current_path().string();
    fs::current_path(d.path());
    auto pl = load_pipeline("pipeline.yaml", d.path("run"));
    fs::current_path(cwd);
    REQUIRE(!pl.has_value());
    CHECK(pl.error().code == ErrorCode::InvalidArgument);
    CAPTURE(pl.error().message);
    CHECK(pl.error().message.find(c.must) != std::string::npos);
  }
  SUBCASE("a command referring to an undefined output names the component file") {
    ScratchDir d;
    std::string prep = kPrep;
    prep.replace(prep.find("${{outputs.clean}}"), 18, "${{outputs.cleaned}}");
    d.write("prep.yml", prep);
    d.write("code/clean.sh", "true\n");
    d.write("pipeline.yaml", kPipeline);
    auto pl = load_pipeline(d.path("pipeline.yaml"), d.path("run"));
    REQUIRE(!pl.has_value());
    CHECK(pl.error().message.find("./prep.yml:12: jobs.prep.command") != std::string::npos);
  }
}

TEST_CASE("config.pipeline.job_file_type") {
  ScratchDir d;
  d.write("a.yaml", "type: pipeline\njobs: {}\n");
  d.write("b.yaml", "type: parallel\n");
  d.write("c.yaml", "[unclosed\n");
  CHECK(*job_file_type(d.path("a.yaml")) == "pipeline");
  CHECK(*job_file_type(d.path("b.yaml")) == "parallel");
  CHECK(job_file_type(d.path("c.yaml"))->empty());
  CHECK(!job_file_type(d.path("nope.yaml")).has_value());
  // A pipeline component deployment is a deployment, not a pipeline job.
  d.write("dpl.yaml", "endpoint_name: e\ntype: pipeline\ncomponent: azureml:c@latest\n");
  CHECK(*job_file_type(d.path("dpl.yaml")) == "deployment");
}

// A command step starting with python runs with the pipeline's interpreter.
TEST_CASE("config.pipeline.with_interpreter") {
  CHECK(with_interpreter("python prep.py --n 3", "/venv/bin/python") ==
        "'/venv/bin/python' prep.py --n 3");
  CHECK(with_interpreter("  python3 -m mod", "/usr/bin/python3") == "  '/usr/bin/python3' -m mod");
  CHECK(with_interpreter("python", "/o'k/python") == "'/o'\\''k/python'");
  CHECK(with_interpreter("python;echo", "/p") == "'/p';echo");
  // Other commands, and no interpreter named, stay as written.
  CHECK(with_interpreter("pythonic prep.py", "/p") == "pythonic prep.py");
  CHECK(with_interpreter("./run.sh python", "/p") == "./run.sh python");
  CHECK(with_interpreter("python prep.py", "") == "python prep.py");
}
