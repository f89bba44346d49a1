// Azure ML parallel-job YAML to JobConfig. Every key, default and message is in docs/job-spec.md.
// yaml-cpp is used only in this file; its exceptions never leave it.
#include "fanout/config/job_spec.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "fanout/config/detail/job_node.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::config {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kMaxI64 = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMaxU32 = std::numeric_limits<std::uint32_t>::max();

// ParallelRunStep's own flags: fanout takes them out of program_arguments (each takes one value),
// so the entry script's sys.argv holds only the user's arguments, as under Azure ML.
constexpr std::array<std::string_view, 18> kSystemFlags = {
    "error_threshold",
    "allowed_failed_count",
    "allowed_failed_percent",
    "task_overhead_timeout",
    "progress_update_timeout",
    "first_task_creation_timeout",
    "resource_monitor_interval",
    "profiling_module",
    "copy_logs_to_parent",
    "metrics_name_prefix",
    "push_metrics_to_parent",
    "append_row_file_name",
    "logging_level",
    "run_invocation_timeout",
    "run_max_try",
    "mini_batch_size",
    "process_count_per_node",
    "node_count",
};

// ParallelRunStep's name for the append_row file when only a folder is known.
constexpr std::string_view kDefaultRowFile = "parallel_run_step.txt";
// ParallelRunStep's default mini-batch for tabular input.
constexpr std::uint64_t kDefaultTabularBytes = 1024 * 1024;

// What messages say was expected, where several places check the same thing.
constexpr std::string_view kSecondsText = "a number of seconds > 0";
constexpr std::string_view kPercentText = "a percentage from 0 to 100, or -1";
constexpr std::string_view kLevelText = "DEBUG, INFO, WARNING, ERROR or CRITICAL";

// Where a message points: the dotted key and its 1-based line (0 when there is none).
struct Where {
  std::string key{};
  int line = 0;
};

