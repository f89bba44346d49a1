// ParallelRunStep compatibility, round 3, through the real binaries and real Python entry
// scripts: AZUREML_MODEL_DIR as Azure ML lays it out (the model inside it under its own name),
// read_json_lines tables with invalid lines, the MLTable row and column steps compared with what
// pandas gives on the same data, and pipeline component deployments refused with the reason.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace fanout::test;
namespace fs = std::filesystem;

namespace {

const char* kPandasPython = "/usr/bin/python3";

// `fanout run ARGS` with `dir` as the working folder.
RunResult run_in(const TempDir& dir, std::vector<std::string> args) {
  std::vector<std::string> argv = {"/bin/sh",  "-c",         "cd \"$0\" && exec \"$@\"",
                                   dir.path(), fanout_bin(), "run"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_capture(argv, dir.path());
}

std::vector<std::string> sorted_lines(const std::string& path) {
  auto lines = read_lines(path);
  std::sort(lines.begin(), lines.end());
  return lines;
}

// A deployment of `model_yaml` scoring ./images with code/batch_driver.py.
std::string deployment_yaml(const std::string& model_yaml) {
  return "$schema: https://azuremlschemas.azureedge.net/latest/batchDeployment.schema.json\n"
         "name: idiom-dpl\nendpoint_name: idioms\ntype: model\n" +
         model_yaml +
         "code_configuration:\n  code: ./code\n  scoring_script: batch_driver.py\n"
         "environment: azureml:AzureML-sklearn-1.0@latest\ncompute: azureml:batch-cluster\n"
         "settings:\n  mini_batch_size: 2\n  output_action: append_row\n"
         "  output_file_name: predictions.csv\n";
}

// A CSV of `rows` rows: id, grp, amount (text that converts to a float), flag (yes/no), day.
std::string steps_csv(int rows) {
  std::ostringstream s;
  s << "id,grp,amount,flag,day\n";
  for (int i = 0; i < rows; ++i) {
    s << i << ",g" << (i % 4) << "," << (i * 7 % 50) << ".5," << (i % 3 == 0 ? "yes" : "no")
      << ",2024-01-" << (10 + i % 20) << "\n";
  }
  return s.str();
}

// run() writes each row as JSON with the dtypes it received, so the comparison with pandas sees
// both the values and the types.
const char* kRowsScript = R"PY(
import json
def init():
    pass
def run(mini_batch):
    dtypes = {c: str(t) for c, t in mini_batch.dtypes.items()}
    out = []
    for rec in mini_batch.to_dict(orient="records"):
        rec = {k: (str(v) if k == "day" else v) for k, v in rec.items()}
        out.append(json.dumps({"row": rec, "dtypes": dtypes}, sort_keys=True))
    return out
)PY";

const char* kTableJob = R"(type: parallel
name: steps
inputs:
  table:
    type: mltable
    path: ./data
outputs:
  rows:
    type: uri_file
    path: ./out/rows.txt
input_data: ${{inputs.table}}
mini_batch_size: "2kb"
max_concurrency_per_instance: 2
error_threshold: 0
task:
  type: run_function
  code: ./src
  entry_script: rows.py
  append_row_to: ${{outputs.rows}}
)";

// Runs the steps job over ./data (its MLTable written by the caller) and returns the sorted
// output lines; `err` gets stderr.
std::vector<std::string> run_steps(const TempDir& dir, std::string& err, int& status) {
  fs::remove_all(dir / "out");
  fs::remove_all(dir / "store");
  auto r = run_in(dir, {dir / "job.yaml", "--db", dir / "store/fanout.db", "--python",
                        kPandasPython, "--quiet"});
  err = r.err;
  status = r.status.code;
  return sorted_lines(dir / "out/rows.txt");
}

// The same rows by pandas itself: `code` turns df (the CSV read by pandas) into the expected
// DataFrame; the output has the shape of kRowsScript's, sorted.
std::vector<std::string> pandas_rows(const TempDir& dir, const std::string& code) {
  write_file(dir / "expect.py", std::string(R"PY(
import json, sys
import pandas as pd
df = pd.read_csv(sys.argv[1])
)PY") + code + R"PY(
dtypes = {c: str(t) for c, t in df.dtypes.items()}
with open(sys.argv[2], "w") as f:
    for rec in df.to_dict(orient="records"):
        rec = {k: (str(v) if k == "day" else v) for k, v in rec.items()}
        f.write(json.dumps({"row": rec, "dtypes": dtypes}, sort_keys=True) + "\n")
)PY");
  auto r = run_capture({kPandasPython, dir / "expect.py", dir / "data/t.csv", dir / "expect.txt"},
                       dir.path());
  INFO("expect.py:\n" << r.err);
  REQUIRE(r.status.code == 0);
  return sorted_lines(dir / "expect.txt");
}

}  // namespace

