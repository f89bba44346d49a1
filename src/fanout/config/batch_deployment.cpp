// Batch deployment files as parallel jobs. The deployment's keys are moved into a parallel job's
// YAML tree (the nodes themselves, so messages keep their lines) and parsed by the job parser.
// See batch_deployment.hpp.
#include "fanout/config/batch_deployment.hpp"

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

constexpr const char* kDefaultOutputFile = "predictions.csv";  // Azure ML's output_file_name

// The deployment's keys that fanout reads; under `settings:` (newer schema) or at the top.
constexpr std::array<std::string_view, 8> kSettingKeys = {
    "mini_batch_size", "max_concurrency_per_instance", "retry_settings", "error_threshold",
    "logging_level",   "environment_variables",        "output_action",  "output_file_name"};

struct Translated {
  YAML::Node job{};
  std::string name{};
  std::string output_action = "append_row";
  std::string output_file = kDefaultOutputFile;
  std::string model_path{};  // a local model's folder or file
  std::vector<std::string> notices{};
};

// A pipeline component deployment has other keys (component, settings.default_compute): its
// type is told first, so the refusal says why rather than naming an unknown key.
void check_type(const detail::YamlReader& r, const Fields& top) {
  if (const Entry* e = top.get("type"); e && !e->is_null()) {
    const std::string type(trim(r.text(*e)));
    if (type == "pipeline") {
      const Entry* c = top.get("component");
      const std::string comp =
          c && c->value.IsScalar() ? std::string(trim(c->value.Scalar())) : "inline";
      r.fail(e->where(),
             "fanout does not run pipeline component deployments (component: " + comp +
                 "): `fanout run` takes a deployment of a model with a scoring script; run the "
                 "pipeline as a pipeline job file instead (`fanout run pipeline-job.yml`, its "
                 "inputs given paths and its azureml: components as local files)");
    }
    if (type != "model") {
      r.fail(e->where(), "expected model or pipeline (got \"" + type + "\")");
    }
  }
}

// `model:` -- `azureml:name:1` is a registered model (not local); a path or a mapping with a
// path is local.
void take_model(const detail::YamlReader& r, const Fields& top, const std::string& base,
                Translated& t) {
  if (const Entry* e = top.get("model"); e && !e->is_null()) {
    if (e->value.IsScalar()) {
      const std::string m(trim(e->value.Scalar()));
      if (m.rfind("azureml:", 0) == 0) {
        t.notices.push_back("model: " + m +
                            " ignored (a registered model; set AZUREML_MODEL_DIR in "
                            "environment_variables to a local copy)");
      } else {
        t.model_path = r.local_path(*e, base);
      }
    } else {
      Fields m = r.fields(*e, {"name", "version", "path", "type", "description", "tags",
                               "properties", "$schema", "stage", "flavors"});
      if (const Entry* p = m.get("path")) t.model_path = r.local_path(*p, base);
    }
  }
}

// The run settings of `f` (the top level, then `settings:`, whose value wins and would give a
// notice): output_action and output_file_name checked here, the others copied into the job.
void take_settings(const detail::YamlReader& r, const Fields& f, YAML::Node& job, Translated& t) {
  for (const auto k : kSettingKeys) {
    const Entry* e = f.get(k);
    if (e == nullptr) continue;
    if (k == "output_action") {
      t.output_action = std::string(trim(r.text(*e)));
      if (t.output_action != "append_row" && t.output_action != "summary_only") {
        r.fail(e->where(), "expected append_row or summary_only (got \"" + t.output_action + "\")");
      }
    } else if (k == "output_file_name") {
      t.output_file = std::string(trim(r.text(*e, "a file name")));
      if (t.output_file.empty() || t.output_file.find('/') != std::string::npos) {
        r.fail(e->where(), "expected a file name without '/' (got \"" + t.output_file + "\")");
      }
    } else {
      job[std::string(k)] = e->value;
    }
  }
}

