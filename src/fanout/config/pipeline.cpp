// Pipeline job files to Pipeline. See pipeline.hpp and docs/job-spec.md#pipelines. Messages are
// located by detail/located_yaml.hpp; a parallel step is read by the job spec's parser.
#include "fanout/config/pipeline.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>

#include "fanout/config/detail/job_node.hpp"
#include "fanout/config/detail/located_yaml.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::config {
namespace {

namespace fs = std::filesystem;

using detail::describe;
using detail::line_of;
using detail::quote_whole;
using detail::sole_ref;
using detail::trim;
using detail::YamlError;

std::vector<std::string> split_dots(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == '.') {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

constexpr std::string_view kPathTypes[] = {"uri_folder",   "uri_file",     "mltable",
                                           "custom_model", "mlflow_model", "triton_model"};
constexpr std::string_view kLiteralTypes[] = {"string", "integer", "number", "boolean"};

bool is_path_type(const std::string& t) {
  return std::find(std::begin(kPathTypes), std::end(kPathTypes), t) != std::end(kPathTypes);
}
bool is_literal_type(const std::string& t) {
  return std::find(std::begin(kLiteralTypes), std::end(kLiteralTypes), t) !=
         std::end(kLiteralTypes);
}

// The last segment of a remote URI ("scores.csv" for azureml://datastores/d/paths/x/scores.csv),
// or "" when it ends with '/' or names no more than its scheme and host.
std::string remote_file_name(std::string_view uri) {
  std::string_view s = uri;
  if (auto q = s.find_first_of("?#"); q != std::string_view::npos) s = s.substr(0, q);
  if (auto scheme = s.find("://"); scheme != std::string_view::npos) s.remove_prefix(scheme + 3);
  const auto slash = s.rfind('/');
  if (slash == std::string_view::npos) return "";
  std::string name(s.substr(slash + 1));
  if (name == "." || name == "..") return "";
  return name;
}

class PipelineParser final {
 public:
  PipelineParser(std::string file, std::string spec_path, std::string run_dir)
      : file_(std::move(file)) {
    p_.spec_path = std::move(spec_path);
    p_.run_dir = std::move(run_dir);
    base_ = fs::path(p_.spec_path).parent_path().string();
  }

  Pipeline run(const YAML::Node& root);

 private:
  // A job's definition: its own node (inline) or its component file's.
  struct Def {
    std::string name{};
    YAML::Node job{};        // the entry under jobs:
    YAML::Node def{};        // the definition: the same node, or the component's root
    std::string file{};      // file holding `def`, as shown in messages
    std::string file_abs{};  // and its absolute path
    std::vector<std::string> after{};
  };

  [[noreturn]] void fail(const std::string& file, int line, const std::string& key,
                         const std::string& what) const {
    detail::fail(file, {key, line}, what);
  }
  [[noreturn]] void fail(int line, const std::string& key, const std::string& what) const {
    fail(file_, line, key, what);
  }

  std::string scalar(const YAML::Node& n, const std::string& key, std::string_view expect) const {
    return r_.scalar(n, key, expect);
  }

  // A local path: azureml:// and other URIs are refused for inputs.
  std::string local_input_path(const std::string& file, const YAML::Node& n, const std::string& key,
                               const std::string& base) const {
    const std::string v = std::string(trim(scalar(n, key, "a local path")));
    if (v.empty()) fail(file, line_of(n), key, "expected a local path (got \"\")");
    if (v.rfind("azureml:", 0) == 0 || v.find("://") != std::string::npos) {
      fail(file, line_of(n), key,
           "expected a local path; Azure ML assets, datastores and remote URIs are not read (got " +
               quote_whole(v) + ")");
    }
    return resolve_path(base, v.rfind("file:", 0) == 0 ? v.substr(5) : v);
  }

  // An output's path: as written, or a folder under the run directory when there is none or it
  // is an azureml:// URI (reported once).
  // A uri_file output keeps the URI's file name (azureml://.../scores.csv is written to
  // <fallback>/scores.csv), so that what reads it finds the name it expects.
  std::string output_path(const std::string& file, const YAML::Node& path_node,
                          const std::string& base, const std::string& where,
                          const std::string& fallback, const std::string& type = "uri_folder") {
    if (!path_node.IsDefined() || path_node.IsNull()) return fallback;
    const std::string v = std::string(trim(scalar(path_node, where, "a local path")));
    if (v.rfind("azureml:", 0) == 0 || v.find("://") != std::string::npos) {
      std::string local = fallback;
      const std::string name = remote_file_name(v);
      if (type == "uri_file" && !name.empty()) local = fallback + "/" + name;
      p_.notices.push_back(where + ": " + v + " is written to " + local);
      return local;
    }
    if (v.empty()) fail(file, line_of(path_node), where, "expected a local path (got \"\")");
    return resolve_path(base, v);
  }

  void notice_ignored(const YAML::Node& n, const std::string& key) {
    if (!n.IsDefined() || n.IsNull()) return;
    if (n.IsScalar()) {
      if (trim(n.Scalar()) == "local") return;
      p_.notices.push_back(key + ": " + n.Scalar() + " ignored (fanout runs locally)");
    } else {
      p_.notices.push_back(key + ": inline definition ignored (fanout runs locally)");
    }
  }

  void parse_inputs(const YAML::Node& n);
  void parse_outputs(const YAML::Node& n);
  Def load_def(const std::string& name, const YAML::Node& job);
  std::vector<std::size_t> order(const std::vector<Def>& defs) const;
  BoundValue bind_input(const Def& d, const std::string& key, const YAML::Node& v,
                        const std::string& file, const std::string& base) const;
  PipelineStep resolve(const Def& d);
  void take_inputs(const Def& d, PipelineStep& s, const YAML::Node& n, const std::string& file,
                   const std::string& base);
  void take_outputs(const Def& d, PipelineStep& s, const YAML::Node& n, const std::string& file,
                    const std::string& base);
  void resolve_command(const Def& d, PipelineStep& s);
  void resolve_parallel(const Def& d, PipelineStep& s);
  std::string substitute(const Def& d, const PipelineStep& s, const std::string& text,
                         const YAML::Node& where) const;

  std::string file_;
  detail::YamlReader r_{file_};  // names the pipeline file; fail(file, ...) names a component
  std::string base_;
  Pipeline p_{};
  std::map<std::string, BoundValue> inputs_{};
  std::map<std::string, PipelineStep> done_{};
};

void PipelineParser::parse_inputs(const YAML::Node& n) {
  if (n.IsNull()) return;
  if (!n.IsMap()) fail(line_of(n), "inputs", "expected a mapping (got " + describe(n) + ")");
  for (const auto& kv : n) {
    const std::string name = kv.first.Scalar();
    const std::string key = "inputs." + name;
    const YAML::Node v = kv.second;
    BoundValue b;
    if (v.IsScalar()) {
      b = {"literal", v.Scalar()};
    } else if (v.IsMap()) {
      const std::string type = v["type"]
                                   ? std::string(trim(scalar(v["type"], key + ".type", "a type")))
                                   : std::string("uri_folder");
      if (is_literal_type(type)) {
        YAML::Node d = v["default"] ? v["default"] : v["value"];
        b = {"literal", scalar(d, key + ".default", "the input's value")};
      } else if (is_path_type(type)) {
        if (!v["path"]) fail(line_of(v), key + ".path", "expected a local path (got nothing)");
        b = {type, local_input_path(file_, v["path"], key + ".path", base_)};
      } else {
        fail(line_of(v["type"]), key + ".type",
             "expected uri_folder, uri_file, mltable, custom_model, mlflow_model, triton_model, "
             "string, integer, number or boolean (got " +
                 quote_whole(type) + ")");
      }
    } else {
      fail(line_of(v), key,
           "expected a literal value or a mapping with type and path (got " + describe(v) + ")");
    }
    inputs_[name] = b;
  }
}

void PipelineParser::parse_outputs(const YAML::Node& n) {
  if (n.IsNull()) return;
  if (!n.IsMap()) fail(line_of(n), "outputs", "expected a mapping (got " + describe(n) + ")");
  for (const auto& kv : n) {
    const std::string name = kv.first.Scalar();
    const YAML::Node v = kv.second;
    BoundValue b{"uri_folder", ""};
    if (v.IsMap() && v["type"])
      b.type = std::string(trim(scalar(v["type"], "outputs." + name + ".type", "a type")));
    b.value = output_path(file_, v.IsMap() ? v["path"] : YAML::Node(), base_, "outputs." + name,
                          p_.run_dir + "/outputs/" + name, b.type);
    p_.outputs[name] = b;
  }
}

PipelineParser::Def PipelineParser::load_def(const std::string& name, const YAML::Node& job) {
  // YAML::Node assignment writes into the node referred to; reset() rebinds the handle.
  Def d;
  d.name = name;
  d.job.reset(job);
  d.def.reset(job);
  d.file = file_;
  d.file_abs = p_.spec_path;
  const std::string key = "jobs." + name;
  if (!job.IsMap()) fail(line_of(job), key, "expected a mapping (got " + describe(job) + ")");
  if (const YAML::Node c = job["component"]; c) {
    if (!c.IsScalar()) {
      // An inline component definition: the definition is that mapping.
      if (!c.IsMap()) fail(line_of(c), key + ".component", "expected a file or a mapping");
      d.def.reset(c);
    } else {
      std::string v = std::string(trim(c.Scalar()));
      if (v.rfind("azureml:", 0) == 0) {
        fail(line_of(c), key + ".component",
             "expected a local component file such as ./score.yml; registered components are "
             "not available locally (got " +
                 quote_whole(v) + ")");
      }
      if (v.rfind("file:", 0) == 0) v = v.substr(5);
      const std::string path = resolve_path(base_, v);
      std::error_code ec;
      if (!fs::is_regular_file(path, ec)) {
        fail(line_of(c), key + ".component",
             "expected an existing component file (got " + quote_whole(v) +
                 ", which does not exist)");
      }
      auto text = read_file(path);
      if (!text) throw YamlError{text.error().message};
      d.def.reset(detail::load_yaml(*text, v, /*one_document=*/false));
      d.file = v;
      d.file_abs = path;
      if (!d.def.IsMap())
        fail(v, 1, "", "expected a component mapping (got " + describe(d.def) + ")");
    }
  }
  // Dependencies: ${{parent.jobs.<job>.outputs.<name>}} anywhere in the job's inputs.
  std::set<std::string> after;
  auto scan = [&](const YAML::Node& n, const std::string& where) {
    if (!n || !n.IsMap()) return;
    for (const auto& kv : n) {
      YAML::Node v = kv.second.IsMap() && kv.second["path"] ? kv.second["path"] : kv.second;
      if (!v.IsScalar()) continue;
      const auto parts = split_dots(sole_ref(v.Scalar()).value_or(""));
      if (parts.size() >= 2 && parts[0] == "parent" && parts[1] == "jobs") {
        if (parts.size() != 5 || parts[3] != "outputs") {
          fail(line_of(v), where + "." + kv.first.Scalar(),
               "expected ${{parent.jobs.<job>.outputs.<name>}} (got " + quote_whole(v.Scalar()) +
                   ")");
        }
        after.insert(parts[2]);
      }
    }
  };
  scan(job["inputs"], key + ".inputs");
  d.after.assign(after.begin(), after.end());
  return d;
}

std::vector<std::size_t> PipelineParser::order(const std::vector<Def>& defs) const {
  std::set<std::string> names;
  for (const auto& d : defs) names.insert(d.name);
  for (const auto& d : defs) {
    for (const auto& a : d.after) {
      if (!names.count(a)) {
        fail(line_of(d.job["inputs"]), "jobs." + d.name + ".inputs",
             "refers to job " + quote_whole(a) + ", which is not defined under jobs");
      }
      if (a == d.name) {
        fail(line_of(d.job["inputs"]), "jobs." + d.name + ".inputs", "refers to its own outputs");
      }
    }
  }
  // Kahn's algorithm, taking the first ready job in file order each time. Indexes, because
  // moving a Def would assign YAML nodes, which writes into them.
  std::vector<std::size_t> out;
  std::set<std::string> placed;
  std::vector<bool> taken(defs.size(), false);
  while (out.size() < defs.size()) {
    std::size_t next = defs.size();
    for (std::size_t i = 0; i < defs.size() && next == defs.size(); ++i) {
      if (taken[i]) continue;
      const auto& after = defs[i].after;
      if (std::all_of(after.begin(), after.end(),
                      [&](const std::string& a) { return placed.count(a) > 0; })) {
        next = i;
      }
    }
    if (next == defs.size()) {
      std::string cycle;
      int line = 0;
      for (std::size_t i = 0; i < defs.size(); ++i) {
        if (taken[i]) continue;
        cycle += (cycle.empty() ? "" : ", ") + defs[i].name;
        if (line == 0) line = line_of(defs[i].job);
      }
      fail(line, "jobs",
           "expected jobs without circular dependencies (got a cycle among " + cycle + ")");
    }
    taken[next] = true;
    placed.insert(defs[next].name);
    out.push_back(next);
  }
  return out;
}

BoundValue PipelineParser::bind_input(const Def& d, const std::string& key, const YAML::Node& v,
                                      const std::string& file, const std::string& base) const {
  auto from_ref = [&](const std::string& ref, const YAML::Node& at) -> std::optional<BoundValue> {
    const auto parts = split_dots(ref);
    if (parts.size() == 3 && parts[0] == "parent" && parts[1] == "inputs") {
      auto it = inputs_.find(parts[2]);
      if (it == inputs_.end()) {
        fail(file, line_of(at), key,
             "refers to pipeline input " + quote_whole(parts[2]) +
                 ", which is not defined under inputs");
      }
      return it->second;
    }
    if (parts.size() == 5 && parts[0] == "parent" && parts[1] == "jobs") {
      auto job = done_.find(parts[2]);
      if (job == done_.end()) {
        fail(file, line_of(at), key,
             "refers to job " + quote_whole(parts[2]) + ", which is not defined");
      }
      auto out = job->second.outputs.find(parts[4]);
      if (out == job->second.outputs.end()) {
        std::string names;
        for (const auto& [n, b] : job->second.outputs) names += (names.empty() ? "" : ", ") + n;
        fail(file, line_of(at), key,
             "refers to output " + quote_whole(parts[4]) + " of job " + quote_whole(parts[2]) +
                 ", which has " + (names.empty() ? "no outputs" : "outputs " + names));
      }
      return out->second;
    }
    if (!ref.empty()) {
      fail(file, line_of(at), key,
           "expected ${{parent.inputs.<name>}} or ${{parent.jobs.<job>.outputs.<name>}} (got " +
               quote_whole("${{" + ref + "}}") + ")");
    }
    return std::nullopt;
  };
  (void)d;
  if (v.IsScalar()) {
    if (auto b = from_ref(sole_ref(v.Scalar()).value_or(""), v)) return *b;
    return BoundValue{"literal", v.Scalar()};
  }
  if (!v.IsMap()) {
    fail(file, line_of(v), key,
         "expected a value, a ${{parent...}} reference or a mapping (got " + describe(v) + ")");
  }
  const std::string type =
      v["type"] ? std::string(trim(scalar(v["type"], key + ".type", "a type"))) : std::string();
  if (is_literal_type(type)) {
    YAML::Node dv = v["default"] ? v["default"] : v["value"];
    if (!dv) return BoundValue{"literal", ""};
    return BoundValue{"literal", scalar(dv, key + ".default", "the input's value")};
  }
  if (!type.empty() && !is_path_type(type)) {
    fail(file, line_of(v["type"]), key + ".type",
         "expected uri_folder, uri_file, mltable, custom_model, mlflow_model, triton_model, "
         "string, integer, number or boolean (got " +
             quote_whole(type) + ")");
  }
  YAML::Node path = v["path"] ? v["path"] : v["default"];
  if (!path) return BoundValue{type.empty() ? "uri_folder" : type, ""};  // a declaration only
  if (path.IsScalar()) {
    if (auto b = from_ref(sole_ref(path.Scalar()).value_or(""), path)) {
      if (!type.empty()) b->type = type;
      return *b;
    }
  }
  return BoundValue{type.empty() ? "uri_folder" : type,
                    local_input_path(file, path, key + ".path", base)};
}

std::string PipelineParser::substitute(const Def& d, const PipelineStep& s, const std::string& text,
                                       const YAML::Node& where) const {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t open = text.find("${{", i);
    if (open == std::string::npos) {
      out.append(text, i, std::string::npos);
      break;
    }
    out.append(text, i, open - i);
    const std::size_t close = text.find("}}", open);
    if (close == std::string::npos) {
      fail(d.file, line_of(where), "jobs." + d.name + ".command",
           "expected }} to close " + quote_whole(text.substr(open, 40)) + " (got end of text)");
    }
    const std::string ref =
        std::string(trim(std::string_view(text).substr(open + 3, close - open - 3)));
    const auto parts = split_dots(ref);
    const std::map<std::string, BoundValue>* table = nullptr;
    if (parts.size() == 2 && parts[0] == "inputs") table = &s.inputs;
    if (parts.size() == 2 && parts[0] == "outputs") table = &s.outputs;
    if (table == nullptr) {
      fail(d.file, line_of(where), "jobs." + d.name + ".command",
           "expected ${{inputs.<name>}} or ${{outputs.<name>}} (got " +
               quote_whole("${{" + ref + "}}") + ")");
    }
    auto it = table->find(parts[1]);
    if (it == table->end()) {
      fail(d.file, line_of(where), "jobs." + d.name + ".command",
           "refers to " + parts[0] + "." + parts[1] + ", which the job does not define");
    }
    out += it->second.value;
    i = close + 2;
  }
  return out;
}

PipelineStep PipelineParser::resolve(const Def& d) {
  PipelineStep s;
  s.name = d.name;
  s.file = d.file;
  s.line = line_of(d.job);
  s.after = d.after;
  const std::string key = "jobs." + d.name;
  const std::string def_base = fs::path(d.file_abs).parent_path().string();
  const YAML::Node tnode = d.def["type"];
  if (!tnode)
    fail(d.file, line_of(d.def), key + ".type", "expected command or parallel (got nothing)");
  s.type = std::string(trim(scalar(tnode, key + ".type", "command or parallel")));
  if (s.type != "command" && s.type != "parallel") {
    fail(d.file, line_of(tnode), key + ".type",
         "expected command or parallel (got " + quote_whole(s.type) + ")");
  }

  // Inputs: the definition's (component declarations, defaults, or the inline values), then the
  // pipeline job's bindings over them.
  take_inputs(d, s, d.def["inputs"], d.file, def_base);
  if (d.def != d.job) take_inputs(d, s, d.job["inputs"], file_, base_);
  for (const auto& [name, b] : s.inputs) {
    if (b.type != "literal" && b.value.empty()) {
      fail(file_, line_of(d.job), key + ".inputs." + name,
           "expected a value bound to the input (got none)");
    }
  }
  take_outputs(d, s, d.def["outputs"], d.file, def_base);
  if (d.def != d.job) take_outputs(d, s, d.job["outputs"], file_, base_);
  if (s.type == "command") {
    resolve_command(d, s);
  } else {
    resolve_parallel(d, s);
  }
  return s;
}

// The step's inputs from `n` (the definition's declarations, defaults or inline values, or the
// pipeline job's bindings over them).
void PipelineParser::take_inputs(const Def& d, PipelineStep& s, const YAML::Node& n,
                                 const std::string& file, const std::string& base) {
  const std::string key = "jobs." + d.name;
  if (!n || n.IsNull()) return;
  if (!n.IsMap())
    fail(file, line_of(n), key + ".inputs", "expected a mapping (got " + describe(n) + ")");
  for (const auto& kv : n) {
    const std::string in = kv.first.Scalar();
    BoundValue b = bind_input(d, key + ".inputs." + in, kv.second, file, base);
    auto prev = s.inputs.find(in);
    // A reference bound to a declared input takes the declared type (a component's mltable
    // input fed by a job's uri_folder output is read as a table).
    if (prev != s.inputs.end() && kv.second.IsScalar() && b.type != "literal" &&
        is_path_type(prev->second.type)) {
      b.type = prev->second.type;
    }
    s.inputs[in] = b;
  }
}

// The step's outputs from `n`: declared in the definition, bound in the pipeline job; a path
// everywhere.
void PipelineParser::take_outputs(const Def& d, PipelineStep& s, const YAML::Node& n,
                                  const std::string& file, const std::string& base) {
  const std::string key = "jobs." + d.name;
  if (!n || n.IsNull()) return;
  if (!n.IsMap())
    fail(file, line_of(n), key + ".outputs", "expected a mapping (got " + describe(n) + ")");
  for (const auto& kv : n) {
    const std::string out = kv.first.Scalar();
    const std::string where = key + ".outputs." + out;
    const YAML::Node v = kv.second;
    BoundValue b = s.outputs.count(out) ? s.outputs[out] : BoundValue{"uri_folder", ""};
    const std::string fallback = p_.run_dir + "/" + d.name + "/" + out;
    if (v.IsScalar()) {
      const auto parts = split_dots(sole_ref(v.Scalar()).value_or(""));
      if (parts.size() == 3 && parts[0] == "parent" && parts[1] == "outputs") {
        auto it = p_.outputs.find(parts[2]);
        if (it == p_.outputs.end()) {
          fail(file, line_of(v), where,
               "refers to pipeline output " + quote_whole(parts[2]) +
                   ", which is not defined under outputs");
        }
        b.value = it->second.value;
        if (it->second.type != "uri_folder") b.type = it->second.type;
      } else {
        fail(file, line_of(v), where,
             "expected a mapping with type and path, or ${{parent.outputs.<name>}} (got " +
                 describe(v) + ")");
      }
    } else if (v.IsMap()) {
      if (v["type"]) b.type = std::string(trim(scalar(v["type"], where + ".type", "a type")));
      if (v["path"] || b.value.empty()) {
        YAML::Node p = v["path"];
        if (p && p.IsScalar()) {
          const auto parts = split_dots(sole_ref(p.Scalar()).value_or(""));
          if (parts.size() == 3 && parts[0] == "parent" && parts[1] == "outputs" &&
              p_.outputs.count(parts[2])) {
            b.value = p_.outputs[parts[2]].value;
            s.outputs[out] = b;
            continue;
          }
        }
        b.value = output_path(file, p, base, where, fallback, b.type);
      }
    } else if (b.value.empty()) {
      b.value = fallback;  // `name:` with nothing: a folder of its own
    }
    if (b.value.empty()) b.value = fallback;
    s.outputs[out] = b;
  }
}

// A command step: its command line with the bindings substituted, its folder and variables.
void PipelineParser::resolve_command(const Def& d, PipelineStep& s) {
  const std::string key = "jobs." + d.name;
  const std::string def_base = fs::path(d.file_abs).parent_path().string();
  // A parallel job's parser reports its own compute and environment.
  notice_ignored(d.job["compute"], key + ".compute");
  notice_ignored(d.def["environment"], key + ".environment");
  const YAML::Node cmd = d.def["command"];
  if (!cmd) fail(d.file, line_of(d.def), key + ".command", "expected a command line (got nothing)");
  s.command = substitute(d, s, scalar(cmd, key + ".command", "a command line"), cmd);
  s.cwd = def_base;
  if (const YAML::Node code = d.def["code"]; code && !code.IsNull()) {
    s.cwd = local_input_path(d.file, code, key + ".code", def_base);
    std::error_code ec;
    if (!fs::is_directory(s.cwd, ec)) {
      fail(d.file, line_of(code), key + ".code",
           "expected an existing folder (got " + quote_whole(code.Scalar()) +
               ", which does not exist)");
    }
  }
  if (const YAML::Node env = d.def["environment_variables"]; env && env.IsMap()) {
    for (const auto& kv : env) {
      s.environment_variables[kv.first.Scalar()] =
          scalar(kv.second, key + ".environment_variables." + kv.first.Scalar(), "a value");
    }
  }
}

// A parallel step: the definition, given concrete inputs and outputs, parsed as a job.
void PipelineParser::resolve_parallel(const Def& d, PipelineStep& s) {
  const std::string key = "jobs." + d.name;
  // type: parallel. Give the definition concrete inputs and outputs and parse it as a job.
  // Edited in place (a clone would lose the line marks that messages need); nothing reads the
  // definition's inputs and outputs after this point.
  YAML::Node job = d.def;
  job.remove("component");
  YAML::Node ins(YAML::NodeType::Map);
  for (const auto& [name, b] : s.inputs) {
    if (b.type == "literal") {
      ins[name] = b.value;
    } else {
      YAML::Node m(YAML::NodeType::Map);
      m["type"] = b.type;
      m["path"] = b.value;
      ins[name] = m;
    }
  }
  YAML::Node outs(YAML::NodeType::Map);
  for (const auto& [name, b] : s.outputs) {
    YAML::Node m(YAML::NodeType::Map);
    m["type"] = b.type == "uri_file" ? "uri_file" : "uri_folder";
    m["path"] = b.value;
    outs[name] = m;
  }
  if (!s.inputs.empty()) job["inputs"] = ins;
  if (!s.outputs.empty()) job["outputs"] = outs;
  // Keys a pipeline's parallel job may carry that a standalone job file has no use for.
  for (const char* k : {"is_deterministic", "version", "settings"}) job.remove(k);
  if (!job["name"]) job["name"] = d.name;
  auto cfg = detail::parse_job_node(job, d.file, d.file_abs, false);
  if (!cfg) throw YamlError{cfg.error().message + " (in " + key + ")"};
  s.job = std::move(*cfg);
  for (const auto& n : s.job.notices) p_.notices.push_back(key + ": " + n);
  s.job.notices.clear();
}

Pipeline PipelineParser::run(const YAML::Node& root) {
  if (!root.IsDefined() || !root.IsMap()) {
    fail(line_of(root), "", "expected a mapping of pipeline keys (got " + describe(root) + ")");
  }
  static const std::set<std::string> kKeys = {
      "type",    "$schema",    "name",     "display_name", "description", "experiment_name",
      "tags",    "properties", "settings", "inputs",       "outputs",     "jobs",
      "compute", "identity"};
  for (const auto& kv : root) {
    if (!kKeys.count(kv.first.Scalar())) {
      fail(line_of(kv.first), kv.first.Scalar(),
           "unknown pipeline key; expected one of type, name, display_name, description, "
           "experiment_name, tags, settings, inputs, outputs, jobs, compute");
    }
  }
  p_.name = root["name"] && root["name"].IsScalar() ? root["name"].Scalar() : "";
  if (p_.name.empty() && root["display_name"] && root["display_name"].IsScalar()) {
    p_.name = root["display_name"].Scalar();
  }
  if (p_.name.empty()) p_.name = fs::path(p_.spec_path).stem().string();
  notice_ignored(root["compute"], "compute");
  if (const YAML::Node st = root["settings"]; st && st.IsMap()) {
    notice_ignored(st["default_compute"], "settings.default_compute");
    notice_ignored(st["default_environment"], "settings.default_environment");
  }
  if (root["inputs"]) parse_inputs(root["inputs"]);
  if (root["outputs"]) parse_outputs(root["outputs"]);
  const YAML::Node jobs = root["jobs"];
  if (!jobs || !jobs.IsMap() || jobs.size() == 0) {
    fail(line_of(jobs ? jobs : root), "jobs",
         "expected a mapping of one or more jobs (got " + describe(jobs) + ")");
  }
  std::vector<Def> defs;
  defs.reserve(jobs.size());
  for (const auto& kv : jobs) defs.push_back(load_def(kv.first.Scalar(), kv.second));
  for (std::size_t i : order(defs)) {
    PipelineStep s = resolve(defs[i]);
    done_[s.name] = s;
    p_.steps.push_back(std::move(s));
  }
  return std::move(p_);
}

}  // namespace

