// ParallelRunStep compatibility through the real binaries: entry scripts written for
// Azure ML run unchanged — argument parsing, EntryScript, mini_batch_context, tabular (MLTable)
// input with pandas, partition_keys — and bad tabular input fails before start with a located
// error. Tests needing pandas run the workers with /usr/bin/python3 (Debian's python3-pandas).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "job_fixture.hpp"

using namespace fanout::test;
namespace fs = std::filesystem;

namespace {

const char* kPandasPython = "/usr/bin/python3";

std::string all_text(const std::vector<std::string>& files) {
  std::string s;
  for (const auto& f : files) s += read_text(f);
  return s;
}

// `quiet`: --quiet, which also silences the note: lines.
RunResult run_job(const TempDir& dir, const std::string& job, const std::string& python,
                  const std::vector<std::string>& extra = {}, bool quiet = true) {
  std::vector<std::string> argv = {fanout_bin(), "run", dir / job, "--db", dir / "store/fanout.db",
                                   "--python",   python};
  if (quiet) argv.emplace_back("--quiet");
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_capture(argv, dir.path());
}

// A table of `rows` rows: id,group,value,note where some notes are quoted with a comma or a line
// break inside, so that a cut inside a quoted field would be seen.
std::string make_csv(int first, int rows, bool header) {
  std::ostringstream s;
  if (header) s << "id,group,value,note\n";
  for (int i = first; i < first + rows; ++i) {
    s << i << ",g" << (i % 3) << "," << (i % 97) << ",";
    if (i % 5 == 0) {
      s << "\"multi\nline, " << i << "\"";
    } else if (i % 7 == 0) {
      s << "\"comma, \"\"quoted\"\"\"";
    } else {
      s << "plain note for row " << i;
    }
    s << "\n";
  }
  return s.str();
}

}  // namespace

TEST_CASE("integration.compat.file_list_script_with_parse_known_args_and_entry_script") {
  TempDir dir("compat-args");
  make_files(dir / "data", 10);
  write_file(dir / "src/score.py", R"PY(
import argparse, json, os, sys
from azureml_user.parallel_run import EntryScript

def init():
    global args
    parser = argparse.ArgumentParser()
    parser.add_argument("--job_output_path", required=True)
    parser.add_argument("--threshold", type=float, default=0.0)
    args, unknown = parser.parse_known_args()
    es = EntryScript()
    es.logger.info("init: job_output_path=%s", args.job_output_path)
    print("hello from init on stdout")
    sys.stderr.write("hello from init on stderr\n")
    os.makedirs(args.job_output_path, exist_ok=True)
    info = {"argv": sys.argv[1:], "unknown": unknown, "threshold": args.threshold,
            "setting": os.environ.get("MY_SETTING"), "output_dir": es.output_dir,
            "bi_output": os.environ.get("AZUREML_BI_OUTPUT_PATH"),
            "output_dir_exists": os.path.isdir(es.output_dir),
            "working_dir": es.working_dir, "cwd": os.getcwd(), "agent_name": es.agent_name,
            "log_dir": es.log_dir}
    with open(os.path.join(args.job_output_path, es.agent_name + ".json"), "w") as f:
        json.dump(info, f)

def run(mini_batch):
    return [os.path.basename(p) + " " + str(args.threshold) for p in mini_batch]
)PY");
  write_file(dir / "job.yaml", R"(type: parallel
name: compat-args
inputs:
  files:
    type: uri_folder
    path: ./data
  threshold: 0.25
outputs:
  scores:
    type: uri_file
    path: ./out/scores.txt
  job_output:
    type: uri_folder
    path: ./out/job_output
input_data: ${{inputs.files}}
mini_batch_size: "3"
max_concurrency_per_instance: 2
environment_variables:
  MY_SETTING: hello
task:
  type: run_function
  code: ./src
  entry_script: score.py
  program_arguments: >-
    --error_threshold 5 --job_output_path ${{outputs.job_output}}
    --logging_level INFO --threshold ${{inputs.threshold}}
    --resource_monitor_interval 0 extra-word
  append_row_to: ${{outputs.scores}}
)");
  auto r = run_job(dir, "job.yaml", python_bin());
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  auto lines = read_lines(dir / "out/scores.txt");
  CHECK(lines.size() == 10);
  CHECK(std::count(lines.begin(), lines.end(), "file00003.txt 0.25") == 1);

  // Each worker that ran init() wrote what it saw.
  auto infos = files_ending(dir / "out/job_output", ".json");
  REQUIRE(!infos.empty());
  const std::string info = read_text(infos.front());
  INFO("info: " << info);
  const std::string out_path = dir / "out/job_output";
  // System flags consumed; the user's flags reach sys.argv in order.
  CHECK(info.find("\"argv\": [\"--job_output_path\", \"" + out_path +
                  "\", \"--threshold\", \"0.25\", \"extra-word\"]") != std::string::npos);
  CHECK(info.find("\"unknown\": [\"extra-word\"]") != std::string::npos);
  CHECK(info.find("\"setting\": \"hello\"") != std::string::npos);
  CHECK(info.find("\"output_dir\": \"" + dir.path() + "/out\"") != std::string::npos);
  CHECK(info.find("\"bi_output\": \"" + dir.path() + "/out\"") != std::string::npos);
  CHECK(info.find("\"output_dir_exists\": true") != std::string::npos);
  CHECK(info.find("\"working_dir\": \"" + dir.path() + "/src\"") != std::string::npos);
  CHECK(info.find("\"cwd\": \"" + dir.path() + "/src\"") != std::string::npos);
  CHECK(info.find("\"agent_name\": \"process00") != std::string::npos);

  // logs/: the EntryScript logger, and the workers' stdout and stderr, per node and process.
  const std::string db = dir / "store/fanout.db";
  const std::string log_dir = sql_column(db, "select log_dir from jobs")[0];
  CHECK(info.find("\"log_dir\": \"" + log_dir + "\"") != std::string::npos);
  auto logs = files_ending(log_dir + "/user/entry_script_log", ".log.txt");
  REQUIRE(!logs.empty());
  for (const auto& l : logs) {
    // logs/user/entry_script_log/<node>/<process>.log.txt
    CHECK(fs::path(l).parent_path().parent_path().filename() == "entry_script_log");
    CHECK(fs::path(l).filename().string().rfind("process00", 0) == 0);
  }
  CHECK(all_text(logs).find("init: job_output_path=" + out_path) != std::string::npos);
  auto outs = files_ending(log_dir + "/user/stdout", ".stdout.txt");
  auto errs = files_ending(log_dir + "/user/stderr", ".stderr.txt");
  CHECK(all_text(outs).find("hello from init on stdout") != std::string::npos);
  CHECK(all_text(errs).find("hello from init on stderr") != std::string::npos);
  REQUIRE(!outs.empty());
  CHECK(fs::path(outs.front()).parent_path().parent_path().filename() == "stdout");
}

