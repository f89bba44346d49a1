// ParallelRunStep compatibility, round 2, through the real binaries and real Python
// entry scripts: what the worker sees (output folders, output_dir, environment variables,
// PYTHONPATH), MLTable tables of files and mltable outputs, fresh append_row files, a bare
// --db NAME, and pipeline command steps run with --python.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "job_fixture.hpp"

using namespace fanout::test;
namespace fs = std::filesystem;

namespace {

// The summary's "  output: ..." line in `err`, "" when there is none.
std::string output_line(const std::string& err) {
  const auto at = err.find("\n  output: ");
  if (at == std::string::npos) return {};
  return err.substr(at + 1, err.find('\n', at + 1) - at - 1);
}

// `fanout run ARGS` with `dir` as the working folder.
RunResult run_in(const TempDir& dir, std::vector<std::string> args) {
  std::vector<std::string> argv = {"/bin/sh",  "-c",         "cd \"$0\" && exec \"$@\"",
                                   dir.path(), fanout_bin(), "run"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_capture(argv, dir.path());
}

// init() writes what the worker sees, without creating any folder: the declared output folder
// must exist already (item 3). run() records its items there too.
const char* kSeeScript = R"PY(
import json, os, sys
from azureml_user.parallel_run import EntryScript

def init():
    global args_out
    args_out = sys.argv[sys.argv.index("--out") + 1]
    es = EntryScript()
    import mylib  # from the job's PYTHONPATH (./lib)
    seen = {"env": {k: os.environ.get(k) for k in
                    ("MY_SETTING", "EMPTY", "SPACED", "AZUREML_MODEL_DIR", "PYTHONPATH")},
            "output_dir": es.output_dir, "bi_output": os.environ.get("AZUREML_BI_OUTPUT_PATH"),
            "mylib": mylib.WHO, "agent": es.agent_name}
    import fanout_runtime  # the shim's folder stays on the path after the job's entries
    with open(os.path.join(args_out, "seen-%d.json" % os.getpid()), "w") as f:
        json.dump(seen, f)

def run(mini_batch):
    import time
    time.sleep(0.5)  # long enough that both pools get mini-batches
    with open(os.path.join(args_out, "items-%d.txt" % os.getpid()), "a") as f:
        for p in mini_batch:
            f.write(os.path.basename(p) + "\n")
    return mini_batch
)PY";

}  // namespace