Expected<std::string> job_file_type(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return make_error(ErrorCode::InvalidArgument, path + ": expected a job file (got a folder)");
  }
  auto text = read_file(path);
  if (!text) return Unexpected{text.error()};
  try {
    YAML::Node root = YAML::Load(*text);
    // A batch deployment's type (model, pipeline) is the deployment's, not a job's: its own
    // loader reads it (and says why a pipeline deployment does not run).
    if (root.IsMap() && root["endpoint_name"]) return std::string("deployment");
    if (root.IsMap() && root["type"] && root["type"].IsScalar())
      return std::string(trim(root["type"].Scalar()));
    return std::string();
  } catch (const YAML::Exception&) {
    return std::string();  // load_job() reports the syntax error with its place
  }
}

Expected<Pipeline> load_pipeline(const std::string& path, const std::string& run_dir) {
  auto text = read_file(path);
  if (!text) return Unexpected{text.error()};
  std::error_code ec;
  const std::string spec_path = resolve_path(fs::current_path(ec).string(), path);
  return detail::read_yaml(path, [&] {
    return PipelineParser(path, spec_path, run_dir)
        .run(detail::load_yaml(*text, path, /*one_document=*/false));
  });
}

Expected<void> check_step_files(const PipelineStep& step) {
  const JobConfig& c = step.job;
  const std::string where = step.file + ": jobs." + step.name + ": ";
  std::error_code ec;
  for (const auto& in : c.inputs) {
    if (in.name != c.input_data) continue;
    const bool ok = in.type == "uri_file" ? fs::is_regular_file(in.path, ec)
                    : in.type == "mltable"
                        ? fs::exists(fs::is_directory(in.path, ec) ? fs::path(in.path) / "MLTable"
                                                                   : fs::path(in.path),
                                     ec)
                        : fs::is_directory(in.path, ec);
    if (!ok) {
      return make_error(ErrorCode::NotFound,
                        where + "inputs." + in.name + ": expected an existing " + in.type +
                            " (got " + quote_whole(in.path) + ", which does not exist" +
                            (step.after.empty() ? "" : " after the jobs it depends on ran") + ")");
    }
  }
  if (!fs::is_directory(c.code_dir, ec)) {
    return make_error(ErrorCode::NotFound, where + "task.code: expected an existing folder (got " +
                                               quote_whole(c.code_dir) + ")");
  }
  if (c.task_type == "run_function" &&
      !fs::is_regular_file(resolve_path(c.code_dir, c.entry_script), ec)) {
    return make_error(ErrorCode::NotFound,
                      where + "task.entry_script: expected an existing file (got " +
                          quote_whole(resolve_path(c.code_dir, c.entry_script)) + ")");
  }
  return {};
}

std::string with_interpreter(const std::string& command, const std::string& python) {
  if (python.empty()) return command;
  const std::size_t start = command.find_first_not_of(" \t\n");
  if (start == std::string::npos) return command;
  std::size_t end = command.find_first_of(" \t\n;&|", start);
  if (end == std::string::npos) end = command.size();
  const std::string_view word = std::string_view(command).substr(start, end - start);
  if (word != "python" && word != "python3") return command;
  std::string quoted = "'";
  for (char c : python) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  return command.substr(0, start) + quoted + command.substr(end);
}

}  // namespace fanout::config