TEST_CASE("integration.compat.two_argument_run_reads_partition_key_value_of_files") {
  TempDir dir("compat-pkv");
  // {user}/{season}/{genre}.wav: 3 users x 2 seasons x 2 genres = 6 partitions of 2 files.
  for (const char* user : {"ann", "bob", "cy"}) {
    for (const char* season : {"2020", "2021"}) {
      for (const char* genre : {"jazz", "rock"}) {
        write_file(dir / ("data/" + std::string(user) + "/" + season + "/" + genre + ".wav"), "x");
      }
    }
  }
  write_file(dir / "src/train.py", R"PY(
import os
def run(mini_batch, mini_batch_context):
    kv = mini_batch_context.partition_key_value
    return ["%s %s %s %s %d" % (kv["user"], kv["season"],
                                os.path.relpath(p, os.path.dirname(os.path.dirname(os.path.dirname(p)))),
                                mini_batch_context.dataset, mini_batch_context.minibatch_index)
            for p in mini_batch]
)PY");
  write_file(dir / "job.yaml", R"(type: parallel
name: compat-pkv
inputs:
  songs:
    type: uri_folder
    path: ./data
    partition_format: "{user}/{season}/{genre}.wav"
outputs:
  rows:
    type: uri_file
    path: ./out/rows.txt
input_data: ${{inputs.songs}}
partition_keys: [user, season]
max_concurrency_per_instance: 2
task:
  type: run_function
  code: ./src
  entry_script: train.py
  append_row_to: ${{outputs.rows}}
)");
  auto r = run_job(dir, "job.yaml", python_bin());
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  auto lines = read_lines(dir / "out/rows.txt");
  REQUIRE(lines.size() == 12);
  std::set<std::string> indexes;
  for (const auto& l : lines) {
    std::istringstream in(l);
    std::string user, season, rel, dataset, index;
    in >> user >> season >> rel >> dataset >> index;
    CAPTURE(l);
    CHECK(rel.rfind(user + "/" + season + "/", 0) == 0);  // the file belongs to its partition
    CHECK(dataset == "songs");
    indexes.insert(index);
  }
  CHECK(indexes.size() == 6);
  const std::string db = dir / "store/fanout.db";
  CHECK(sql_int(db, "select count(*) from minibatches") == 6);
  CHECK(sql_int(db, "select max(items) from minibatches") == 2);
}

