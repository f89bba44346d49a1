// Azure ML parallel-job YAML to JobConfig: the top-level keys, the task and the checks that paths
// exist. Inputs and outputs are read in job_io.cpp, limits in job_limits.cpp, program_arguments
// in program_arguments.cpp, the `fanout:` block in fanout_settings.cpp; messages are located by
// detail/located_yaml.hpp. Every key, default and message is in docs/job-spec.md.
#include "fanout/config/job_spec.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <limits>
#include <string_view>
#include <system_error>
#include <utility>

#include "fanout/config/detail/fanout_settings.hpp"
#include "fanout/config/detail/job_io.hpp"
#include "fanout/config/detail/job_limits.hpp"
#include "fanout/config/detail/job_node.hpp"
#include "fanout/config/detail/located_yaml.hpp"
#include "fanout/config/detail/program_arguments.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::config {
namespace {

namespace fs = std::filesystem;
using detail::Entry;
using detail::Fields;
using detail::quote;
using detail::trim;
using detail::Where;

// ParallelRunStep's name for the append_row file when only a folder is known.
constexpr std::string_view kDefaultRowFile = "parallel_run_step.txt";

// Parses one job file. Holds the reader (the file name for messages) and the config being
// filled. Single use: construct, call run() once.
class Parser final {
 public:
  Parser(std::string file, std::string spec_path, bool check_files = true)
      : r_(std::move(file)), check_files_(check_files) {
    cfg_.spec_path = std::move(spec_path);
    cfg_.base_dir = fs::path(cfg_.spec_path).parent_path().string();
  }

  JobConfig run(const YAML::Node& root);

 private:
  [[noreturn]] void fail(const Where& w, std::string_view what) const { r_.fail(w, what); }

  // References to the inputs and outputs read so far.
  detail::JobRefs refs() const { return detail::JobRefs(r_, cfg_.inputs, cfg_.outputs); }
  std::string substitute(const Where& w, std::string_view s) const {
    return refs().substitute(w, s);
  }

  void notice(const Entry& e);

  void parse_type(const Fields& root) const;
  void parse_input_data(const Fields& root);
  void parse_partition_keys(const Fields& root);
  void parse_environment_variables(const Fields& root);
  void parse_task(const Fields& root);
  void parse_append_row_to(const Entry* e);
  void check_files() const;
  void expect_folder(const Where& w, const std::string& path) const;
  void expect_file(const Where& w, const std::string& path) const;

  detail::YamlReader r_;
  JobConfig cfg_{};
  detail::JobLimits limits_{r_, cfg_};
  std::map<std::string, Where> input_where_{};  // input name -> its path's place
  Where input_data_where_{};
  Where code_where_{};
  Where entry_where_{};
  Where library_where_{};
  // false: a pipeline step whose input an earlier step makes; its paths are checked later.
  bool check_files_ = true;
};

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
  std::string v = t->value.IsDefined() && t->value.IsScalar() ? std::string(trim(r_.text(*t))) : "";
  if (v == "parallel") return;
  if (v == "pipeline") {
    fail(t->where(), "expected \"parallel\"; pipelines are not supported yet (got \"pipeline\")");
  }
  fail(t->where(), "expected \"parallel\" (got " + detail::describe(t->value) + ")");
}

void Parser::parse_input_data(const Fields& root) {
  const Entry* e = root.get("input_data");
  if (!e) fail(root.missing("input_data"), "expected ${{inputs.<name>}} (got nothing)");
  const std::string s = r_.text(*e);
  auto ref = detail::sole_io_ref(s);
  if (!ref || ref->output) fail(e->where(), "expected ${{inputs.<name>}} (got " + quote(s) + ")");
  (void)refs().resolve(e->where(), *ref, trim(s));  // fails naming the inputs when unknown
  for (const auto& in : cfg_.inputs) {
    if (in.name != ref->name) continue;
    if (in.type != "uri_folder" && in.type != "uri_file" && in.type != "mltable" &&
        in.type != "fanout_list") {
      fail(e->where(), "expected a uri_folder, uri_file, mltable or fanout_list input (got " +
                           quote(trim(s)) + ", of type " + in.type + ")");
    }
  }
  cfg_.input_data = ref->name;
  input_data_where_ = input_where_[ref->name];
}

