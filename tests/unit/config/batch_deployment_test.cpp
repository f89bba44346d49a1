// Tests for batch deployment files (config/batch_deployment.hpp): an Azure ML batch deployment
// read as a parallel job over --input, its settings at the top or under `settings:`, a local
// model as AZUREML_MODEL_DIR, and mistakes named with the file, line and key.
#include "fanout/config/batch_deployment.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "fanout/util/fs.hpp"
#include "scratch_dir.hpp"

using fanout::ErrorCode;
using fanout::read_file;
using fanout::config::DeploymentRun;
using fanout::config::is_batch_deployment;
using fanout::config::JobConfig;
using fanout::config::lay_out_model_dir;
using fanout::config::load_batch_deployment;
using fanout::test::ScratchDir;

namespace {

const char* kDeployment =
    R"($schema: https://azuremlschemas.azureedge.net/latest/batchDeployment.schema.json
name: mnist-torch-dpl
endpoint_name: mnist-batch
type: model
description: A deployment using Torch to solve the MNIST classification dataset.
model:
  name: mnist-classifier-torch
  path: ./model
code_configuration:
  code: ./code
  scoring_script: batch_driver.py
environment:
  name: batch-torch-py38
  image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04:latest
compute: azureml:batch-cluster
resources:
  instance_count: 2
settings:
  max_concurrency_per_instance: 3
  mini_batch_size: 10
  output_action: append_row
  output_file_name: predictions.csv
  retry_settings:
    max_retries: 2
    timeout: 30
  error_threshold: -1
  logging_level: info
  environment_variables:
    MY_FLAG: "1"
)";

void make_tree(const ScratchDir& d) {
  d.write("dep/code/batch_driver.py", "def init():\n    pass\ndef run(b):\n    return b\n");
  d.write("dep/model/weights.pt", "w");
  d.write("data/a.png", "a");
  d.write("dep/deployment.yml", kDeployment);
}

}  // namespace

TEST_CASE("config.batch_deployment.reads_a_deployment_as_a_parallel_job") {
  ScratchDir d;
  make_tree(d);
  CHECK(is_batch_deployment(d.path("dep/deployment.yml")));
  auto c =
      load_batch_deployment(d.path("dep/deployment.yml"), DeploymentRun{"data", "out", d.path()});
  REQUIRE_MESSAGE(c.has_value(), (c ? "" : c.error().message));
  CHECK(c->name == "mnist-torch-dpl");
  CHECK(c->task_type == "run_function");
  CHECK(c->code_dir == d.path("dep/code"));
  CHECK(c->entry_script == "batch_driver.py");
  REQUIRE(c->inputs.size() == 1);
  CHECK(c->inputs[0].type == "uri_folder");
  CHECK(c->inputs[0].path == d.path("data"));
  CHECK(c->input_data == c->inputs[0].name);
  CHECK(c->instance_count == 2);
  CHECK(c->max_concurrency_per_instance == 3);
  CHECK(c->mini_batch_files == 10);
  CHECK(c->max_retries == 2);
  CHECK(c->timeout_s == 30);
  CHECK(c->error_threshold == -1);
  CHECK(c->logging_level == "INFO");
  CHECK(c->append_row_to == d.path("out/predictions.csv"));
  CHECK(c->environment_variables.at("MY_FLAG") == "1");
  CHECK(c->model_path == d.path("dep/model"));
  CHECK(c->environment_variables.count("AZUREML_MODEL_DIR") == 0);  // lay_out_model_dir's
  bool compute_noted = false;
  for (const auto& n : c->notices) compute_noted = compute_noted || n.starts_with("compute: ");
  CHECK(compute_noted);
}

TEST_CASE("config.batch_deployment.top_level_settings_summary_only_and_default_output") {
  ScratchDir d;
  make_tree(d);
  d.write("dep/old.yml", R"(name: old
endpoint_name: ep
model: azureml:mnist:1
code_configuration: {code: ./code, scoring_script: batch_driver.py}
mini_batch_size: 4
output_action: summary_only
)");
  auto c =
      load_batch_deployment(d.path("dep/old.yml"), DeploymentRun{d.path("data/a.png"), "", ""});
  REQUIRE_MESSAGE(c.has_value(), (c ? "" : c.error().message));
  CHECK(c->inputs[0].type == "uri_file");
  CHECK(c->mini_batch_files == 4);
  CHECK(c->append_row_to.empty());
  CHECK(c->outputs.at(0).path == d.path("dep/outputs/old"));
  CHECK(c->environment_variables.count("AZUREML_MODEL_DIR") == 0);
  CHECK(c->model_path.empty());
  CHECK(c->notices.at(0).starts_with("model: azureml:mnist:1 ignored"));
}