TEST_CASE("integration.compat.tabular_mltable_dataframe_in_dataframe_out") {
  TempDir dir("compat-tab");
  // Two files under data/, read through a pattern; 1500 rows, ~70 KiB, cut at 10 KiB.
  write_file(dir / "data/part-0.csv", make_csv(0, 800, true));
  write_file(dir / "data/part-1.csv", make_csv(800, 700, true));
  write_file(dir / "data/README.txt", "not part of the table\n");
  write_file(dir / "data/MLTable", R"(type: mltable
paths:
  - pattern: ./*.csv
transformations:
  - read_delimited:
      delimiter: ","
      encoding: utf8
      header: all_files_same_headers
  - drop_columns: [note]
)");
  write_file(dir / "src/score.py", R"PY(
import argparse
import pandas as pd

def init():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--scale", type=int, required=True)
    args, _ = p.parse_known_args()

def run(mini_batch, mini_batch_context):
    assert isinstance(mini_batch, pd.DataFrame), type(mini_batch)
    assert list(mini_batch.columns) == ["id", "group", "value"], list(mini_batch.columns)
    return pd.DataFrame({"id": mini_batch["id"], "score": mini_batch["value"] * args.scale,
                         "offset": mini_batch_context.global_row_offset})
)PY");
  write_file(dir / "src/parallel_run_step.settings.json",
             "{\"append_row_separator\": \",\", \"append_row_header\": false}\n");
  write_file(dir / "job.yaml", R"(type: parallel
name: compat-tabular
inputs:
  table:
    type: mltable
    path: ./data
outputs:
  scores:
    type: uri_file
    path: ./out/scores.csv
input_data: ${{inputs.table}}
mini_batch_size: "10kb"
max_concurrency_per_instance: 2
error_threshold: 0
task:
  type: run_function
  code: ./src
  entry_script: score.py
  program_arguments: --allowed_failed_percent 0 --scale 3 --progress_update_timeout 60
  append_row_to: ${{outputs.scores}}
)");
  auto r = run_job(dir, "job.yaml", kPandasPython);
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  auto lines = read_lines(dir / "out/scores.csv");
  REQUIRE(lines.size() == 1500);
  std::set<int> ids;
  for (const auto& l : lines) {
    CAPTURE(l);
    const auto c1 = l.find(',');
    const auto c2 = l.find(',', c1 + 1);
    REQUIRE(c2 != std::string::npos);
    const int id = std::stoi(l.substr(0, c1));
    CHECK(std::stoi(l.substr(c1 + 1, c2 - c1 - 1)) == (id % 97) * 3);
    ids.insert(id);
  }
  CHECK(ids.size() == 1500);
  CHECK(*ids.begin() == 0);
  CHECK(*ids.rbegin() == 1499);
  const std::string db = dir / "store/fanout.db";
  CHECK(sql_int(db, "select sum(items) from minibatches") == 1500);
  CHECK(sql_int(db, "select count(*) from minibatches") >= 6);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") ==
        sql_int(db, "select count(*) from minibatches"));
  // Every mini-batch's byte range is at most 10 KiB and within one file.
  CHECK(sql_int(db,
                "select count(*) from minibatch_inputs i, json_each(i.detail, '$.parts') p "
                "where json_extract(p.value, '$.end') - json_extract(p.value, '$.begin') > "
                "10240") == 0);
  CHECK(sql_int(db, "select max(json_array_length(i.detail, '$.parts')) from minibatch_inputs i") ==
        1);
}

TEST_CASE("integration.compat.partition_keys_training_returning_nothing_succeeds") {
  TempDir dir("compat-train");
  write_file(dir / "data/a.csv", make_csv(0, 300, true));
  write_file(dir / "data/b.csv", make_csv(300, 200, true));
  write_file(dir / "data/README.txt", "not rows: a folder is read as its *.csv files\n");
  write_file(dir / "src/train.py", R"PY(
import os
from azureml_user.parallel_run import EntryScript

def run(mini_batch, mini_batch_context):
    group = mini_batch_context.partition_key_value["group"]
    assert set(mini_batch["group"]) == {group}, set(mini_batch["group"])
    out = os.path.join(EntryScript().output_dir, "model-%s.txt" % group)
    with open(out, "w") as f:
        f.write("%d %d\n" % (len(mini_batch), int(mini_batch["id"].sum())))
    return []
)PY");
  write_file(dir / "job.yaml", R"(type: parallel
name: compat-train
inputs:
  table:
    type: uri_folder
    path: ./data
outputs:
  models:
    type: uri_folder
    path: ./out/models
input_data: ${{inputs.table}}
partition_keys:
  - group
mini_batch_size: "1kb"
error_threshold: -1
task:
  type: run_function
  code: ./src
  entry_script: train.py
  program_arguments: --output_dir ${{outputs.models}}
)");
  auto r = run_job(dir, "job.yaml", kPandasPython, {}, /*quiet=*/false);  // the notes
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  CHECK(r.err.find("partition_keys") != std::string::npos);  // the mini_batch_size warning
  const std::string db = dir / "store/fanout.db";
  CHECK(sql_int(db, "select count(*) from minibatches") == 3);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 3);
  CHECK(sql_int(db, "select sum(items) from minibatches") == 500);
  CHECK(sql_column(db, "select state from jobs")[0] == "succeeded");
  CHECK(sql_int(db, "select sum(failed) from attempts where status = 'RUN_DONE'") == 500);
  // Each partition saw exactly its rows: ids i with i % 3 == g. EntryScript().output_dir is the
  // declared folder output, as on Azure ML (it was the run folder's outputs/).
  const std::string out_dir = dir / "out/models";
  for (int g = 0; g < 3; ++g) {
    long long n = 0, sum = 0;
    for (int i = 0; i < 500; ++i) {
      if (i % 3 == g) {
        ++n;
        sum += i;
      }
    }
    CHECK(read_text(out_dir + "/model-g" + std::to_string(g) + ".txt") ==
          std::to_string(n) + " " + std::to_string(sum) + "\n");
  }
}

