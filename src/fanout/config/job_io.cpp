// A parallel job's inputs, outputs and references to them. See detail/job_io.hpp.
#include "fanout/config/detail/job_io.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace fanout::config::detail {

std::vector<InputSpec> read_inputs(const YamlReader& r, const Entry& e, const std::string& base_dir,
                                   std::map<std::string, Where>& path_where) {
  std::vector<InputSpec> inputs;
  Fields all = r.collect(e);
  for (const Entry& in : all.entries) {
    InputSpec spec;
    spec.name = in.name;
    if (in.value.IsScalar()) {
      // A literal (`threshold: 0.5`), as Azure ML allows; used only through ${{inputs.x}}.
      spec.type = "literal";
      spec.value = in.value.Scalar();
      inputs.push_back(std::move(spec));
      continue;
    }
    if (!in.value.IsMap()) {
      r.fail(in.where(), "expected a literal value or a mapping with type and path (got " +
                             describe(in.value) + ")");
    }
    Fields f = r.fields(
        in, {"type", "path", "mode", "description", "optional", "default", "partition_format"});
    spec.type = "uri_folder";  // Azure ML's default input type
    if (const Entry* t = f.get("type")) spec.type = std::string(trim(r.text(*t)));
    if (const Entry* m = f.get("mode")) spec.mode = r.text(*m);
    // fanout_list (a fanout extension): a text file whose lines are the items.
    static constexpr std::array<std::string_view, 7> kPathTypes = {
        "uri_folder",   "uri_file",     "mltable",    "custom_model",
        "mlflow_model", "triton_model", "fanout_list"};
    static constexpr std::array<std::string_view, 4> kLiteralTypes = {"string", "integer", "number",
                                                                      "boolean"};
    if (std::find(kLiteralTypes.begin(), kLiteralTypes.end(), spec.type) != kLiteralTypes.end()) {
      // The component form of a literal: `{type: number, default: 0.5}`.
      const Entry* d = f.get("default");
      if (!d) {
        r.fail(f.missing("default"),
               "expected the value of a " + spec.type + " input (got nothing)");
      }
      spec.type = "literal";
      spec.value = r.text(*d);
    } else if (std::find(kPathTypes.begin(), kPathTypes.end(), spec.type) != kPathTypes.end()) {
      const Entry* p = f.get("path");
      if (!p) r.fail(f.missing("path"), "expected a local path (got nothing)");
      spec.path = r.local_path(*p, base_dir);
      path_where[spec.name] = p->where();
      if (const Entry* pf = f.get("partition_format")) spec.partition_format = r.text(*pf);
    } else {
      const Entry* t = f.get("type");
      r.fail(t->where(),
             "expected uri_folder, uri_file, mltable, custom_model, mlflow_model, triton_model, "
             "fanout_list, string, integer, number or boolean (got " +
                 quote(spec.type) + ")");
    }
    inputs.push_back(std::move(spec));
  }
  return inputs;
}

std::vector<OutputSpec> read_outputs(const YamlReader& r, const Entry& e,
                                     const std::string& base_dir) {
  std::vector<OutputSpec> outputs;
  Fields all = r.collect(e);
  for (const Entry& out : all.entries) {
    OutputSpec spec;
    spec.name = out.name;
    spec.type = "uri_folder";  // Azure ML's default; an empty entry is a folder with no path
    if (!out.is_null() && !out.value.IsMap()) {
      r.fail(out.where(),
             "expected a mapping with type and path (got " + describe(out.value) + ")");
    }
    Fields f = r.fields(out, {"type", "path", "mode", "description"});
    if (const Entry* t = f.get("type")) {
      spec.type = std::string(trim(r.text(*t)));
      // An mltable output is a folder; fanout writes its MLTable file when the job ends.
      if (spec.type != "uri_folder" && spec.type != "uri_file" && spec.type != "mltable") {
        r.fail(t->where(),
               "expected uri_folder, uri_file or mltable (got " + quote(spec.type) + ")");
      }
    }
    if (const Entry* m = f.get("mode")) (void)r.text(*m);
    if (const Entry* p = f.get("path")) spec.path = r.local_path(*p, base_dir);
    outputs.push_back(std::move(spec));
  }
  return outputs;
}

std::optional<Ref> parse_ref(std::string_view inner) {
  inner = trim(inner);
  if (inner.starts_with("inputs.") && inner.size() > 7) {
    return Ref{false, std::string(trim(inner.substr(7)))};
  }
  if (inner.starts_with("outputs.") && inner.size() > 8) {
    return Ref{true, std::string(trim(inner.substr(8)))};
  }
  return std::nullopt;
}

std::optional<Ref> sole_io_ref(std::string_view s) {
  auto inner = sole_ref(s);
  return inner ? parse_ref(*inner) : std::nullopt;
}

std::string JobRefs::resolve(const Where& w, const Ref& ref, std::string_view written) const {
  std::vector<std::string> names;
  if (ref.output) {
    for (const auto& o : outputs_) {
      if (o.name != ref.name) {
        names.push_back(o.name);
        continue;
      }
      if (o.path.empty()) {
        r_.fail(w, "expected an output with a path (got " + quote(written) + ", which has none)");
      }
      return o.path;
    }
    r_.fail(w, "expected a name from outputs (" + (names.empty() ? "none defined" : join(names)) +
                   ") (got " + quote(written) + ")");
  }
  for (const auto& in : inputs_) {
    if (in.name != ref.name) {
      names.push_back(in.name);
      continue;
    }
    return in.type == "literal" ? in.value : in.path;
  }
  r_.fail(w, "expected a name from inputs (" + (names.empty() ? "none defined" : join(names)) +
                 ") (got " + quote(written) + ")");
}

std::string JobRefs::substitute(const Where& w, std::string_view s) const {
  std::string out;
  std::size_t pos = 0;
  while (true) {
    std::size_t start = s.find("${{", pos);
    if (start == std::string_view::npos) break;
    std::size_t end = s.find("}}", start + 3);
    if (end == std::string_view::npos) {
      r_.fail(w, "expected }} to close " + quote(s.substr(start, 40)) + " (got end of text)");
    }
    std::string_view written = s.substr(start, end + 2 - start);
    auto ref = parse_ref(s.substr(start + 3, end - start - 3));
    if (!ref) {
      r_.fail(w, "expected ${{inputs.<name>}} or ${{outputs.<name>}} (got " + quote(written) + ")");
    }
    out.append(s.substr(pos, start - pos));
    out += resolve(w, *ref, written);
    pos = end + 2;
  }
  out.append(s.substr(pos));
  return out;
}

}  // namespace fanout::config::detail
