// ParallelRunConfig files as parallel jobs. The file's keys are moved into a parallel job's YAML
// tree (the nodes themselves, so messages keep their lines) and parsed by the job parser, as
// batch deployments are. See parallel_run_config.hpp.
#include "fanout/config/parallel_run_config.hpp"

#include <array>
#include <filesystem>
#include <system_error>

#include "fanout/config/detail/job_node.hpp"
#include "fanout/config/detail/located_yaml.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::config {
namespace {

namespace fs = std::filesystem;
using detail::Entry;
using detail::Fields;
using detail::trim;

constexpr const char* kDefaultRowFile = "parallel_run_step.txt";  // ParallelRunStep's default

// Keys a parallel job spells as the ParallelRunConfig does.
constexpr std::array<std::string_view, 9> kSameKeys = {
    "mini_batch_size", "partition_keys",         "error_threshold",
    "logging_level",   "allowed_failed_percent", "run_invocation_timeout",
    "run_max_try",     "environment_variables",  "description"};

struct Translated {
  YAML::Node job{};
  bool append_row = true;
  std::string row_file = kDefaultRowFile;
};

// output_action and append_row_file_name, with ParallelRunConfig's rules.
void take_output(const detail::YamlReader& r, const Fields& top, Translated& t) {
  if (const Entry* e = top.get("output_action"); e && !e->is_null()) {
    const std::string action(trim(r.text(*e)));
    if (action != "append_row" && action != "summary_only") {
      r.fail(e->where(), "expected append_row or summary_only (got \"" + action + "\")");
    }
    t.append_row = action == "append_row";
  }
  if (const Entry* e = top.get("append_row_file_name"); e && !e->is_null()) {
    if (!t.append_row) {
      r.fail(e->where(), "only with output_action append_row (got output_action summary_only)");
    }
    t.row_file = std::string(trim(r.text(*e, "a file name")));
    if (t.row_file.empty() || t.row_file.find('/') != std::string::npos) {
      r.fail(e->where(), "expected a file name without '/' (got \"" + t.row_file + "\")");
    }
  }
}

Translated translate(const detail::YamlReader& r, const YAML::Node& doc) {
  Translated t;
  Fields top = r.collect(r.root(doc, "a mapping of ParallelRunConfig parameters"));
  r.reject_unknown(top, {"entry_script", "error_threshold", "output_action", "mini_batch_size",
                         "partition_keys", "node_count", "process_count_per_node", "logging_level",
                         "run_invocation_timeout", "run_max_try", "append_row_file_name",
                         "allowed_failed_count", "allowed_failed_percent", "source_directory",
                         "description", "environment_variables", "environment", "compute_target"});
  YAML::Node job(YAML::NodeType::Map);
  job["type"] = "parallel";
  for (const auto k : kSameKeys) {
    if (const Entry* e = top.get(k); e && !e->is_null()) job[std::string(k)] = e->value;
  }
  if (const Entry* e = top.get("allowed_failed_count"); e && !e->is_null()) {
    job["mini_batch_error_threshold"] = e->value;
  }
  if (const Entry* e = top.get("process_count_per_node"); e && !e->is_null()) {
    job["max_concurrency_per_instance"] = e->value;
  }
  if (const Entry* e = top.get("node_count"); e && !e->is_null()) {
    job["resources"]["instance_count"] = e->value;
  }
  // The job parser gives the notices (`compute: NAME ignored ...`).
  if (const Entry* e = top.get("compute_target"); e && !e->is_null()) job["compute"] = e->value;
  if (const Entry* e = top.get("environment"); e && !e->is_null()) {
    const YAML::Node& env = e->value;
    job["environment"] = env.IsMap() && env["name"] ? env["name"] : env;
  }
  const Entry* script = top.get("entry_script");
  if (script == nullptr || script->is_null()) {
    r.fail(top.missing("entry_script"),
           "expected the Python file ParallelRunStep runs (got nothing)");
  }
  YAML::Node task(YAML::NodeType::Map);
  task["type"] = "run_function";
  if (const Entry* c = top.get("source_directory"); c && !c->is_null()) task["code"] = c->value;
  task["entry_script"] = script->value;
  job["task"] = task;
  take_output(r, top, t);
  // A step whose failures stay within its thresholds completes, as ParallelRunStep's does.
  job["fanout"]["allow_partial"] = true;
  t.job = job;
  return t;
}

// The run's input, as a parallel job declares it: an MLTable folder (a tabular dataset), another
// folder (a file dataset) or a file.
YAML::Node input_node(const std::string& input) {
  std::error_code ec;
  YAML::Node in(YAML::NodeType::Map);
  if (fs::is_directory(input, ec)) {
    in["type"] = fs::exists(fs::path(input) / "MLTable", ec) ? "mltable" : "uri_folder";
  } else {
    in["type"] = "uri_file";
  }
  in["path"] = input;
  return in;
}

}  // namespace

bool is_parallel_run_config(const std::string& path) {
  auto text = read_file(path);
  if (!text) return false;
  try {
    YAML::Node root = YAML::Load(*text);
    return root.IsMap() && root["entry_script"] &&
           (root["output_action"] || root["error_threshold"]) && !root["type"] && !root["task"] &&
           !root["jobs"];
  } catch (const YAML::Exception&) {
    return false;
  }
}

Expected<JobConfig> load_parallel_run_config(const std::string& path, const DeploymentRun& run) {
  std::error_code ec;
  const std::string cwd = run.cwd.empty() ? fs::current_path(ec).string() : run.cwd;
  if (run.input.empty()) {
    return make_error(ErrorCode::InvalidArgument,
                      path +
                          ": a ParallelRunConfig file has no inputs (in Azure ML v1 they belong "
                          "to the ParallelRunStep): give the data with --input DIR_OR_FILE (got "
                          "no --input)");
  }
  const std::string input = resolve_path(cwd, run.input);
  if (!fs::exists(input, ec)) {
    return make_error(ErrorCode::NotFound, "--input: expected an existing folder or file (got \"" +
                                               input + "\", which does not exist)");
  }
  auto text = read_file(path);
  if (!text) return Unexpected{text.error()};
  const std::string spec_path = resolve_path(cwd, path);
  const std::string base = fs::path(spec_path).parent_path().string();
  auto tr = detail::read_yaml(path, [&] {
    detail::YamlReader r(path);
    return translate(r, detail::load_yaml(*text, path, /*one_document=*/true));
  });
  if (!tr) return Unexpected{tr.error()};
  const std::string name = fs::path(spec_path).stem().string();
  const std::string output =
      run.output.empty() ? base + "/outputs/" + name : resolve_path(cwd, run.output);
  YAML::Node job = tr->job;
  job["name"] = name;
  job["inputs"]["data"] = input_node(input);
  job["input_data"] = "${{inputs.data}}";
  YAML::Node out(YAML::NodeType::Map);
  out["type"] = "uri_folder";
  out["path"] = output;
  job["outputs"]["output"] = out;
  auto cfg = detail::parse_job_node(job, path, spec_path, /*check_files=*/true);
  if (!cfg) return cfg;
  if (tr->append_row) cfg->append_row_to = output + "/" + tr->row_file;
  return cfg;
}

}  // namespace fanout::config