TEST_CASE("integration.compat.bad_tabular_input_fails_before_start") {
  struct Case {
    std::string name;
    std::string yaml_from, yaml_to;
    std::string mltable;
    std::vector<std::string> must_mention;
    std::string python;
  };
  const std::string good_mltable =
      "paths:\n  - file: ./t.csv\ntransformations:\n  - read_delimited:\n      header: "
      "all_files_same_headers\n";
  const std::string yaml = R"(type: parallel
name: bad-tabular
inputs:
  table:
    type: mltable
    path: ./data
input_data: ${{inputs.table}}
mini_batch_size: "10kb"
task:
  code: ./src
  entry_script: score.py
)";
  // An interpreter without pandas: Debian's, without its site packages. (One whose pandas is
  // found but broken is not refused here: the check looks pandas up without importing it, which
  // would cost every tabular run the import; such a job fails its first mini-batch instead.)
  TempDir nopandas("compat-nopandas");
  write_file(nopandas / "python", "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n");
  fs::permissions(nopandas / "python", fs::perms::owner_all);

  std::vector<Case> cases = {
      {"unknown input type",
       "type: mltable",
       "type: mltabel",
       good_mltable,
       {"job.yaml:5:", "inputs.table.type", "mltabel"},
       kPandasPython},
      {"malformed MLTable",
       "",
       "",
       "paths:\n  - file: ./t.csv\ntransformations:\n  - "
       "read_delimited:\n      header: sometimes\n",
       {"MLTable:5:", "read_delimited.header", "sometimes"},
       kPandasPython},
      {"MLTable that is not YAML",
       "",
       "",
       "paths: [file: ./t.csv\n",
       {"MLTable:", "YAML"},
       kPandasPython},
      {"partition key not a column",
       "mini_batch_size: \"10kb\"",
       "partition_keys: [group, colour]",
       good_mltable,
       {"job.yaml:8:", "partition_keys", "colour", "id, group, value, note"},
       kPandasPython},
      {"size in parsecs",
       "\"10kb\"",
       "\"10 parsecs\"",
       good_mltable,
       {"job.yaml:8:", "mini_batch_size", "10 parsecs"},
       kPandasPython},
      {"pattern matching nothing",
       "",
       "",
       "paths:\n  - pattern: ./*.parquet\n",
       {"MLTable:2:", "pattern", "*.parquet"},
       kPandasPython},
      {"interpreter without pandas",
       "",
       "",
       good_mltable,
       {"job.yaml", "pandas", "python"},
       nopandas / "python"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    TempDir dir("compat-bad");
    write_file(dir / "data/t.csv", make_csv(0, 20, true));
    write_file(dir / "data/MLTable", c.mltable);
    write_file(dir / "src/score.py", kPassThroughScript);
    std::string y = yaml;
    if (!c.yaml_from.empty()) y.replace(y.find(c.yaml_from), c.yaml_from.size(), c.yaml_to);
    write_file(dir / "job.yaml", y);
    auto r = run_job(dir, "job.yaml", c.python);
    INFO("stderr: " << r.err);
    CHECK(r.status.code == 2);
    CHECK(r.err.rfind("error: ", 0) == 0);
    for (const auto& m : c.must_mention) CHECK(r.err.find(m) != std::string::npos);
    CHECK(!fs::exists(dir / "store"));
  }
}