TEST_CASE("integration.compat3.model_dir_holds_the_model_under_its_own_name") {
  struct Idiom {
    const char* name;
    const char* model_yaml;
    const char* find_model;  // Python: where init() reads label.txt
  };
  const std::vector<Idiom> idioms = {
      {"join", "model:\n  name: clf\n  path: ./model\n",
       R"(os.path.join(os.environ["AZUREML_MODEL_DIR"], "model", "label.txt"))"},
      {"glob", "model:\n  name: clf\n  path: ./classifier-v2/\n",
       R"(os.path.join(glob.glob(os.environ["AZUREML_MODEL_DIR"] + "/*/")[0], "label.txt"))"},
      {"file", "model:\n  name: clf\n  path: ./label.txt\n",
       R"(os.path.join(os.environ["AZUREML_MODEL_DIR"], "label.txt"))"},
  };
  for (const auto& idiom : idioms) {
    CAPTURE(std::string(idiom.name));
    TempDir dir(std::string("compat3-model-") + idiom.name);
    make_files(dir / "images", 3);
    write_file(dir / "deploy/model/label.txt", "cat\n");
    write_file(dir / "deploy/classifier-v2/label.txt", "cat\n");
    write_file(dir / "deploy/label.txt", "cat\n");
    write_file(dir / "deploy/code/batch_driver.py",
               std::string("import glob, os\ndef init():\n    global label\n"
                           "    with open(") +
                   idiom.find_model +
                   ") as f:\n        label = f.read().strip()\n"
                   "def run(mini_batch):\n"
                   "    return [\"%s %s\" % (os.path.basename(p), label) for p in mini_batch]\n");
    write_file(dir / "deploy/deployment.yml", deployment_yaml(idiom.model_yaml));
    auto r = run_in(
        dir, {dir / "deploy/deployment.yml", "--input", "images", "--output", "scores", "--db",
              dir / "store/fanout.db", "--python", python_bin(), "--run-dir", dir / "runs"});
    INFO("stderr:\n" << r.err);
    REQUIRE(r.status.code == 0);
    auto lines = sorted_lines(dir / "scores/predictions.csv");
    REQUIRE(lines.size() == 3);
    CHECK(lines[0] == "file00000.txt cat");
    CHECK(lines[2] == "file00002.txt cat");
  }
}

TEST_CASE("integration.compat3.json_lines_with_a_bad_line_fail_or_drop_it") {
  TempDir dir("compat3-jsonl");
  std::string good, bad;
  for (int i = 0; i < 40; ++i) {
    good += "{\"id\": " + std::to_string(i) + ", \"text\": \"a \\\"quoted\\\" note, " +
            std::to_string(i) + "\"}\n";
  }
  write_file(dir / "data/a.jsonl", good);
  write_file(dir / "data/b.jsonl",
             "{\"id\": 100, \"text\": \"x\"}\n{\"id\": 101, oops\n\n"
             "[1, 2]\n{\"id\": 102, \"text\": \"y\"}\n");
  write_file(dir / "src/rows.py", R"PY(
def init():
    pass
def run(mini_batch):
    return ["%d|%s|%s" % (r.id, r.text, r.Path.rsplit("/", 1)[-1])
            for r in mini_batch.itertuples()]
)PY");
  // Small mini-batches (300 bytes): several per file, cut on line boundaries.
  std::string job = kTableJob;
  job.replace(job.find("\"2kb\""), 5, "\"300\"");
  write_file(dir / "job.yaml", job);
  const std::string mltable =
      "paths:\n  - pattern: ./*.jsonl\ntransformations:\n  - read_json_lines:\n"
      "      include_path_column: true\n      invalid_lines: ";
  SUBCASE("drop") {
    write_file(dir / "data/MLTable", mltable + "drop\n");
    std::string err;
    int status = 0;
    auto lines = run_steps(dir, err, status);
    INFO("stderr:\n" << err);
    REQUIRE(status == 0);
    REQUIRE(lines.size() == 42);
    CHECK(std::count(lines.begin(), lines.end(), "100|x|b.jsonl") == 1);
    CHECK(std::count(lines.begin(), lines.end(), "102|y|b.jsonl") == 1);
    CHECK(std::count(lines.begin(), lines.end(), "7|a \"quoted\" note, 7|a.jsonl") == 1);
    // Cut on line boundaries by size: more than one mini-batch, every line in one of them.
    CHECK(sql_int(dir / "store/fanout.db", "SELECT count(*) FROM minibatches") > 2);
  }
  SUBCASE("error") {
    write_file(dir / "data/MLTable", mltable + "error\n");
    std::string err;
    int status = 0;
    run_steps(dir, err, status);
    CHECK(status != 0);
    // The failure names the file and the line, in the job's logs or on stderr.
    std::string logs;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir.path(), ec), end; !ec && it != end;
         it.increment(ec)) {
      if (it->is_regular_file() && it->path().extension() != ".db") logs += read_text(it->path());
    }
    CHECK((err + logs).find("b.jsonl: line 2: not a JSON object") != std::string::npos);
  }
}

TEST_CASE("integration.compat3.mltable_steps_give_what_pandas_gives") {
  TempDir dir("compat3-steps");
  write_file(dir / "data/t.csv", steps_csv(500));
  write_file(dir / "src/rows.py", kRowsScript);
  write_file(dir / "job.yaml", kTableJob);
  const std::string head =
      "paths:\n  - file: ./t.csv\ntransformations:\n  - read_delimited:\n"
      "      header: all_files_same_headers\n";
  struct Case {
    const char* name;
    const char* steps;
    const char* pandas;
    std::size_t rows;
  };
  const std::vector<Case> cases = {
      {"take", "  - take: 100\n", "df = df.iloc[:100]\n", 100},
      {"skip then take", "  - skip: 450\n  - take: 100\n", "df = df.iloc[450:].iloc[:100]\n", 50},
      {"take then skip", "  - take: 100\n  - skip: 30\n", "df = df.iloc[:100].iloc[30:]\n", 70},
      {"convert_column_types",
       "  - convert_column_types:\n      - columns: amount\n        column_type: float\n"
       "      - columns: id\n        column_type: string\n"
       "      - columns: flag\n        column_type:\n          boolean:\n"
       "            true_values: [\"yes\"]\n            false_values: [\"no\"]\n"
       "      - columns: day\n        column_type:\n          datetime:\n"
       "            formats: [\"%Y-%m-%d\"]\n",
       "df['amount'] = df['amount'].astype('float64')\n"
       "df['id'] = df['id'].astype(str).astype(object)\n"
       "df['flag'] = df['flag'].map({'yes': True, 'no': False}).astype(bool)\n"
       "df['day'] = pd.to_datetime(df['day'], format='%Y-%m-%d')\n",
       500},
      {"filter", "  - take: 200\n  - filter: 'col(\"amount\") > 20 and col(\"grp\") != \"g1\"'\n",
       "df = df.iloc[:200]\ndf = df[(df['amount'] > 20) & (df['grp'] != 'g1')]\n", 0},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.name));
    write_file(dir / "data/MLTable", head + c.steps);
    std::string err;
    int status = 0;
    auto got = run_steps(dir, err, status);
    INFO("stderr:\n" << err);
    REQUIRE(status == 0);
    auto want = pandas_rows(dir, c.pandas);
    CHECK(got.size() == want.size());
    CHECK(got == want);
    if (c.rows > 0) {
      // Cut after take/skip: the job's items are the rows kept.
      CHECK(sql_int(dir / "store/fanout.db", "SELECT sum(items) FROM minibatches") ==
            static_cast<long long>(c.rows));
    }
  }
}

TEST_CASE("integration.compat3.take_random_sample_is_seeded_and_reproducible") {
  TempDir dir("compat3-sample");
  write_file(dir / "data/t.csv", steps_csv(1000));
  write_file(dir / "src/rows.py", kRowsScript);
  write_file(dir / "job.yaml", kTableJob);
  auto sample = [&](int seed) {
    write_file(dir / "data/MLTable",
               "paths:\n  - file: ./t.csv\ntransformations:\n  - read_delimited: {}\n"
               "  - take_random_sample:\n      probability: 0.2\n      seed: " +
                   std::to_string(seed) + "\n");
    std::string err;
    int status = 0;
    auto rows = run_steps(dir, err, status);
    INFO("stderr:\n" << err);
    REQUIRE(status == 0);
    return rows;
  };
  const auto a = sample(11);
  CHECK(a == sample(11));
  CHECK(a != sample(12));
  CHECK(a.size() > 120);
  CHECK(a.size() < 280);
  // Every sampled row is a row of the table, as pandas reads it.
  auto all = pandas_rows(dir, "");
  for (const auto& row : a) CHECK(std::binary_search(all.begin(), all.end(), row));
}

TEST_CASE("integration.compat3.parquet_and_pipeline_deployments_are_refused_with_the_reason") {
  TempDir dir("compat3-refused");
  write_file(dir / "data/t.csv", steps_csv(5));
  write_file(dir / "src/rows.py", kRowsScript);
  write_file(dir / "job.yaml", kTableJob);
  write_file(dir / "data/MLTable",
             "paths:\n  - pattern: ./*.parquet\ntransformations:\n  - read_parquet: {}\n");
  std::string err;
  int status = 0;
  run_steps(dir, err, status);
  CHECK(status == 2);
  CHECK(err.find("MLTable:4: transformations[0]: read_parquet is not supported") !=
        std::string::npos);
  CHECK(err.find("convert the files to CSV") != std::string::npos);

  make_files(dir / "images", 2);
  write_file(
      dir / "deploy/deployment.yml",
      "name: hello-dpl\nendpoint_name: hello-batch\ntype: pipeline\n"
      "component: azureml:hello_batch@latest\nsettings:\n  default_compute: batch-cluster\n");
  auto r = run_in(
      dir, {dir / "deploy/deployment.yml", "--input", "images", "--db", dir / "store/fanout.db"});
  CHECK(r.status.code == 2);
  CHECK(r.err.find("deployment.yml:3: type: fanout does not run pipeline component deployments "
                   "(component: azureml:hello_batch@latest)") != std::string::npos);
}