TEST_CASE("config.batch_deployment.model_dir_holds_the_model_under_its_own_name") {
  ScratchDir d;
  d.write("dep/model/weights.txt", "w\n");
  d.write("dep/clf.pkl", "p\n");
  JobConfig cfg;
  // A folder given with a trailing '/': the link is named after the folder.
  cfg.model_path = d.path("dep/model") + "/";
  auto dir = lay_out_model_dir(cfg, d.path("run/azureml-models"));
  REQUIRE_MESSAGE(dir.has_value(), (dir ? "" : dir.error().message));
  CHECK(*dir == d.path("run/azureml-models"));
  CHECK(read_file(*dir + "/model/weights.txt").value() == "w\n");
  // A model given as a file appears in the folder under the file's name.
  cfg.model_path = d.path("dep/clf.pkl");
  dir = lay_out_model_dir(cfg, d.path("run2/azureml-models"));
  REQUIRE(dir.has_value());
  CHECK(read_file(*dir + "/clf.pkl").value() == "p\n");
  // The user's own AZUREML_MODEL_DIR wins: nothing is made.
  cfg.environment_variables["AZUREML_MODEL_DIR"] = "/elsewhere";
  dir = lay_out_model_dir(cfg, d.path("run3/azureml-models"));
  REQUIRE(dir.has_value());
  CHECK(dir->empty());
  CHECK(!std::filesystem::exists(d.path("run3")));
}

TEST_CASE("config.batch_deployment.mistakes_name_the_file_line_and_key") {
  ScratchDir d;
  make_tree(d);
  struct Case {
    std::string yaml;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"endpoint_name: e\ncode_configuration: {code: ./code}\n",
       ":2: code_configuration.scoring_script: expected a Python file"},
      {"endpoint_name: e\ncode_configuration: {code: ./code, scoring_script: nope.py}\n",
       "task.entry_script: expected an existing file"},
      {"endpoint_name: e\ncode_configuration: {code: ./code, scoring_script: batch_driver.py}\n"
       "settings:\n  mini_batch_sise: 3\n",
       ":4: settings.mini_batch_sise: unknown key (did you mean mini_batch_size?)"},
      {"endpoint_name: e\ncode_configuration: {code: ./code, scoring_script: batch_driver.py}\n"
       "settings:\n  output_action: upload\n",
       ":4: settings.output_action: expected append_row or summary_only"},
      {"endpoint_name: e\ncode_configuration: {code: ./code, scoring_script: batch_driver.py}\n"
       "mini_batch_size: lots\n",
       ":3: mini_batch_size: expected a file count"},
      // A pipeline component deployment is refused for its type, not for its unknown keys.
      {"name: p\nendpoint_name: e\ntype: pipeline\ncomponent: azureml:hello_batch@latest\n"
       "settings:\n  default_compute: batch-cluster\n",
       ":3: type: fanout does not run pipeline component deployments (component: "
       "azureml:hello_batch@latest)"},
      {"endpoint_name: e\ntype: online\n", ":2: type: expected model or pipeline"},
  };
  for (const auto& tc : cases) {
    CAPTURE(tc.yaml);
    d.write("dep/bad.yml", tc.yaml);
    auto c = load_batch_deployment(d.path("dep/bad.yml"), DeploymentRun{"data", "", d.path()});
    REQUIRE(!c.has_value());
    CHECK(c.error().code == ErrorCode::InvalidArgument);
    CHECK_MESSAGE(c.error().message.find(tc.expect) != std::string::npos, c.error().message);
  }
  // No --input: named.
  auto none = load_batch_deployment(d.path("dep/deployment.yml"), DeploymentRun{"", "", d.path()});
  REQUIRE(!none.has_value());
  CHECK(none.error().message.find("--input") != std::string::npos);
  // A parallel job file is not a deployment.
  d.write("job.yaml", "type: parallel\ninput_data: ${{inputs.x}}\n");
  CHECK_FALSE(is_batch_deployment(d.path("job.yaml")));
}