// The first error found. Thrown only inside this file, so that a check deep in the tree ends the
// whole parse in one step ("the first error wins"); parse_job() turns it into an Error.
struct SpecError {
  std::string message;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// `s` in double quotes with quotes, backslashes and line breaks escaped, shortened when long.
std::string quote(std::string_view s) {
  constexpr std::size_t kMax = 80;
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size() && i < kMax; ++i) {
    char c = s[i];
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  if (s.size() > kMax) out += "...";
  out += '"';
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

int line_of(const YAML::Node& n) {
  if (!n.IsDefined()) return 0;
  const YAML::Mark m = n.Mark();
  return m.line >= 0 ? m.line + 1 : 0;
}

// What a node is, for the "(got ...)" part of a message.
std::string describe(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "nothing";
  if (n.IsScalar()) return quote(n.Scalar());
  if (n.IsSequence()) return "a list";
  return "a mapping";
}

std::optional<double> to_double(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::int64_t> to_int(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && p == s.data() + s.size()) return v;
  // YAML floats that hold a whole number ("2.0", "1e3") are fine where an integer is expected.
  auto d = to_double(s);
  if (d && std::floor(*d) == *d && std::fabs(*d) < 9.0e18) return static_cast<std::int64_t>(*d);
  return std::nullopt;
}

// Edit distance, for "did you mean" on unknown keys.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// One `key: value` pair of a mapping.
struct Entry {
  std::string key{};   // dotted from the root, for messages: "task.entry_script"
  std::string name{};  // the last part: "entry_script"
  YAML::Node key_node{};
  YAML::Node value{};

  [[nodiscard]] bool is_null() const { return !value.IsDefined() || value.IsNull(); }
  // The value's line; the key's when the value is null, since yaml-cpp marks a null value at
  // the token after it (often the next line).
  [[nodiscard]] int line() const {
    int l = is_null() ? 0 : line_of(value);
    return l > 0 ? l : line_of(key_node);
  }
  [[nodiscard]] Where where() const { return {key, line()}; }
};

// The entries of one mapping, in file order.
struct Fields {
  Entry self{};
  std::vector<Entry> entries{};

  [[nodiscard]] const Entry* get(std::string_view name) const {
    for (const auto& e : entries) {
      if (e.name == name) return &e;
    }
    return nullptr;
  }
  // Where a missing key would go: the mapping's own key.
  [[nodiscard]] Where missing(std::string_view name) const {
    std::string key = self.key.empty() ? std::string(name) : self.key + "." + std::string(name);
    return {key, self.key.empty() ? line_of(self.value) : line_of(self.key_node)};
  }
};

// ">= 1" for open-ended ranges, "from 0 to 100" otherwise.
std::string int_range(std::int64_t lo, std::int64_t hi) {
  return hi >= kMaxU32 ? ">= " + std::to_string(lo)
                       : "from " + std::to_string(lo) + " to " + std::to_string(hi);
}

// A parsed `${{inputs.x}}` / `${{outputs.x}}` reference.
struct Ref {
  bool output = false;
  std::string name{};
};

// `inner` is what sits between `${{` and `}}`, spaces trimmed.
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

// The reference when `s` is exactly one `${{...}}` (spaces around allowed), else nothing.
std::optional<Ref> sole_ref(std::string_view s) {
  s = trim(s);
  if (!s.starts_with("${{") || !s.ends_with("}}") || s.size() < 5) return std::nullopt;
  std::string_view inner = s.substr(3, s.size() - 5);
  if (inner.find("}}") != std::string_view::npos) return std::nullopt;
  return parse_ref(inner);
}

// Parses one job file. Holds the file name for messages and the config being filled.
// Single use: construct, call run() once.
class Parser final {
 public:
  Parser(std::string file, std::string spec_path, bool check_files = true)
      : file_(std::move(file)), check_files_(check_files) {
    cfg_.spec_path = std::move(spec_path);
    cfg_.base_dir = fs::path(cfg_.spec_path).parent_path().string();
  }

  JobConfig run(const YAML::Node& root);

 private:
  [[noreturn]] void fail(const Where& w, std::string_view what) const {
    std::string msg = file_;
    if (w.line > 0) msg += ":" + std::to_string(w.line);
    msg += ": ";
    if (!w.key.empty()) msg += w.key + ": ";
    msg += what;
    throw SpecError{std::move(msg)};
  }

  Fields collect(const Entry& parent) const;
  Fields fields(const Entry& parent, std::initializer_list<std::string_view> allowed) const;
  void reject_unknown(const Fields& f, std::initializer_list<std::string_view> allowed) const;

  // The value of a scalar key; `expect` says what was wanted when it is not one.
  std::string text(const Entry& e, std::string_view expect = "a single value") const;
  std::int64_t integer(const Where& w, std::string_view s, std::int64_t lo, std::int64_t hi) const;
  std::int64_t integer(const Entry& e, std::int64_t lo, std::int64_t hi) const {
    return integer(e.where(), text(e, "an integer " + int_range(lo, hi)), lo, hi);
  }
  std::uint32_t u32(const Entry& e, std::int64_t lo) const {
    return static_cast<std::uint32_t>(integer(e, lo, kMaxU32));
  }
  double positive(const Where& w, std::string_view s) const;
  double positive(const Entry& e) const { return positive(e.where(), text(e, kSecondsText)); }
  double percent(const Where& w, std::string_view s) const;
  double percent(const Entry& e) const { return percent(e.where(), text(e, kPercentText)); }
  std::string level(const Where& w, std::string_view s) const;
  std::string level(const Entry& e) const { return level(e.where(), text(e, kLevelText)); }
  bool boolean(const Entry& e) const;
  std::string local_path(const Where& w, std::string_view s, const std::string& base) const;
  std::string local_path(const Entry& e, const std::string& base) const {
    return local_path(e.where(), text(e, "a local path"), base);
  }

  std::string resolve_ref(const Where& w, const Ref& r, std::string_view written) const;
  std::string substitute(const Where& w, std::string_view s) const;

  void claim(std::string_view field, const std::string& source);
  void notice(const Entry& e);

  void parse_type(const Fields& root) const;
  void parse_inputs(const Entry& e);
  void parse_outputs(const Entry& e);
  void parse_input_data(const Fields& root);
  void apply_batch_size(const Where& w, const std::string& s, const std::string& source);
  void parse_limits(const Fields& root);
  void parse_task(const Fields& root);
  void consume_program_arguments(const Entry& e);
  void apply_system_args(const Where& w);
  void parse_append_row_to(const Entry* e);
  void parse_fanout(const Entry& e);
  void check_files() const;
  void expect_folder(const Where& w, const std::string& path) const;
  void expect_file(const Where& w, const std::string& path) const;

  std::string file_;
  JobConfig cfg_{};
  std::map<std::string, std::string, std::less<>> set_by_{};  // field -> key that last set it
  std::map<std::string, Where, std::less<>> input_where_{};   // input name -> its path's place
  Where input_data_where_{};
  Where code_where_{};
  Where entry_where_{};
  Where library_where_{};
  // false: a pipeline step whose input an earlier step makes; its paths are checked later.
  bool check_files_ = true;
};

Fields Parser::collect(const Entry& parent) const {
  Fields f{parent, {}};
  // `task:` with nothing after it reads as an empty mapping; the checks on its keys follow.
  if (parent.is_null()) return f;
  if (!parent.value.IsMap()) {
    fail(parent.where(), "expected a mapping (got " + describe(parent.value) + ")");
  }
  for (const auto& kv : parent.value) {
    const YAML::Node k = kv.first;  // copies: yaml-cpp's iterator hands out temporaries
    if (!k.IsScalar()) {
      fail({parent.key, line_of(k)}, "expected a plain key (got " + describe(k) + ")");
    }
    Entry e{parent.key.empty() ? k.Scalar() : parent.key + "." + k.Scalar(), k.Scalar(), k,
            kv.second};
    // yaml-cpp keeps both copies of a repeated key; Azure ML would take one silently.
    if (const Entry* first = f.get(e.name)) {
      fail({e.key, line_of(k)},
           "duplicate key (first at line " + std::to_string(line_of(first->key_node)) + ")");
    }
    f.entries.push_back(std::move(e));
  }
  return f;
}

void Parser::reject_unknown(const Fields& f,
                            std::initializer_list<std::string_view> allowed) const {
  for (const auto& e : f.entries) {
    if (std::find(allowed.begin(), allowed.end(), e.name) != allowed.end()) continue;
    std::string what = "unknown key";
    std::string_view best;
    std::size_t best_d = 3;  // suggest only near misses: up to two edits
    for (std::string_view a : allowed) {
      std::size_t d = distance(e.name, a);
      if (d < best_d) {
        best_d = d;
        best = a;
      }
    }
    if (!best.empty()) what += " (did you mean " + std::string(best) + "?)";
    fail({e.key, line_of(e.key_node)}, what);
  }
}

Fields Parser::fields(const Entry& parent, std::initializer_list<std::string_view> allowed) const {
  Fields f = collect(parent);
  reject_unknown(f, allowed);
  return f;
}

std::string Parser::text(const Entry& e, std::string_view expect) const {
  if (!e.value.IsDefined() || !e.value.IsScalar()) {
    fail(e.where(), "expected " + std::string(expect) + " (got " + describe(e.value) + ")");
  }
  return e.value.Scalar();
}

std::int64_t Parser::integer(const Where& w, std::string_view s, std::int64_t lo,
                             std::int64_t hi) const {
  auto v = to_int(s);
  if (!v) fail(w, "expected an integer " + int_range(lo, hi) + " (got " + quote(s) + ")");
  const std::string got = " (got " + std::string(trim(s)) + ")";
  if (*v < lo) fail(w, "expected an integer >= " + std::to_string(lo) + got);
  if (*v > hi) fail(w, "expected an integer <= " + std::to_string(hi) + got);
  return *v;
}

double Parser::positive(const Where& w, std::string_view s) const {
  auto v = to_double(s);
  if (!v) fail(w, "expected " + std::string(kSecondsText) + " (got " + quote(s) + ")");
  if (*v <= 0) {
    fail(w, "expected " + std::string(kSecondsText) + " (got " + std::string(trim(s)) + ")");
  }
  return *v;
}

double Parser::percent(const Where& w, std::string_view s) const {
  auto v = to_double(s);
  if (!v) fail(w, "expected " + std::string(kPercentText) + " (got " + quote(s) + ")");
  // ParallelRunStep reads -1 as "ignore failures", which is what 100 means.
  if (*v == -1) return 100;
  if (*v < 0 || *v > 100) {
    fail(w, "expected " + std::string(kPercentText) + " (got " + std::string(trim(s)) + ")");
  }
  return *v;
}

std::string Parser::level(const Where& w, std::string_view s) const {
  std::string u = upper(trim(s));
  for (std::string_view l : {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}) {
    if (u == l) return u;
  }
  fail(w, "expected " + std::string(kLevelText) + " (got " + quote(s) + ")");
}

bool Parser::boolean(const Entry& e) const {
  std::string s = lower(trim(text(e, "true or false")));
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  fail(e.where(), "expected true or false (got " + quote(e.value.Scalar()) + ")");
}

std::string Parser::local_path(const Where& w, std::string_view s, const std::string& base) const {
  std::string_view p = trim(s);
  if (p.empty()) fail(w, "expected a local path (got nothing)");
  if (p.starts_with("azureml:")) {
    fail(w, "expected a local path; Azure ML assets and datastores are not local (got " + quote(p) +
                ")");
  }
  if (p.starts_with("file://")) {
    p.remove_prefix(7);
  } else if (auto scheme = p.find("://"); scheme != std::string_view::npos) {
    fail(w, "expected a local path; remote URIs are not read (got " + quote(p) + ")");
  }
  return resolve_path(base, std::string(p));
}

std::string Parser::resolve_ref(const Where& w, const Ref& r, std::string_view written) const {
  if (r.output) {
    std::vector<std::string> names;
    for (const auto& o : cfg_.outputs) {
      if (o.name != r.name) {
        names.push_back(o.name);
        continue;
      }
      if (o.path.empty()) {
        fail(w, "expected an output with a path (got " + quote(written) + ", which has none)");
      }
      return o.path;
    }
    fail(w, "expected a name from outputs (" + (names.empty() ? "none defined" : join(names)) +
                ") (got " + quote(written) + ")");
  }
  std::vector<std::string> names;
  for (const auto& in : cfg_.inputs) {
    if (in.name != r.name) {
      names.push_back(in.name);
      continue;
    }
    return in.type == "literal" ? in.value : in.path;
  }
  fail(w, "expected a name from inputs (" + (names.empty() ? "none defined" : join(names)) +
              ") (got " + quote(written) + ")");
}

std::string Parser::substitute(const Where& w, std::string_view s) const {
  std::string out;
  std::size_t pos = 0;
  while (true) {
    std::size_t start = s.find("${{", pos);
    if (start == std::string_view::npos) break;
    std::size_t end = s.find("}}", start + 3);
    if (end == std::string_view::npos) {
      fail(w, "expected }} to close " + quote(s.substr(start, 40)) + " (got end of text)");
    }
    std::string_view written = s.substr(start, end + 2 - start);
    auto ref = parse_ref(s.substr(start + 3, end - start - 3));
    if (!ref) {
      fail(w, "expected ${{inputs.<name>}} or ${{outputs.<name>}} (got " + quote(written) + ")");
    }
    out.append(s.substr(pos, start - pos));
    out += resolve_ref(w, *ref, written);
    pos = end + 2;
  }
  out.append(s.substr(pos));
  return out;
}

// Several keys can set one field (retry_settings.max_retries, run_max_try, --run_max_try); the
// later source wins and a notice says so, since the file then disagrees with itself.
void Parser::claim(std::string_view field, const std::string& source) {
  auto it = set_by_.find(field);
  if (it != set_by_.end() && it->second != source) {
    cfg_.notices.push_back(source + " overrides " + it->second);
  }
  set_by_.insert_or_assign(std::string(field), source);
}

void Parser::notice(const Entry& e) {
  if (e.value.IsDefined() && e.value.IsScalar()) {
    cfg_.notices.push_back(e.key + ": " + e.value.Scalar() + " ignored (fanout runs locally)");
  } else if (e.value.IsDefined() && e.value.IsMap()) {
    cfg_.notices.push_back(e.key + ": inline definition ignored (fanout runs locally)");
  }
}

void Parser::parse_type(const Fields& root) const {
  const Entry* t = root.get("type");
  if (!t) fail(root.missing("type"), "expected \"parallel\" (got nothing)");
  std::string v = t->value.IsDefined() && t->value.IsScalar() ? std::string(trim(text(*t))) : "";
  if (v == "parallel") return;
  if (v == "pipeline") {
    fail(t->where(), "expected \"parallel\"; pipelines are not supported yet (got \"pipeline\")");
  }
  fail(t->where(), "expected \"parallel\" (got " + describe(t->value) + ")");
}

void Parser::parse_inputs(const Entry& e) {
  Fields all = collect(e);
  for (const Entry& in : all.entries) {
    InputSpec spec;
    spec.name = in.name;
    if (in.value.IsScalar()) {
      // A literal (`threshold: 0.5`), as Azure ML allows; used only through ${{inputs.x}}.
      spec.type = "literal";
      spec.value = in.value.Scalar();
      cfg_.inputs.push_back(std::move(spec));
      continue;
    }
    if (!in.value.IsMap()) {
      fail(in.where(), "expected a literal value or a mapping with type and path (got " +
                           describe(in.value) + ")");
    }
    Fields f = fields(
        in, {"type", "path", "mode", "description", "optional", "default", "partition_format"});
    spec.type = "uri_folder";  // Azure ML's default input type
    if (const Entry* t = f.get("type")) spec.type = std::string(trim(text(*t)));
    if (const Entry* m = f.get("mode")) spec.mode = text(*m);
    static constexpr std::array<std::string_view, 6> kPathTypes = {
        "uri_folder", "uri_file", "mltable", "custom_model", "mlflow_model", "triton_model"};
    static constexpr std::array<std::string_view, 4> kLiteralTypes = {"string", "integer", "number",
                                                                      "boolean"};
    if (std::find(kLiteralTypes.begin(), kLiteralTypes.end(), spec.type) != kLiteralTypes.end()) {
      // The component form of a literal: `{type: number, default: 0.5}`.
      const Entry* d = f.get("default");
      if (!d) {
        fail(f.missing("default"), "expected the value of a " + spec.type + " input (got nothing)");
      }
      spec.type = "literal";
      spec.value = text(*d);
    } else if (std::find(kPathTypes.begin(), kPathTypes.end(), spec.type) != kPathTypes.end()) {
      const Entry* p = f.get("path");
      if (!p) fail(f.missing("path"), "expected a local path (got nothing)");
      spec.path = local_path(*p, cfg_.base_dir);
      input_where_[spec.name] = p->where();
      if (const Entry* pf = f.get("partition_format")) spec.partition_format = text(*pf);
    } else {
      const Entry* t = f.get("type");
      fail(t->where(),
           "expected uri_folder, uri_file, mltable, custom_model, mlflow_model, triton_model, "
           "string, integer, number or boolean (got " +
               quote(spec.type) + ")");
    }
    cfg_.inputs.push_back(std::move(spec));
  }
}

void Parser::parse_outputs(const Entry& e) {
  Fields all = collect(e);
  for (const Entry& out : all.entries) {
    OutputSpec spec;
    spec.name = out.name;
    spec.type = "uri_folder";  // Azure ML's default; an empty entry is a folder with no path
    if (!out.is_null() && !out.value.IsMap()) {
      fail(out.where(), "expected a mapping with type and path (got " + describe(out.value) + ")");
    }
    Fields f = fields(out, {"type", "path", "mode", "description"});
    if (const Entry* t = f.get("type")) {
      spec.type = std::string(trim(text(*t)));
      if (spec.type != "uri_folder" && spec.type != "uri_file") {
        fail(t->where(), "expected uri_folder or uri_file (got " + quote(spec.type) + ")");
      }
    }
    if (const Entry* m = f.get("mode")) (void)text(*m);
    if (const Entry* p = f.get("path")) spec.path = local_path(*p, cfg_.base_dir);
    cfg_.outputs.push_back(std::move(spec));
  }
}

void Parser::parse_input_data(const Fields& root) {
  const Entry* e = root.get("input_data");
  if (!e) fail(root.missing("input_data"), "expected ${{inputs.<name>}} (got nothing)");
  const std::string s = text(*e);
  auto ref = sole_ref(s);
  if (!ref || ref->output) fail(e->where(), "expected ${{inputs.<name>}} (got " + quote(s) + ")");
  (void)resolve_ref(e->where(), *ref, trim(s));  // fails naming the inputs when unknown
  for (const auto& in : cfg_.inputs) {
    if (in.name != ref->name) continue;
    if (in.type != "uri_folder" && in.type != "uri_file" && in.type != "mltable") {
      fail(e->where(), "expected a uri_folder, uri_file or mltable input (got " + quote(trim(s)) +
                           ", of type " + in.type + ")");
    }
  }
  cfg_.input_data = ref->name;
  input_data_where_ = input_where_[ref->name];
}

void Parser::apply_batch_size(const Where& w, const std::string& s, const std::string& source) {
  auto size = parse_batch_size(s);
  if (!size) fail(w, size.error().message);
  cfg_.mini_batch_size = std::string(trim(s));
  cfg_.mini_batch_files = size->files;
  cfg_.mini_batch_bytes = size->bytes;
  // For tabular input ParallelRunStep reads a bare number as bytes ("1024" is 1 KiB).
  for (const auto& in : cfg_.inputs) {
    if (in.name == cfg_.input_data && in.type == "mltable" && size->files > 0) {
      cfg_.mini_batch_bytes = size->files;
      cfg_.mini_batch_files = 0;
    }
  }
  claim("mini_batch_size", source);
}

void Parser::parse_limits(const Fields& root) {
  if (const Entry* e = root.get("mini_batch_size")) {
    apply_batch_size(e->where(), text(*e, "a file count or a size like \"10kb\""), e->key);
  } else {
    for (const auto& in : cfg_.inputs) {
      if (in.name == cfg_.input_data && in.type == "mltable") {
        cfg_.mini_batch_size = "1MB";  // ParallelRunStep's default for tabular input
        cfg_.mini_batch_files = 0;
        cfg_.mini_batch_bytes = kDefaultTabularBytes;
      }
    }
  }
  if (const Entry* e = root.get("partition_keys")) {
    if (!e->is_null() && !e->value.IsSequence()) {
      fail(e->where(), "expected a list of column names (got " + describe(e->value) + ")");
    }
    if (!e->is_null()) {
      for (const auto& item : e->value) {
        Entry k{e->key, e->name, e->key_node, item};
        std::string s(trim(text(k)));
        if (s.empty()) fail(k.where(), "expected a column name (got \"\")");
        cfg_.partition_keys.push_back(std::move(s));
      }
      cfg_.partition_keys_line = e->where().line;
      if (!cfg_.partition_keys.empty() && root.get("mini_batch_size")) {
        // Azure ML v2: partition_keys decide the mini-batches; a size or count is not used.
        cfg_.notices.push_back("mini_batch_size: " + cfg_.mini_batch_size +
                               " ignored: partition_keys decide the mini-batches");
      }
    }
  }
  if (const Entry* e = root.get("resources")) {
    Fields f = fields(*e, {"instance_count", "instance_type", "shm_size", "properties",
                           "docker_args", "max_instance_count", "locations"});
    if (const Entry* c = f.get("instance_count")) {
      cfg_.instance_count = u32(*c, 1);
      claim("instance_count", c->key);
    }
  }
  if (const Entry* e = root.get("max_concurrency_per_instance")) {
    cfg_.max_concurrency_per_instance = u32(*e, 1);
    claim("max_concurrency_per_instance", e->key);
  }
  if (const Entry* e = root.get("mini_batch_error_threshold")) {
    cfg_.mini_batch_error_threshold = integer(*e, -1, kMaxI64);
    claim("mini_batch_error_threshold", e->key);
  }
  if (const Entry* e = root.get("error_threshold")) {
    cfg_.error_threshold = integer(*e, -1, kMaxI64);
    claim("error_threshold", e->key);
  }
  if (const Entry* e = root.get("allowed_failed_percent")) {
    cfg_.allowed_failed_percent = percent(*e);
    claim("allowed_failed_percent", e->key);
  }
  if (const Entry* e = root.get("logging_level")) {
    cfg_.logging_level = level(*e);
    claim("logging_level", e->key);
  }
  if (const Entry* e = root.get("retry_settings")) {
    Fields f = fields(*e, {"max_retries", "timeout"});
    if (const Entry* r = f.get("max_retries")) {
      cfg_.max_retries = u32(*r, 0);
      claim("max_retries", r->key);
    }
    if (const Entry* t = f.get("timeout")) {
      cfg_.timeout_s = positive(*t);
      claim("timeout_s", t->key);
    }
  }
  // ParallelRunStep (v1) spellings; run_max_try counts tries, max_retries counts retries.
  if (const Entry* e = root.get("run_max_try")) {
    cfg_.max_retries = static_cast<std::uint32_t>(integer(*e, 1, kMaxU32) - 1);
    claim("max_retries", e->key);
  }
  if (const Entry* e = root.get("run_invocation_timeout")) {
    cfg_.timeout_s = positive(*e);
    claim("timeout_s", e->key);
  }
  if (const Entry* e = root.get("environment_variables")) {
    Fields f = collect(*e);
    for (const Entry& v : f.entries) {
      if (v.name.empty() || v.name.find('=') != std::string::npos) {
        fail({v.key, line_of(v.key_node)},
             "expected a variable name without '=' (got " + quote(v.name) + ")");
      }
      cfg_.environment_variables[v.name] = v.is_null() ? std::string() : text(v);
    }
  }
}

void Parser::parse_task(const Fields& root) {
  const Entry* t = root.get("task");
  if (!t) fail(root.missing("task"), "expected a mapping with code and entry_script (got nothing)");
  Fields f = fields(*t, {"type", "code", "entry_script", "program_arguments", "append_row_to",
                         "environment", "command", "library"});
  if (const Entry* e = f.get("type")) {
    cfg_.task_type = std::string(trim(text(*e)));
    if (cfg_.task_type != "run_function" && cfg_.task_type != "command" &&
        cfg_.task_type != "native") {
      fail(e->where(),
           "expected run_function, command or native (got " + quote(cfg_.task_type) + ")");
    }
  }
  if (const Entry* e = f.get("environment")) notice(*e);

  cfg_.code_dir = cfg_.base_dir;  // Azure ML uploads the YAML's folder when code is absent
  code_where_ = f.missing("code");
  if (const Entry* e = f.get("code")) {
    cfg_.code_dir = local_path(*e, cfg_.base_dir);
    code_where_ = e->where();
  }

  // Each task type has exactly one way to name what runs; the others' keys are mistakes.
  const Entry* script = f.get("entry_script");
  const Entry* command = f.get("command");
  const Entry* library = f.get("library");
  const bool is_fn = cfg_.task_type == "run_function";
  const bool is_cmd = cfg_.task_type == "command";
  const bool is_native = cfg_.task_type == "native";
  auto only_for = [&](const Entry* e, bool ok, std::string_view type) {
    if (e && !ok) {
      fail({e->key, line_of(e->key_node)}, "used only with task.type " + std::string(type) +
                                               " (got task.type " + cfg_.task_type + ")");
    }
  };
  only_for(script, is_fn, "run_function");
  only_for(command, is_cmd, "command");
  only_for(library, is_native, "native");
  if (is_fn) {
    if (!script) {
      fail(f.missing("entry_script"), "expected a Python file under task.code (got nothing)");
    }
    cfg_.entry_script = std::string(trim(text(*script)));
    if (cfg_.entry_script.empty()) {
      fail(script->where(), "expected a Python file under task.code (got \"\")");
    }
    entry_where_ = script->where();
  }
  if (is_cmd) {
    if (!command) fail(f.missing("command"), "expected a command line (got nothing)");
    cfg_.command = substitute(command->where(), text(*command));
    if (trim(cfg_.command).empty()) fail(command->where(), "expected a command line (got \"\")");
  }
  if (is_native) {
    if (!library) fail(f.missing("library"), "expected a shared library path (got nothing)");
    library_where_ = library->where();
    const std::string lib(trim(text(*library)));
    if (lib.rfind("builtin:", 0) == 0) {
      // A library compiled into fanout-worker; only the benchmark's no-op exists.
      if (lib != "builtin:noop") {
        fail(library_where_, "expected a library path or builtin:noop (got " + quote(lib) + ")");
      }
      cfg_.library = lib;
    } else {
      cfg_.library = local_path(*library, cfg_.code_dir);
    }
  }

  if (const Entry* e = f.get("program_arguments")) consume_program_arguments(*e);
  parse_append_row_to(f.get("append_row_to"));
}

void Parser::consume_program_arguments(const Entry& e) {
  const std::string raw = e.is_null() ? std::string() : text(e);
  const Where w = e.where();
  auto words = split_args(raw);
  if (!words) fail(w, words.error().message);
  cfg_.program_arguments = substitute(w, raw);
  // Split first, substitute per word: a path with spaces stays one argument.
  const auto& v = *words;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string& word = v[i];
    if (word.starts_with("--")) {
      std::size_t eq = word.find('=');
      std::string flag = word.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (std::find(kSystemFlags.begin(), kSystemFlags.end(), flag) != kSystemFlags.end()) {
        std::string value;
        if (eq != std::string::npos) {
          value = word.substr(eq + 1);
        } else if (i + 1 < v.size()) {
          value = v[++i];
        } else {
          fail(w, "expected a value after --" + flag + " (got end of arguments)");
        }
        // Repeated flags: the last wins, as with argparse.
        cfg_.system_args[flag] = substitute(w, value);
        continue;
      }
    }
    cfg_.user_args.push_back(substitute(w, word));
  }
  apply_system_args(w);
}

void Parser::apply_system_args(const Where& w) {
  const auto& sa = cfg_.system_args;
  auto at = [&](std::string_view flag) {
    return Where{w.key + ": --" + std::string(flag), w.line};
  };
  auto source = [&](std::string_view flag) { return w.key + " --" + std::string(flag); };
  if (auto it = sa.find("error_threshold"); it != sa.end()) {
    cfg_.error_threshold = integer(at(it->first), it->second, -1, kMaxI64);
    claim("error_threshold", source(it->first));
  }
  if (auto it = sa.find("allowed_failed_count"); it != sa.end()) {
    cfg_.mini_batch_error_threshold = integer(at(it->first), it->second, -1, kMaxI64);
    claim("mini_batch_error_threshold", source(it->first));
  }
  if (auto it = sa.find("allowed_failed_percent"); it != sa.end()) {
    cfg_.allowed_failed_percent = percent(at(it->first), it->second);
    claim("allowed_failed_percent", source(it->first));
  }
  if (auto it = sa.find("logging_level"); it != sa.end()) {
    cfg_.logging_level = level(at(it->first), it->second);
    claim("logging_level", source(it->first));
  }
  if (auto it = sa.find("run_invocation_timeout"); it != sa.end()) {
    cfg_.timeout_s = positive(at(it->first), it->second);
    claim("timeout_s", source(it->first));
  }
  if (auto it = sa.find("run_max_try"); it != sa.end()) {
    cfg_.max_retries =
        static_cast<std::uint32_t>(integer(at(it->first), it->second, 1, kMaxU32) - 1);
    claim("max_retries", source(it->first));
  }
  if (auto it = sa.find("process_count_per_node"); it != sa.end()) {
    cfg_.max_concurrency_per_instance =
        static_cast<std::uint32_t>(integer(at(it->first), it->second, 1, kMaxU32));
    claim("max_concurrency_per_instance", source(it->first));
  }
  if (auto it = sa.find("node_count"); it != sa.end()) {
    cfg_.instance_count =
        static_cast<std::uint32_t>(integer(at(it->first), it->second, 1, kMaxU32));
    claim("instance_count", source(it->first));
  }
  if (auto it = sa.find("mini_batch_size"); it != sa.end()) {
    apply_batch_size(at(it->first), it->second, source(it->first));
  }
  if (auto it = sa.find("task_overhead_timeout"); it != sa.end()) {
    cfg_.task_overhead_timeout_s = positive(at(it->first), it->second);
    // Only the Python shim marks where run() starts and ends; fanout-worker's runtimes hand the
    // mini-batch straight over, so the run timeout already bounds all of it.
    if (cfg_.task_type == "command" || cfg_.task_type == "native") {
      cfg_.notices.push_back(source(it->first) + " ignored (the " + cfg_.task_type +
                             " runtime has no loading phase; retry_settings.timeout bounds each "
                             "mini-batch)");
    }
  }
  if (auto it = sa.find("first_task_creation_timeout"); it != sa.end()) {
    cfg_.first_task_creation_timeout_s = positive(at(it->first), it->second);
  }
  if (auto it = sa.find("progress_update_timeout"); it != sa.end()) {
    cfg_.progress_update_timeout_s = positive(at(it->first), it->second);
  }
}

void Parser::parse_append_row_to(const Entry* e) {
  std::string row_file;
  if (auto it = cfg_.system_args.find("append_row_file_name"); it != cfg_.system_args.end()) {
    row_file = std::string(trim(it->second));
  }
  if (!e || e->is_null()) {
    if (row_file.empty()) return;  // summary_only
    // ParallelRunStep writes the file into the default output folder.
    std::string folder = cfg_.base_dir;
    if (!cfg_.outputs.empty() && cfg_.outputs.front().type == "uri_folder" &&
        !cfg_.outputs.front().path.empty()) {
      folder = cfg_.outputs.front().path;
    }
    cfg_.append_row_to = resolve_path(folder, row_file);
    return;
  }
  const std::string s = text(*e);
  const Where w = e->where();
  // `${{outputs.x}}` naming a folder output means a file in that folder, as on Azure ML.
  if (auto ref = sole_ref(s); ref && ref->output) {
    std::string path = resolve_ref(w, *ref, trim(s));
    for (const auto& o : cfg_.outputs) {
      if (o.name == ref->name && o.type == "uri_folder") {
        cfg_.append_row_to =
            resolve_path(path, row_file.empty() ? std::string(kDefaultRowFile) : row_file);
        return;
      }
    }
    cfg_.append_row_to = path;
    return;
  }
  cfg_.append_row_to = local_path(w, substitute(w, s), cfg_.base_dir);
}

void Parser::parse_fanout(const Entry& e) {
  Fields f =
      fields(e, {"prefetch", "poll_ms", "heartbeat_period_ms", "heartbeat_threshold_ms", "python",
                 "db", "run_dir", "log_level", "workers", "row_separator", "row_header"});
  FanoutSettings& s = cfg_.fanout;
  if (const Entry* x = f.get("prefetch")) s.prefetch = u32(*x, 0);
  if (const Entry* x = f.get("poll_ms")) s.poll_ms = u32(*x, 1);
  if (const Entry* x = f.get("heartbeat_period_ms")) s.heartbeat_period_ms = u32(*x, 1);
  if (const Entry* x = f.get("heartbeat_threshold_ms")) s.heartbeat_threshold_ms = u32(*x, 1);
  if (s.heartbeat_threshold_ms <= s.heartbeat_period_ms) {
    const Entry* x = f.get("heartbeat_threshold_ms");
    if (!x) x = f.get("heartbeat_period_ms");
    fail(x->where(), "expected heartbeat_threshold_ms > heartbeat_period_ms (got " +
                         std::to_string(s.heartbeat_threshold_ms) +
                         " <= " + std::to_string(s.heartbeat_period_ms) + ")");
  }
  if (const Entry* x = f.get("python")) {
    std::string p(trim(text(*x)));
    if (p.empty()) fail(x->where(), "expected an interpreter name or path (got \"\")");
    // A bare name is looked up on PATH at run time; anything with a slash is a path.
    s.python = p.find('/') == std::string::npos ? p : local_path(x->where(), p, cfg_.base_dir);
  }
  if (const Entry* x = f.get("db")) s.db = local_path(*x, cfg_.base_dir);
  if (const Entry* x = f.get("run_dir")) s.run_dir = local_path(*x, cfg_.base_dir);
  if (const Entry* x = f.get("log_level")) {
    std::string l = lower(trim(text(*x)));
    static constexpr std::array<std::string_view, 8> kLevels = {
        "trace", "debug", "info", "warn", "warning", "error", "critical", "off"};
    if (std::find(kLevels.begin(), kLevels.end(), l) == kLevels.end()) {
      fail(x->where(), "expected trace, debug, info, warn, error, critical or off (got " +
                           quote(x->value.Scalar()) + ")");
    }
    s.log_level = l;
  }
  if (const Entry* x = f.get("workers")) s.workers = u32(*x, 0);
  if (const Entry* x = f.get("row_separator")) s.row_separator = text(*x);
  if (const Entry* x = f.get("row_header")) s.row_header = boolean(*x);
}

void Parser::expect_folder(const Where& w, const std::string& path) const {
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (fs::is_directory(st)) return;
  fail(w, "expected an existing folder (got " + quote(path) +
              (fs::exists(st) ? ", which is not a folder)" : ", which does not exist)"));
}

void Parser::expect_file(const Where& w, const std::string& path) const {
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (fs::exists(st) && !fs::is_directory(st)) return;
  fail(w, "expected an existing file (got " + quote(path) +
              (fs::exists(st) ? ", which is a folder)" : ", which does not exist)"));
}

// Existence checks come last, so that a mistake in the file is reported before a missing path.
void Parser::check_files() const {
  for (const auto& in : cfg_.inputs) {
    if (in.name != cfg_.input_data) continue;
    if (in.type == "uri_file") {
      expect_file(input_data_where_, in.path);
    } else if (in.type == "mltable") {
      // Azure ML's mltable input is a folder holding an MLTable file (or that file itself).
      std::error_code ec;
      if (fs::is_directory(in.path, ec)) {
        expect_file(input_data_where_, (fs::path(in.path) / "MLTable").string());
      } else if (fs::path(in.path).filename() != "MLTable") {
        expect_folder(input_data_where_, in.path);
      } else {
        expect_file(input_data_where_, in.path);
      }
    } else {
      expect_folder(input_data_where_, in.path);
    }
  }
  expect_folder(code_where_, cfg_.code_dir);
  if (cfg_.task_type == "run_function") {
    expect_file(entry_where_, resolve_path(cfg_.code_dir, cfg_.entry_script));
  }
  if (cfg_.task_type == "native" && cfg_.library.rfind("builtin:", 0) != 0) {
    expect_file(library_where_, cfg_.library);
  }
}

JobConfig Parser::run(const YAML::Node& root) {
  if (!root.IsDefined() || !root.IsMap()) {
    fail({"", line_of(root)}, "expected a mapping of job keys (got " + describe(root) + ")");
  }
  Fields top = collect(Entry{"", "", YAML::Node(), root});
  // `type` first: a pipeline file is full of keys a parallel job does not know.
  parse_type(top);
  reject_unknown(top,
                 {"type", "name", "display_name", "description", "inputs", "outputs", "input_data",
                  "mini_batch_size", "partition_keys", "resources", "max_concurrency_per_instance",
                  "mini_batch_error_threshold", "error_threshold", "allowed_failed_percent",
                  "logging_level", "retry_settings", "run_max_try", "run_invocation_timeout",
                  "environment_variables", "task", "fanout", "compute", "environment",
                  // Azure ML keys with no local meaning: accepted, not used.
                  "$schema", "experiment_name", "tags", "properties", "identity", "queue_settings",
                  "services"});

  if (const Entry* e = top.get("display_name")) cfg_.display_name = e->is_null() ? "" : text(*e);
  if (const Entry* e = top.get("description")) cfg_.description = e->is_null() ? "" : text(*e);
  if (const Entry* e = top.get("name"); e && !e->is_null()) {
    cfg_.name = std::string(trim(text(*e, "a job name")));
  }
  if (cfg_.name.empty()) cfg_.name = cfg_.display_name;
  if (cfg_.name.empty()) cfg_.name = fs::path(cfg_.spec_path).stem().string();
  if (const Entry* e = top.get("compute")) {
    // `local` is Azure ML's own name for running here; anything else is a cluster.
    if (!(e->value.IsScalar() && trim(e->value.Scalar()) == "local")) notice(*e);
  }
  if (const Entry* e = top.get("environment")) notice(*e);

  if (const Entry* e = top.get("inputs")) parse_inputs(*e);
  if (const Entry* e = top.get("outputs")) parse_outputs(*e);
  parse_input_data(top);
  parse_limits(top);
  parse_task(top);
  if (const Entry* e = top.get("fanout")) parse_fanout(*e);
  if (check_files_) check_files();
  return std::move(cfg_);
}

}  // namespace

