// The job file of an ad-hoc run (`fanout run -c`). See adhoc_job.hpp.
#include "fanout/config/adhoc_job.hpp"

#include <yaml-cpp/yaml.h>

#include <array>
#include <string_view>

namespace fanout::config {

namespace {

// GNU parallel's replacement strings, longest first so `{/.}` is not read as `{/}`.
struct Replacement {
  std::string_view token;
  std::string_view shell;  // what it becomes in the loop below
};
constexpr std::array<Replacement, 6> kReplacements{{
    {"{/.}", "\"$fanout_base_noext\""},
    {"{//}", "\"$fanout_dir\""},
    {"{/}", "\"$fanout_base\""},
    {"{.}", "\"$fanout_noext\""},
    {"{#}", "\"$fanout_seq\""},
    {"{}", "\"$fanout_item\""},
}};

std::string substitute(const std::string& command) {
  std::string out;
  bool any = false;
  for (std::size_t i = 0; i < command.size();) {
    bool hit = false;
    for (const auto& r : kReplacements) {
      if (command.compare(i, r.token.size(), r.token) == 0) {
        out += r.shell;
        i += r.token.size();
        hit = any = true;
        break;
      }
    }
    if (!hit) out += command[i++];
  }
  if (!any) out += " \"$fanout_item\"";
  return out;
}

}  // namespace

std::string adhoc_shell_line(const std::string& command, std::uint64_t mini_batch_size) {
  // The items come from the NUL-separated list, so a name holding a newline stays one item
  // (the one-per-line list would split it, and `rm {}` would remove a second file named by
  // its tail). sh cannot hold a NUL in a variable, so each name is turned into one line first:
  // `\` doubled, a newline written `\n`, and a line with a backslash decoded back exactly with
  // printf %b (the `x` keeps trailing newlines from $(...)). Items are read on fd 3, so a
  // command that reads stdin does not eat the list; the derived names are POSIX parameter
  // expansions (no process per item but for names with a backslash).
  std::string s;
  s += "fanout_n=0\n";
  s += "sed -z 's/\\\\/\\\\\\\\/g;s/\\n/\\\\n/g' \"$FANOUT_MINI_BATCH_NUL\" | tr '\\000' '\\n' | "
       "{\n";
  s += "exec 3<&0 </dev/null\n";
  s += "while IFS= read -r fanout_item <&3 || [ -n \"$fanout_item\" ]; do\n";
  s += "  case $fanout_item in *\\\\*) fanout_item=$(printf '%bx' \"$fanout_item\")\n";
  s += "    fanout_item=${fanout_item%x} ;; esac\n";
  s += "  fanout_n=$((fanout_n + 1))\n";
  s += "  fanout_seq=$((FANOUT_MINI_BATCH_INDEX * " + std::to_string(mini_batch_size) +
       " + fanout_n))\n";
  s += "  fanout_base=${fanout_item##*/}\n";
  s += "  case $fanout_item in */*) fanout_dir=${fanout_item%/*} ;; *) fanout_dir=. ;; esac\n";
  s += "  case $fanout_base in\n";
  s += "    ?*.*) fanout_base_noext=${fanout_base%.*}; fanout_noext=${fanout_item%.*} ;;\n";
  s += "    *) fanout_base_noext=$fanout_base; fanout_noext=$fanout_item ;;\n";
  s += "  esac\n";
  s += "  { " + substitute(command) + "\n  } 3<&- || exit $?\n";
  s += "done\n}\n";
  return s;
}

std::string adhoc_job_yaml(const AdhocJob& o) {
  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << "type" << YAML::Value << "parallel";
  y << YAML::Key << "name" << YAML::Value << o.name;
  y << YAML::Key << "description" << YAML::Value << o.description;
  y << YAML::Key << "inputs" << YAML::Value << YAML::BeginMap << YAML::Key << "items" << YAML::Value
    << YAML::BeginMap << YAML::Key << "type" << YAML::Value << o.input_type << YAML::Key << "path"
    << YAML::Value << o.input_path << YAML::EndMap << YAML::EndMap;
  y << YAML::Key << "outputs" << YAML::Value << YAML::BeginMap << YAML::Key << "rows" << YAML::Value
    << YAML::BeginMap << YAML::Key << "type" << YAML::Value << "uri_file" << YAML::Key << "path"
    << YAML::Value << o.output_path << YAML::EndMap << YAML::EndMap;
  y << YAML::Key << "input_data" << YAML::Value << "${{inputs.items}}";
  y << YAML::Key << "mini_batch_size" << YAML::Value << std::to_string(o.mini_batch_size);
  y << YAML::Key << "error_threshold" << YAML::Value << o.error_threshold;
  y << YAML::Key << "mini_batch_error_threshold" << YAML::Value << -1;
  y << YAML::Key << "retry_settings" << YAML::Value << YAML::BeginMap << YAML::Key << "max_retries"
    << YAML::Value << o.max_retries;
  if (o.timeout_s > 0) y << YAML::Key << "timeout" << YAML::Value << o.timeout_s;
  y << YAML::EndMap;
  if (!o.env.empty()) {
    y << YAML::Key << "environment_variables" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, value] : o.env) {
      y << YAML::Key << name << YAML::Value << YAML::DoubleQuoted << value;
    }
    y << YAML::EndMap;
  }
  y << YAML::Key << "task" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "type" << YAML::Value << "command";
  y << YAML::Key << "code" << YAML::Value << o.code;
  y << YAML::Key << "command" << YAML::Value << YAML::Literal
    << adhoc_shell_line(o.command, o.mini_batch_size);
  y << YAML::Key << "append_row_to" << YAML::Value << "${{outputs.rows}}";
  y << YAML::EndMap << YAML::EndMap;

  return std::string(
             "# Written by `fanout run -c`; kept so that `fanout resume` can finish the job.\n") +
         y.c_str() + "\n";
}

}  // namespace fanout::config