namespace {

const char* kPipelineYaml = R"(type: pipeline
display_name: compat-pipeline
settings:
  default_compute: azureml:cpu-cluster
inputs:
  rows: 1200
  scale: 3
outputs:
  scores:
    type: uri_file
    path: azureml://datastores/workspaceblobstore/paths/scores.txt
jobs:
  make:
    type: command
    code: ./prep
    command: /usr/bin/python3 make.py --rows ${{inputs.rows}} --out ${{outputs.table}}
    inputs:
      rows: ${{parent.inputs.rows}}
    outputs:
      table:
        type: mltable
  score:
    component: ./score_component.yml
    inputs:
      table: ${{parent.jobs.make.outputs.table}}
      scale: ${{parent.inputs.scale}}
    outputs:
      predictions: ${{parent.outputs.scores}}
)";

const char* kScoreComponent =
    R"($schema: https://azuremlschemas.azureedge.net/latest/parallelComponent.schema.json
type: parallel
name: score
inputs:
  table:
    type: mltable
  scale:
    type: number
    default: 1
outputs:
  predictions:
    type: uri_file
input_data: ${{inputs.table}}
mini_batch_size: "10kb"
max_concurrency_per_instance: 2
error_threshold: 0
task:
  type: run_function
  code: ./src
  entry_script: score.py
  program_arguments: >-
    --error_threshold 0 --scale ${{inputs.scale}} --task_overhead_timeout 30
    --logging_level DEBUG --tag v1
  append_row_to: ${{outputs.predictions}}
)";

}  // namespace

TEST_CASE("integration.compat.pipeline_command_job_feeds_a_parallel_dataframe_job") {
  TempDir dir("compat-pipe");
  // The command job writes a table of the make_csv shape and its MLTable file.
  write_file(dir / "prep/make.py", R"PY(
import argparse, os
p = argparse.ArgumentParser()
p.add_argument("--rows", type=int, required=True)
p.add_argument("--out", required=True)
a = p.parse_args()
os.makedirs(a.out, exist_ok=True)
with open(os.path.join(a.out, "rows.csv"), "w") as f:
    f.write("id,group,value,note\n")
    for i in range(a.rows):
        note = '"multi\nline, %d"' % i if i % 5 == 0 else "plain"
        f.write("%d,g%d,%d,%s\n" % (i, i % 3, i % 97, note))
with open(os.path.join(a.out, "MLTable"), "w") as f:
    f.write("paths:\n  - file: ./rows.csv\ntransformations:\n  - read_delimited:\n"
            "      header: all_files_same_headers\n  - keep_columns: [id, value]\n")
)PY");
  write_file(dir / "src/score.py", R"PY(
import argparse, sys
import pandas as pd

def init():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--scale", type=int, required=True)
    p.add_argument("--tag", required=True)
    args, _ = p.parse_known_args()
    assert "--error_threshold" not in sys.argv and "--logging_level" not in sys.argv, sys.argv

def run(mini_batch):
    assert list(mini_batch.columns) == ["id", "value"], list(mini_batch.columns)
    out = mini_batch.copy()
    out["value"] = out["value"] * args.scale
    out["tag"] = args.tag
    return out
)PY");
  write_file(dir / "score_component.yml", kScoreComponent);
  write_file(dir / "pipeline.yaml", kPipelineYaml);
  auto r = run_job(dir, "pipeline.yaml", kPandasPython, {}, /*quiet=*/false);
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  // The azureml:// output maps to a file under the pipeline's run folder, printed once.
  CHECK(r.err.find("azureml://datastores/workspaceblobstore/paths/scores.txt is written to") !=
        std::string::npos);
  CHECK(r.err.find("default_compute: azureml:cpu-cluster ignored") != std::string::npos);
  // It keeps the URI's file name: <run folder>/outputs/scores/scores.txt.
  auto outs = files_ending(dir / "store/runs", "/outputs/scores/scores.txt");
  REQUIRE(outs.size() == 1);
  auto lines = read_lines(outs.front());
  REQUIRE(lines.size() == 1200);
  std::set<int> ids;
  for (const auto& l : lines) {
    std::istringstream in(l);
    int id = -1, value = -1;
    std::string tag;
    in >> id >> value >> tag;
    CAPTURE(l);
    CHECK(value == (id % 97) * 3);
    CHECK(tag == "v1");
    ids.insert(id);
  }
  CHECK(ids.size() == 1200);
  // The command job's output has a folder of its own under the run folder.
  CHECK(files_ending(dir / "store/runs", "/make/table/MLTable").size() == 1);
  const std::string db = dir / "store/fanout.db";
  CHECK(sql_int(db, "select sum(items) from minibatches") == 1200);
  CHECK(sql_int(db, "select count(*) from minibatches") >= 3);
}