TEST_CASE("integration.compat2.the_worker_sees_the_declared_output_and_every_variable") {
  TempDir dir("compat2-see");
  make_files(dir / "data", 8);
  // A uri_folder holding an MLTable file: the MLTable is not an item (item 1).
  write_file(dir / "data/MLTable", "paths:\n  - pattern: ./*.txt\n");
  write_file(dir / "src/score.py", kSeeScript);
  write_file(dir / "lib/mylib.py", "WHO = 'the job lib'\n");
  write_file(dir / "job.yaml", R"(type: parallel
name: compat2-see
inputs:
  files: {type: uri_folder, path: ./data}
outputs:
  res: {type: uri_folder, path: ./out/res}
input_data: ${{inputs.files}}
mini_batch_size: "1"
max_concurrency_per_instance: 1
resources: {instance_count: 2}
environment_variables:
  MY_SETTING: "a=b;c 'd' $HOME"
  EMPTY:
  SPACED: "  two  spaces  "
  AZUREML_MODEL_DIR: ./models
  PYTHONPATH: ./lib
task:
  code: ./src
  entry_script: score.py
  program_arguments: --out ${{outputs.res}} --resource_monitor_interval 600
)");
  // A bare --db NAME (item 14): the store and runs/ beside it in the working folder.
  auto r = run_in(dir, {dir / "job.yaml", "--db", "rel.db", "--python", python_bin()});
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  CHECK(fs::exists(dir / "rel.db"));
  CHECK(fs::is_directory(dir / "runs"));
  // Item 15: a job far shorter than the monitor's period still has samples.
  CHECK(!files_ending(dir / "runs", ".csv").empty());
  bool perf = false;
  for (const auto& f : files_ending(dir / "runs", ".csv")) {
    perf = perf || f.find("/logs/sys/perf/") != std::string::npos;
  }
  CHECK(perf);
  // The summary says where the output is (item 4), and `wait` and `resume` on the ended job say
  // the same, from what the store records.
  CHECK(output_line(r.err) == "  output: " + (dir / "out/res"));
  for (const char* cmd : {"wait", "resume"}) {
    auto again = run_capture({fanout_bin(), cmd, "1", "--db", dir / "rel.db"}, dir.path());
    INFO(cmd << " stderr:\n" << again.err);
    CHECK(again.status.code == 0);
    CHECK(output_line(again.err) == output_line(r.err));
  }

  auto seen = files_ending(dir / "out/res", ".json");
  REQUIRE(!seen.empty());
  for (const auto& f : seen) {
    const std::string s = read_text(f);
    CAPTURE(s);
    // Items 3 and 4: the folder existed for init(), and output_dir is it.
    CHECK(s.find("\"output_dir\": \"" + (dir / "out/res") + "\"") != std::string::npos);
    CHECK(s.find("\"bi_output\": \"" + (dir / "out/res") + "\"") != std::string::npos);
    // Item 8: every variable exactly as given; the job's PYTHONPATH first (made absolute, item 7).
    CHECK(s.find(R"("MY_SETTING": "a=b;c 'd' $HOME")") != std::string::npos);
    CHECK(s.find(R"("EMPTY": "")") != std::string::npos);
    CHECK(s.find(R"("SPACED": "  two  spaces  ")") != std::string::npos);
    CHECK(s.find("\"PYTHONPATH\": \"" + (dir / "lib") + ":") != std::string::npos);
    CHECK(s.find(R"("mylib": "the job lib")") != std::string::npos);
    // Item 7: relative to the job file, not to task.code.
    CHECK(s.find("\"AZUREML_MODEL_DIR\": \"" + (dir / "models") + "\"") != std::string::npos);
  }
  CHECK(r.err.find("environment_variables.AZUREML_MODEL_DIR: ./models is " + (dir / "models")) !=
        std::string::npos);
  // Item 11: two pools on one node never share a worker name (nor its log files).
  std::set<std::string> agents;
  for (const auto& f : seen) {
    const std::string s = read_text(f);
    const auto at = s.find("\"agent\": \"");
    REQUIRE(at != std::string::npos);
    agents.insert(s.substr(at + 10, s.find('"', at + 10) - at - 10));
  }
  // One worker per pool, each ran init() once; the second pool gets work unless it took more
  // than the whole job (8 x 0.5 s) to register on a very busy machine.
  CHECK(seen.size() >= 1);
  CHECK(seen.size() <= 2);
  WARN(seen.size() == 2);
  CHECK(agents.size() == seen.size());
  std::multiset<std::string> items;
  for (const auto& f : files_ending(dir / "out/res", ".txt")) {
    for (const auto& l : read_lines(f)) items.insert(l);
  }
  std::multiset<std::string> expected;
  for (int i = 0; i < 8; ++i) expected.insert("file0000" + std::to_string(i) + ".txt");
  CHECK(items == expected);
}

TEST_CASE("integration.compat2.mltable_of_files_into_an_mltable_output_and_fresh_row_files") {
  TempDir dir("compat2-files");
  // Binary files: a table of files hands run() whole files, one per mini-batch with "1".
  for (int i = 0; i < 5; ++i) {
    std::string bytes(100 + i, '\0');
    bytes[0] = static_cast<char>(0x89);
    write_file(dir / ("images/img" + std::to_string(i) + ".png"), bytes);
  }
  write_file(dir / "images/MLTable", "paths:\n  - folder: ./\n");
  write_file(dir / "src/score.py", R"PY(
import os
def run(mini_batch):
    assert isinstance(mini_batch, list), type(mini_batch)
    return ["%s %d %d" % (os.path.basename(p), os.path.getsize(p), len(mini_batch))
            for p in mini_batch]
)PY");
  write_file(dir / "job.yaml", R"(type: parallel
name: compat2-files
inputs:
  images: {type: mltable, path: ./images}
outputs:
  table: {type: mltable, path: ./out/table}
input_data: ${{inputs.images}}
mini_batch_size: "1"
max_concurrency_per_instance: 2
task:
  code: ./src
  entry_script: score.py
  append_row_to: ${{outputs.table}}
)");
  const std::vector<std::string> args = {dir / "job.yaml", "--db",       dir / "store/fanout.db",
                                         "--python",       python_bin(), "--quiet"};
  auto r = run_in(dir, args);
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  const std::string rows_file = dir / "out/table/parallel_run_step.txt";
  auto lines = read_lines(rows_file);
  std::sort(lines.begin(), lines.end());
  CHECK(lines == std::vector<std::string>{"img0.png 100 1", "img1.png 101 1", "img2.png 102 1",
                                          "img3.png 103 1", "img4.png 104 1"});
  CHECK(sql_int(dir / "store/fanout.db", "SELECT count(*) FROM minibatches") == 5);
  // Item 2: the mltable output describes what was written.
  const std::string mltable = read_text(dir / "out/table/MLTable");
  CAPTURE(mltable);
  CHECK(mltable.find("file: './parallel_run_step.txt'") != std::string::npos);
  CHECK(mltable.find("read_delimited") != std::string::npos);
  CHECK(mltable.find("delimiter: ' '") != std::string::npos);

  // Item 5: a new job does not append to the earlier job's rows: refused, naming --overwrite...
  auto again = run_in(dir, args);
  CHECK(again.status.code == 2);
  CHECK(again.err.find("--overwrite") != std::string::npos);
  CHECK(again.err.find(rows_file) != std::string::npos);
  CHECK(read_lines(rows_file).size() == 5);
  // ... and with --overwrite the file holds this job's rows only.
  auto args_ow = args;
  args_ow.push_back("--overwrite");
  auto ow = run_in(dir, args_ow);
  INFO("stderr (overwrite):\n" << ow.err);
  REQUIRE(ow.status.code == 0);
  CHECK(read_lines(rows_file).size() == 5);
}