Expected<BatchSize> parse_batch_size(const std::string& text) {
  auto bad = [&] {
    return make_error(ErrorCode::InvalidArgument,
                      "expected a file count or a size like \"10kb\" (got " + quote(text) + ")");
  };
  std::string_view s = trim(text);
  std::size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0) return bad();
  std::uint64_t n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + i, n);
  if (ec != std::errc() || p != s.data() + i) return bad();
  const std::string unit = lower(trim(s.substr(i)));
  std::uint64_t mult = 0;
  if (unit == "kb") {
    mult = 1024;
  } else if (unit == "mb") {
    mult = 1024 * 1024;
  } else if (unit == "gb") {
    mult = 1024 * 1024 * 1024;
  } else if (!unit.empty()) {
    return bad();
  }
  if (n == 0) {
    return make_error(ErrorCode::InvalidArgument,
                      "expected a file count or a size greater than 0 (got " + quote(text) + ")");
  }
  if (mult == 0) return BatchSize{n, 0};
  if (n > std::numeric_limits<std::uint64_t>::max() / mult) return bad();
  return BatchSize{0, n * mult};
}

Expected<std::vector<std::string>> split_args(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;  // quotes can make an empty word, so emptiness of cur is not enough
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n; ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) out.push_back(std::move(cur));
      cur.clear();
      in_word = false;
      continue;
    }
    if (c == '\\') {
      if (i + 1 < n && text[i + 1] == '\n') {
        ++i;  // line continuation: removed, as by a shell
        continue;
      }
      in_word = true;
      // A lone trailing backslash has nothing to escape and stays as written.
      cur += i + 1 < n ? text[++i] : '\\';
      continue;
    }
    in_word = true;
    if (c == '\'') {
      std::size_t end = text.find('\'', i + 1);
      if (end == std::string::npos) {
        return make_error(ErrorCode::InvalidArgument,
                          "expected a closing ' for the quote at character " +
                              std::to_string(i + 1) + " (got end of text)");
      }
      cur.append(text, i + 1, end - i - 1);
      i = end;
      continue;
    }
    if (c == '"') {
      std::size_t j = i + 1;
      for (; j < n && text[j] != '"'; ++j) {
        // Inside double quotes a backslash escapes only $ ` " \ and a line break (POSIX).
        if (text[j] == '\\' && j + 1 < n &&
            std::string_view("$`\"\\\n").find(text[j + 1]) != std::string_view::npos) {
          ++j;
          if (text[j] == '\n') continue;
        }
        cur += text[j];
      }
      if (j >= n) {
        return make_error(ErrorCode::InvalidArgument,
                          "expected a closing \" for the quote at character " +
                              std::to_string(i + 1) + " (got end of text)");
      }
      i = j;
      continue;
    }
    cur += c;
  }
  if (in_word) out.push_back(std::move(cur));
  return out;
}