TEST_CASE("integration.compat.bad_pipeline_fails_before_start") {
  struct Case {
    std::string name, from, to;
    std::vector<std::string> must_mention;
  };
  std::vector<Case> cases = {
      {"unknown job",
       "${{parent.jobs.make.outputs.table}}",
       "${{parent.jobs.mak.outputs.table}}",
       {"pipeline.yaml:25:", "jobs.score.inputs", "\"mak\""}},
      {"unknown output",
       "${{parent.jobs.make.outputs.table}}",
       "${{parent.jobs.make.outputs.tabel}}",
       {"pipeline.yaml:25:", "tabel", "table"}},
      {"unknown pipeline input",
       "${{parent.inputs.scale}}",
       "${{parent.inputs.scal}}",
       {"pipeline.yaml:26:", "jobs.score.inputs.scale", "scal"}},
      {"cycle",
       "      rows: ${{parent.inputs.rows}}",
       "      rows: ${{parent.jobs.score.outputs.predictions}}",
       {"pipeline.yaml:", "cycle"}},
      {"missing component",
       "./score_component.yml",
       "./nope.yml",
       {"pipeline.yaml:23:", "jobs.score.component", "nope.yml"}},
      {"unknown job type",
       "    type: command",
       "    type: sweep",
       {"pipeline.yaml:14:", "jobs.make.type", "sweep"}},
      {"unknown command reference",
       "${{outputs.table}}",
       "${{outputs.tables}}",
       {"pipeline.yaml:16:", "jobs.make.command", "outputs.tables"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    TempDir dir("compat-badpipe");
    write_file(dir / "prep/make.py", "print('should not run')\n");
    write_file(dir / "src/score.py", kPassThroughScript);
    write_file(dir / "score_component.yml", kScoreComponent);
    std::string y = kPipelineYaml;
    REQUIRE(y.find(c.from) != std::string::npos);
    y.replace(y.find(c.from), c.from.size(), c.to);
    write_file(dir / "pipeline.yaml", y);
    auto r = run_job(dir, "pipeline.yaml", kPandasPython);
    INFO("stderr: " << r.err);
    CHECK(r.status.code == 2);
    CHECK(r.err.rfind("error: ", 0) == 0);
    for (const auto& m : c.must_mention) CHECK(r.err.find(m) != std::string::npos);
    CHECK(r.err.find("should not run") == std::string::npos);
    CHECK(!fs::exists(dir / "store"));
  }
}

TEST_CASE("integration.compat.output_semantics_summary_only_short_results_and_none") {
  TempDir dir("compat-out");
  make_files(dir / "data", 12);
  // Mini-batches of 4: the one holding file00004 returns None (a failed attempt naming the
  // script); the others return one row fewer than their items (failed items, not failures).
  write_file(dir / "src/score.py", R"PY(
import os
def run(mini_batch):
    if any("file00004" in p for p in mini_batch):
        return None
    return [os.path.basename(p) for p in mini_batch[1:]]
)PY");
  const std::string yaml = R"(type: parallel
name: compat-out
inputs:
  files:
    type: uri_folder
    path: ./data
input_data: ${{inputs.files}}
mini_batch_size: "4"
retry_settings:
  max_retries: 0
task:
  type: run_function
  code: ./src
  entry_script: score.py
)";
  write_file(dir / "job.yaml", yaml);
  auto r = run_job(dir, "job.yaml", python_bin());
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 4);  // thresholds are -1 (ignored): partial
  const std::string db = dir / "store/fanout.db";
  // summary_only: no append_row output anywhere under the run folder.
  CHECK(files_ending(dir / "store/runs", "parallel_run_step.txt").empty());
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 2);
  CHECK(sql_int(db, "select count(*) from minibatches where state='failed'") == 1);
  CHECK(sql_int(db, "select sum(succeeded) from attempts where status='RUN_DONE'") == 6);
  CHECK(sql_int(db, "select sum(failed) from attempts where status='RUN_DONE'") == 2);
  auto msg = sql_column(db, "select error_message from attempts where status != 'RUN_DONE'");
  REQUIRE(msg.size() == 1);
  CHECK(msg[0].find("score.py") != std::string::npos);
  CHECK(msg[0].find("None") != std::string::npos);

  // append_row with a uri_folder output: parallel_run_step.txt in it, rows as str(x).
  write_file(dir / "job2.yaml",
             yaml +
                 "  append_row_to: ${{outputs.rows}}\noutputs:\n  rows:\n    type: uri_folder\n"
                 "    path: ./out\n");
  auto r2 = run_job(dir, "job2.yaml", python_bin());
  INFO("stderr:\n" << r2.err);
  REQUIRE(r2.status.code == 4);  // partial, as above
  CHECK(read_lines(dir / "out/parallel_run_step.txt").size() == 6);
}