TEST_CASE("integration.compat2.pipeline_command_steps_use_the_python_of_the_run") {
  TempDir dir("compat2-pipe");
  // An interpreter that leaves a mark, so the test sees which one ran the command step.
  write_file(dir / "bin/mypython", "#!/bin/sh\necho used >> \"" + (dir / "marker") + "\"\nexec " +
                                       python_bin() + " \"$@\"\n");
  ::chmod((dir / "bin/mypython").c_str(), 0755);
  write_file(dir / "pipeline.yaml", R"Y(type: pipeline
name: compat2-pipe
jobs:
  prep:
    type: command
    outputs:
      made: {type: uri_folder}
    command: python -c "import sys; open(sys.argv[1] + '/ok', 'w').write('ok')" ${{outputs.made}}
)Y");
  auto r = run_in(dir, {dir / "pipeline.yaml", "--db", dir / "store/fanout.db", "--python",
                        dir / "bin/mypython", "--run-dir", dir / "runs"});
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  CHECK(read_text(dir / "marker") == "used\n");
  CHECK(files_ending(dir / "runs", "/ok").size() == 1);
}

TEST_CASE("integration.compat2.batch_deployment_runs_its_scoring_script_over_input") {
  TempDir dir("compat2-deploy");
  make_files(dir / "images", 5);
  write_file(dir / "deploy/model/label.txt", "cat\n");
  write_file(dir / "deploy/code/batch_driver.py", R"PY(
import os
def init():
    global label
    # AZUREML_MODEL_DIR holds the deployment's local model folder, as in Azure ML.
    with open(os.path.join(os.environ["AZUREML_MODEL_DIR"], "model", "label.txt")) as f:
        label = f.read().strip()
def run(mini_batch):
    return ["%s %s" % (os.path.basename(p), label) for p in mini_batch]
)PY");
  write_file(dir / "deploy/deployment.yml",
             R"($schema: https://azuremlschemas.azureedge.net/latest/batchDeployment.schema.json
name: classify-dpl
endpoint_name: classify
type: model
model:
  name: classifier
  path: ./model
code_configuration:
  code: ./code
  scoring_script: batch_driver.py
environment: azureml:AzureML-sklearn-1.0@latest
compute: azureml:batch-cluster
resources:
  instance_count: 1
settings:
  max_concurrency_per_instance: 2
  mini_batch_size: 2
  output_action: append_row
  output_file_name: predictions.csv
  retry_settings:
    max_retries: 1
    timeout: 60
  logging_level: info
)");
  auto r = run_in(dir, {dir / "deploy/deployment.yml", "--input", "images", "--output", "scores",
                        "--db", dir / "store/fanout.db", "--python", python_bin()});
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  auto lines = read_lines(dir / "scores/predictions.csv");
  std::sort(lines.begin(), lines.end());
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "file00000.txt cat");
  CHECK(lines[4] == "file00004.txt cat");
  CHECK(sql_int(dir / "store/fanout.db", "SELECT count(*) FROM minibatches") == 3);
  CHECK(r.err.find("compute: azureml:batch-cluster ignored") != std::string::npos);
  // --input belongs to deployments: a job file with it is refused, naming the flag.
  write_file(dir / "job.yaml", "type: parallel\n");
  auto wrong = run_in(dir, {dir / "job.yaml", "--input", "images"});
  CHECK(wrong.status.code == 2);
  CHECK(wrong.err.find("--input") != std::string::npos);
}