Translated translate(const detail::YamlReader& r, const YAML::Node& doc, const std::string& base) {
  Translated t;
  Fields top = r.collect(r.root(doc, "a mapping of batch deployment keys"));
  check_type(r, top);
  r.reject_unknown(top, {"$schema",
                         "name",
                         "endpoint_name",
                         "description",
                         "tags",
                         "properties",
                         "type",
                         "model",
                         "code_configuration",
                         "environment",
                         "compute",
                         "resources",
                         "settings",
                         "mini_batch_size",
                         "max_concurrency_per_instance",
                         "retry_settings",
                         "error_threshold",
                         "logging_level",
                         "environment_variables",
                         "output_action",
                         "output_file_name"});
  YAML::Node job(YAML::NodeType::Map);
  job["type"] = "parallel";
  if (const Entry* e = top.get("name"); e && !e->is_null()) t.name = r.text(*e, "a name");
  if (t.name.empty()) {
    if (const Entry* e = top.get("endpoint_name"); e && !e->is_null()) t.name = r.text(*e);
  }
  for (const char* k : {"compute", "environment"}) {
    const Entry* e = top.get(k);
    if (e == nullptr || e->is_null()) continue;
    t.notices.push_back(
        std::string(k) + ": " +
        (e->value.IsScalar() ? e->value.Scalar() : std::string("inline definition")) +
        " ignored (fanout runs locally)");
  }
  take_model(r, top, base, t);
  const Entry* cc = top.get("code_configuration");
  if (cc == nullptr) {
    r.fail(top.missing("code_configuration"),
           "expected a mapping with code and scoring_script (got nothing)");
  }
  Fields code = r.fields(*cc, {"code", "scoring_script"});
  const Entry* script = code.get("scoring_script");
  if (script == nullptr) {
    r.fail(code.missing("scoring_script"), "expected a Python file under code (got nothing)");
  }
  YAML::Node task(YAML::NodeType::Map);
  task["type"] = "run_function";
  if (const Entry* c = code.get("code")) task["code"] = c->value;
  task["entry_script"] = script->value;
  job["task"] = task;
  if (const Entry* e = top.get("resources"); e && !e->is_null()) job["resources"] = e->value;
  take_settings(r, top, job, t);
  if (const Entry* s = top.get("settings"); s && !s->is_null()) {
    take_settings(r,
                  r.fields(*s, {"mini_batch_size", "max_concurrency_per_instance", "retry_settings",
                                "error_threshold", "logging_level", "environment_variables",
                                "output_action", "output_file_name"}),
                  job, t);
  }
  t.job = job;
  return t;
}

}  // namespace

bool is_batch_deployment(const std::string& path) {
  auto text = read_file(path);
  if (!text) return false;
  try {
    YAML::Node root = YAML::Load(*text);
    return root.IsMap() && (root["endpoint_name"] || root["code_configuration"]);
  } catch (const YAML::Exception&) {
    return false;
  }
}

Expected<JobConfig> load_batch_deployment(const std::string& path, const DeploymentRun& run) {
  std::error_code ec;
  const std::string cwd = run.cwd.empty() ? fs::current_path(ec).string() : run.cwd;
  if (run.input.empty()) {
    return make_error(ErrorCode::InvalidArgument,
                      path +
                          ": a batch deployment scores the data given with --input "
                          "DIR_OR_FILE (got no --input)");
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
    return translate(r, detail::load_yaml(*text, path, /*one_document=*/true), base);
  });
  if (!tr) return Unexpected{tr.error()};
  Translated& t = *tr;
  if (t.name.empty()) t.name = fs::path(spec_path).stem().string();
  const std::string output =
      run.output.empty() ? base + "/outputs/" + t.name : resolve_path(cwd, run.output);
  // The run's input and output, as a parallel job declares them.
  YAML::Node job = t.job;
  job["name"] = t.name;
  YAML::Node in(YAML::NodeType::Map);
  in["type"] = fs::is_directory(input, ec) ? "uri_folder" : "uri_file";
  in["path"] = input;
  job["inputs"]["data"] = in;
  job["input_data"] = "${{inputs.data}}";
  YAML::Node out(YAML::NodeType::Map);
  out["type"] = "uri_folder";
  out["path"] = output;
  job["outputs"]["predictions"] = out;
  auto cfg = detail::parse_job_node(job, path, spec_path, /*check_files=*/true);
  if (!cfg) return cfg;
  if (t.output_action == "append_row") cfg->append_row_to = output + "/" + t.output_file;
  cfg->model_path = t.model_path;
  cfg->notices.insert(cfg->notices.begin(), t.notices.begin(), t.notices.end());
  return cfg;
}

Expected<std::string> lay_out_model_dir(const JobConfig& cfg, const std::string& folder) {
  if (cfg.model_path.empty() || cfg.environment_variables.count("AZUREML_MODEL_DIR") > 0) {
    return std::string();
  }
  // "./model/" names the folder "model": the trailing '/' gives lexically_normal an empty name.
  fs::path model = fs::path(cfg.model_path).lexically_normal();
  if (!model.has_filename()) model = model.parent_path();
  if (auto r = make_dirs(folder); !r) return Unexpected{r.error()};
  std::error_code ec;
  const fs::path link = fs::path(folder) / model.filename();
  fs::remove(link, ec);
  fs::create_symlink(model, link, ec);
  if (ec) {
    return make_error(ErrorCode::Io, link.string() + ": cannot link the deployment's model " +
                                         model.string() + " there: " + ec.message());
  }
  return folder;
}

}  // namespace fanout::config