TEST_CASE("integration.compat.mltable_header_modes_and_column_steps") {
  // Each case: MLTable text, files, and the columns and row count run() must see in total.
  struct Case {
    std::string name, mltable;
    std::vector<std::pair<std::string, std::string>> files;
    std::string columns;  // repr of the first mini-batch's columns
    int rows;
  };
  const std::vector<Case> cases = {
      {"no_header",
       "paths:\n  - file: ./a.csv\ntransformations:\n  - read_delimited:\n"
       "      header: no_header\n",
       {{"a.csv", "1,x\n2,y\n3,z\n"}},
       "['Column1', 'Column2']",
       3},
      {"from_first_file",
       "paths:\n  - folder: ./d\ntransformations:\n  - read_delimited:\n      header: "
       "from_first_file\n",
       {{"d/1.csv", "k,v\n1,a\n"}, {"d/2.csv", "2,b\n3,c\n"}},
       "['k', 'v']",
       3},
      {"all_files_different_headers with a path column",
       "paths:\n  - pattern: ./d/*.csv\ntransformations:\n  - read_delimited:\n      header: "
       "all_files_different_headers\n      include_path_column: true\n",
       {{"d/1.csv", "k,v\n1,a\n"}, {"d/2.csv", "x,y,z\n2,b,c\n"}},
       "['k', 'v', 'Path']",
       2},
      {"tsv, latin1, partition columns, keep_columns",
       "paths:\n  - pattern: ./**/*.tsv\ntransformations:\n  - read_delimited:\n      "
       "delimiter: \"\\t\"\n      encoding: latin1\n  - extract_columns_from_partition_format: "
       "\"{year}/{city}.tsv\"\n  - keep_columns: [city, n, note, year]\n",
       {{"2023/Zurich.tsv", "n\tnote\n1\tcaf\xe9\n2\tb\n"}, {"2024/Bern.tsv", "n\tnote\n3\tc\n"}},
       "['city', 'n', 'note', 'year']",
       3},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    TempDir dir("compat-hdr");
    for (const auto& [f, text] : c.files) write_file(dir / ("data/" + f), text);
    write_file(dir / "data/MLTable", c.mltable);
    write_file(dir / "src/s.py", R"PY(
def run(mini_batch):
    return ["%r %d %r" % (list(mini_batch.columns), len(mini_batch), mini_batch.values.tolist())]
)PY");
    write_file(dir / "job.yaml", R"(type: parallel
inputs:
  t:
    type: mltable
    path: ./data
outputs:
  o:
    type: uri_file
    path: ./out.txt
input_data: ${{inputs.t}}
mini_batch_size: 1mb
task:
  code: ./src
  entry_script: s.py
  append_row_to: ${{outputs.o}}
)");
    auto r = run_job(dir, "job.yaml", kPandasPython);
    INFO("stderr:\n" << r.err);
    REQUIRE(r.status.code == 0);
    auto lines = read_lines(dir / "out.txt");
    INFO("output:\n" << read_text(dir / "out.txt"));
    REQUIRE(!lines.empty());
    int rows = 0;
    for (const auto& l : lines) {
      if (l.rfind(c.columns, 0) == 0) {
        rows += std::stoi(l.substr(c.columns.size() + 1));
      } else if (c.name.rfind("all_files_different", 0) == 0) {
        CHECK(l.rfind("['x', 'y', 'z', 'Path'] 1", 0) == 0);
        ++rows;
      } else {
        FAIL("unexpected columns: " << l);
      }
    }
    CHECK(rows == c.rows);
    if (c.name.rfind("tsv", 0) == 0) {
      CHECK(read_text(dir / "out.txt")
                .find("[['Zurich', 1, 'caf\xc3\xa9', '2023'], ['Zurich', 2, 'b', '2023']]") !=
            std::string::npos);
    }
  }
}

