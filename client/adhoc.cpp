// Ad-hoc runs: a command line turned into a command-runtime job file. See adhoc.hpp.
#include "client/adhoc.hpp"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string_view>

namespace fanout::client {

namespace fs = std::filesystem;

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

std::string program_name(const std::string& command) {
  const auto start = command.find_first_not_of(" \t");
  if (start == std::string::npos) return "adhoc";
  const auto end = command.find_first_of(" \t;|&", start);
  std::string prog = fs::path(command.substr(start, end - start)).filename().string();
  std::string clean;
  for (char c : prog) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') clean += c;
  }
  return clean.empty() ? "adhoc" : "adhoc-" + clean;
}

std::string stamp() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()) + "-" +
         std::to_string(::getpid());
}

}  // namespace

std::string adhoc_shell_line(const std::string& command, std::uint64_t mini_batch_size) {
  // Items are read on fd 3, so a command that reads stdin does not eat the list; the
  // derived names are POSIX parameter expansions (no process per item).
  std::string s;
  s += "fanout_n=0\n";
  s += "while IFS= read -r fanout_item <&3 || [ -n \"$fanout_item\" ]; do\n";
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
  s += "done 3< \"$FANOUT_MINI_BATCH\"\n";
  return s;
}

Expected<AdhocJob> write_adhoc_job(const AdhocOptions& o, const std::string& folder) {
  auto bad = [](const std::string& what) { return make_error(ErrorCode::InvalidArgument, what); };
  if (o.command.find_first_not_of(" \t\n") == std::string::npos) {
    return bad("-c: expected a command (got nothing)");
  }
  if (o.input.empty()) return bad("-c needs --input DIR, a list FILE, or - for stdin");
  if (o.mini_batch_size == 0) return bad("--mini-batch-size: expected at least 1 (got 0)");
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return bad("cannot make " + folder + " for the ad-hoc job file: " + ec.message());
  const std::string base = (fs::path(folder) / stamp()).string();

  AdhocJob job;
  std::string input_type = "fanout_list";
  std::string input_path;
  if (o.input == "-") {
    input_path = base + ".items.txt";
    std::ofstream items(input_path);
    items << std::cin.rdbuf();
    items.close();
    if (!items) return bad("--input -: cannot save stdin to " + input_path);
  } else {
    input_path = fs::absolute(o.input, ec).lexically_normal().string();
    if (fs::is_directory(input_path, ec)) {
      input_type = "uri_folder";
    } else if (!fs::is_regular_file(input_path, ec)) {
      return bad("--input: " + o.input + " is neither a folder nor a list file");
    }
  }
  std::string output_path;
  if (o.output.empty() || o.output == "-") {
    output_path = base + ".rows.txt";
    job.print_rows = output_path;
  } else {
    output_path = fs::absolute(o.output, ec).lexically_normal().string();
  }
  for (const auto& kv : o.env) {
    if (kv.find('=') == std::string::npos || kv.front() == '=') {
      return bad("--env: expected NAME=VALUE (got '" + kv + "')");
    }
  }

  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << "type" << YAML::Value << "parallel";
  y << YAML::Key << "name" << YAML::Value << (o.name.empty() ? program_name(o.command) : o.name);
  y << YAML::Key << "description" << YAML::Value << ("fanout run -c " + o.command);
  y << YAML::Key << "inputs" << YAML::Value << YAML::BeginMap << YAML::Key << "items" << YAML::Value
    << YAML::BeginMap << YAML::Key << "type" << YAML::Value << input_type << YAML::Key << "path"
    << YAML::Value << input_path << YAML::EndMap << YAML::EndMap;
  y << YAML::Key << "outputs" << YAML::Value << YAML::BeginMap << YAML::Key << "rows" << YAML::Value
    << YAML::BeginMap << YAML::Key << "type" << YAML::Value << "uri_file" << YAML::Key << "path"
    << YAML::Value << output_path << YAML::EndMap << YAML::EndMap;
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
    for (const auto& kv : o.env) {
      const auto eq = kv.find('=');
      y << YAML::Key << kv.substr(0, eq) << YAML::Value << YAML::DoubleQuoted << kv.substr(eq + 1);
    }
    y << YAML::EndMap;
  }
  y << YAML::Key << "task" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "type" << YAML::Value << "command";
  y << YAML::Key << "code" << YAML::Value << fs::current_path(ec).string();
  y << YAML::Key << "command" << YAML::Value << YAML::Literal
    << adhoc_shell_line(o.command, o.mini_batch_size);
  y << YAML::Key << "append_row_to" << YAML::Value << "${{outputs.rows}}";
  y << YAML::EndMap << YAML::EndMap;

  job.job_file = base + ".yaml";
  std::ofstream f(job.job_file);
  f << "# Written by `fanout run -c`; kept so that `fanout resume` can finish the job.\n"
    << y.c_str() << "\n";
  f.close();
  if (!f) return bad("cannot write " + job.job_file);
  return job;
}

void print_rows_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (f) std::cout << f.rdbuf() << std::flush;
}

}  // namespace fanout::client