Expected<JobConfig> parse_job(const std::string& text, const std::string& path) {
  std::error_code ec;
  const std::string cwd = fs::current_path(ec).string();
  const std::string spec_path = resolve_path(cwd, path);
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(text);
    if (docs.size() > 1) {
      std::string where = path;
      if (int l = line_of(docs[1]); l > 0) where += ":" + std::to_string(l);
      return make_error(ErrorCode::InvalidArgument, where + ": expected one YAML document (got " +
                                                        std::to_string(docs.size()) + ")");
    }
    Parser parser(path, spec_path);
    return parser.run(docs.empty() ? YAML::Node() : docs.front());
  } catch (const SpecError& e) {
    return make_error(ErrorCode::InvalidArgument, e.message);
  } catch (const YAML::ParserException& e) {
    std::string where = path;
    if (e.mark.line >= 0) where += ":" + std::to_string(e.mark.line + 1);
    return make_error(ErrorCode::InvalidArgument, where + ": YAML syntax error: " + e.msg);
  } catch (const YAML::Exception& e) {
    // Not expected after a successful load, but a yaml-cpp surprise must not escape.
    std::string where = path;
    if (e.mark.line >= 0) where += ":" + std::to_string(e.mark.line + 1);
    return make_error(ErrorCode::InvalidArgument, where + ": " + e.msg);
  }
}

namespace detail {

Expected<JobConfig> parse_job_node(const YAML::Node& root, const std::string& file,
                                   const std::string& spec_path, bool check_files) {
  try {
    Parser parser(file, spec_path, check_files);
    return parser.run(root);
  } catch (const SpecError& e) {
    return make_error(ErrorCode::InvalidArgument, e.message);
  } catch (const YAML::Exception& e) {
    std::string where = file;
    if (e.mark.line >= 0) where += ":" + std::to_string(e.mark.line + 1);
    return make_error(ErrorCode::InvalidArgument, where + ": " + e.msg);
  }
}

}  // namespace detail

Expected<JobConfig> load_job(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return make_error(ErrorCode::InvalidArgument, path + ": expected a job file (got a folder)");
  }
  auto text = read_file(path);
  if (!text) return Unexpected{text.error()};
  return parse_job(*text, path);
}

}  // namespace fanout::config