TEST_CASE("integration.compat.shipped_examples_run") {
  const std::string root = env_or("FANOUT_SOURCE_ROOT", "");
  REQUIRE_MESSAGE(!root.empty(), "FANOUT_SOURCE_ROOT is not set (tests/meson.build sets it)");
  struct Example {
    std::string folder, file;
    std::string output;  // relative to the copy; "" when the output lives under the run folder
    std::size_t rows;
  };
  const std::vector<Example> examples = {
      {"tabular-scoring", "job.yaml", "out/prices.txt", 2100},
      {"partitioned-training", "job.yaml", "", 0},
      {"pipeline", "pipeline.yaml", "", 3000},
  };
  for (const auto& e : examples) {
    CAPTURE(e.folder);
    TempDir dir("compat-example");
    fs::copy(root + "/docs/examples/" + e.folder, dir / "ex", fs::copy_options::recursive);
    fs::remove_all(dir / "ex/out");
    auto r = run_job(dir, "ex/" + e.file, kPandasPython);
    INFO("stderr:\n" << r.err);
    REQUIRE(r.status.code == 0);
    if (!e.output.empty()) CHECK(read_lines(dir / ("ex/" + e.output)).size() == e.rows);
    if (e.folder == "partitioned-training") {
      CHECK(files_ending(dir / "ex/out/models", ".json").size() == 6);
    }
    if (e.folder == "pipeline") {
      auto out = files_ending(dir / "store/runs", "/outputs/scores/parallel_run_step.txt");
      REQUIRE(out.size() == 1);
      CHECK(read_lines(out.front()).size() == e.rows);
    }
  }
}

TEST_CASE("integration.compat.windows1252_partition_keys_and_undefined_bytes") {
  // Windows1252 is not latin1. The key value sent with each partition is the
  // text the worker decodes (EUR sign, not U+0080), so no partition's rows are dropped; a byte
  // windows1252 does not define is an error naming file and row, not a silent drop.
  TempDir dir("compat-cp1252");
  const std::string mltable =
      "paths:\n  - file: ./t.csv\ntransformations:\n  - read_delimited:\n      header: "
      "all_files_same_headers\n      encoding: windows1252\n";
  write_file(dir / "data/MLTable", mltable);
  write_file(dir / "data/t.csv", "id,band,note\n1,\x80,a\n2,\x80,b\n3,low,c\n");
  write_file(dir / "src/score.py", R"PY(
def run(mini_batch, mini_batch_context):
    band = mini_batch_context.partition_key_value["band"]
    return ["%s:%d" % (band, len(mini_batch))]
)PY");
  const std::string yaml = R"(type: parallel
name: compat-cp1252
inputs:
  table:
    type: mltable
    path: ./data
outputs:
  rows:
    type: uri_file
    path: ./out/rows.txt
input_data: ${{inputs.table}}
partition_keys:
  - band
task:
  type: run_function
  code: ./src
  entry_script: score.py
  append_row_to: ${{outputs.rows}}
)";
  write_file(dir / "job.yaml", yaml);
  auto r = run_job(dir, "job.yaml", kPandasPython);
  INFO("stderr:\n" << r.err);
  CHECK(r.status.code == 0);
  auto rows = read_lines(dir / "out/rows.txt");
  std::sort(rows.begin(), rows.end());
  CHECK(rows == std::vector<std::string>{"low:1", "\xE2\x82\xAC:2"});

  // 0x81 is not a windows1252 character: a located error. (The earlier rows moved away: a new
  // job writes a fresh file.)
  fs::remove(dir / "out/rows.txt");
  write_file(dir / "data/t.csv", "id,band,note\n1,\x80,a\n2,low,b\n3,low,\x81x\n");
  auto bad = run_job(dir, "job.yaml", kPandasPython);
  INFO("stderr:\n" << bad.err);
  CHECK(bad.status.code != 0);
  CHECK(bad.err.find("t.csv: row 4: byte 0x81 at byte 7 is not valid windows1252") !=
        std::string::npos);
}