void Parser::parse_partition_keys(const Fields& root) {
  if (const Entry* e = root.get("partition_keys")) {
    if (!e->is_null() && !e->value.IsSequence()) {
      fail(e->where(), "expected a list of column names (got " + detail::describe(e->value) + ")");
    }
    if (!e->is_null()) {
      for (const auto& item : e->value) {
        Entry k{e->key, e->name, e->key_node, item};
        std::string s(trim(r_.text(k)));
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
}

void Parser::parse_environment_variables(const Fields& root) {
  if (const Entry* e = root.get("environment_variables")) {
    Fields f = r_.collect(*e);
    for (const Entry& v : f.entries) {
      if (v.name.empty() || v.name.find('=') != std::string::npos) {
        fail({v.key, detail::line_of(v.key_node)},
             "expected a variable name without '=' (got " + quote(v.name) + ")");
      }
      std::string value = v.is_null() ? std::string() : r_.text(v);
      // `./models` or `../data` means a path relative to the job file, as Azure ML users expect
      // (the worker's folder is task.code): made absolute here, and said so in a notice.
      if (value == "." || value == ".." || value.starts_with("./") || value.starts_with("../")) {
        std::string resolved = resolve_path(cfg_.base_dir, value);
        cfg_.notices.push_back("environment_variables." + v.name + ": " + value + " is " +
                               resolved + " (relative to the job file)");
        value = std::move(resolved);
      }
      cfg_.environment_variables[v.name] = std::move(value);
    }
  }
}

void Parser::parse_task(const Fields& root) {
  const Entry* t = root.get("task");
  if (!t) fail(root.missing("task"), "expected a mapping with code and entry_script (got nothing)");
  Fields f = r_.fields(*t, {"type", "code", "entry_script", "program_arguments", "append_row_to",
                            "environment", "command", "library"});
  if (const Entry* e = f.get("type")) {
    cfg_.task_type = std::string(trim(r_.text(*e)));
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
    cfg_.code_dir = r_.local_path(*e, cfg_.base_dir);
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
      fail({e->key, detail::line_of(e->key_node)}, "used only with task.type " + std::string(type) +
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
    cfg_.entry_script = std::string(trim(r_.text(*script)));
    if (cfg_.entry_script.empty()) {
      fail(script->where(), "expected a Python file under task.code (got \"\")");
    }
    entry_where_ = script->where();
  }
  if (is_cmd) {
    if (!command) fail(f.missing("command"), "expected a command line (got nothing)");
    cfg_.command = substitute(command->where(), r_.text(*command));
    if (trim(cfg_.command).empty()) fail(command->where(), "expected a command line (got \"\")");
  }
  if (is_native) {
    if (!library) fail(f.missing("library"), "expected a shared library path (got nothing)");
    library_where_ = library->where();
    const std::string lib(trim(r_.text(*library)));
    if (lib.rfind("builtin:", 0) == 0) {
      // A library compiled into fanout-worker; only the benchmark's no-op exists.
      if (lib != "builtin:noop") {
        fail(library_where_, "expected a library path or builtin:noop (got " + quote(lib) + ")");
      }
      cfg_.library = lib;
    } else {
      cfg_.library = r_.local_path(*library, cfg_.code_dir);
    }
  }

  if (const Entry* e = f.get("program_arguments")) {
    const Where w = e->where();
    auto args =
        detail::read_program_arguments(r_, w, e->is_null() ? std::string() : r_.text(*e), refs());
    cfg_.program_arguments = std::move(args.text);
    cfg_.user_args = std::move(args.user_args);
    cfg_.system_args = std::move(args.system_args);
    limits_.apply_system_args(w);
  }
  parse_append_row_to(f.get("append_row_to"));
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
    if (!cfg_.outputs.empty() && cfg_.outputs.front().is_folder() &&
        !cfg_.outputs.front().path.empty()) {
      folder = cfg_.outputs.front().path;
    }
    cfg_.append_row_to = resolve_path(folder, row_file);
    return;
  }
  const std::string s = r_.text(*e);
  const Where w = e->where();
  // `${{outputs.x}}` naming a folder output means a file in that folder, as on Azure ML.
  if (auto ref = detail::sole_io_ref(s); ref && ref->output) {
    std::string path = refs().resolve(w, *ref, trim(s));
    for (const auto& o : cfg_.outputs) {
      if (o.name == ref->name && o.is_folder()) {
        cfg_.append_row_to =
            resolve_path(path, row_file.empty() ? std::string(kDefaultRowFile) : row_file);
        return;
      }
    }
    cfg_.append_row_to = path;
    return;
  }
  cfg_.append_row_to = r_.local_path(w, substitute(w, s), cfg_.base_dir);
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
    if (in.type == "uri_file" || in.type == "fanout_list") {
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
  Fields top = r_.collect(r_.root(root, "a mapping of job keys"));
  // `type` first: a pipeline file is full of keys a parallel job does not know.
  parse_type(top);
  r_.reject_unknown(
      top, {"type", "name", "display_name", "description", "inputs", "outputs", "input_data",
            "mini_batch_size", "partition_keys", "resources", "max_concurrency_per_instance",
            "mini_batch_error_threshold", "error_threshold", "allowed_failed_percent",
            "logging_level", "retry_settings", "run_max_try", "run_invocation_timeout",
            "environment_variables", "task", "fanout", "compute", "environment",
            // Azure ML keys with no local meaning: accepted, not used.
            "$schema", "experiment_name", "tags", "properties", "identity", "queue_settings",
            "services"});

  if (const Entry* e = top.get("display_name")) cfg_.display_name = e->is_null() ? "" : r_.text(*e);
  if (const Entry* e = top.get("description")) cfg_.description = e->is_null() ? "" : r_.text(*e);
  if (const Entry* e = top.get("name"); e && !e->is_null()) {
    cfg_.name = std::string(trim(r_.text(*e, "a job name")));
  }
  if (cfg_.name.empty()) cfg_.name = cfg_.display_name;
  if (cfg_.name.empty()) cfg_.name = fs::path(cfg_.spec_path).stem().string();
  if (const Entry* e = top.get("compute")) {
    // `local` is Azure ML's own name for running here; anything else is a cluster.
    if (!(e->value.IsScalar() && trim(e->value.Scalar()) == "local")) notice(*e);
  }
  if (const Entry* e = top.get("environment")) notice(*e);

  if (const Entry* e = top.get("inputs")) {
    cfg_.inputs = detail::read_inputs(r_, *e, cfg_.base_dir, input_where_);
  }
  if (const Entry* e = top.get("outputs"))
    cfg_.outputs = detail::read_outputs(r_, *e, cfg_.base_dir);
  parse_input_data(top);
  // Keys are read in this order, which decides the mistake reported when there are several.
  limits_.read_batch_size(top);
  parse_partition_keys(top);
  limits_.read_keys(top);
  parse_environment_variables(top);
  parse_task(top);
  if (const Entry* e = top.get("fanout")) {
    cfg_.fanout = detail::read_fanout_settings(r_, *e, cfg_.base_dir);
  }
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
  const std::string unit = detail::lower(trim(s.substr(i)));
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

Expected<std::uint64_t> parse_memory_size(const std::string& text) {
  auto size = parse_batch_size(text);
  if (!size || size->bytes == 0) {
    return make_error(ErrorCode::InvalidArgument,
                      "expected a size like \"200mb\" or \"4gb\" (got " + quote(text) + ")");
  }
  return size->bytes;
}

Expected<JobConfig> parse_job(const std::string& text, const std::string& path) {
  std::error_code ec;
  const std::string cwd = fs::current_path(ec).string();
  const std::string spec_path = resolve_path(cwd, path);
  return detail::read_yaml(path, [&] {
    return Parser(path, spec_path).run(detail::load_yaml(text, path, /*one_document=*/true));
  });
}

namespace detail {

Expected<JobConfig> parse_job_node(const YAML::Node& root, const std::string& file,
                                   const std::string& spec_path, bool check_files) {
  return read_yaml(file, [&] { return Parser(file, spec_path, check_files).run(root); });
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
