// task.program_arguments and split_args(). See detail/program_arguments.hpp.
#include "fanout/config/detail/program_arguments.hpp"

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

namespace fanout::config {
namespace {

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

}  // namespace

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

namespace detail {

ProgramArguments read_program_arguments(const YamlReader& r, const Where& w, const std::string& raw,
                                        const JobRefs& refs) {
  ProgramArguments out;
  auto words = split_args(raw);
  if (!words) r.fail(w, words.error().message);
  out.text = refs.substitute(w, raw);
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
          r.fail(w, "expected a value after --" + flag + " (got end of arguments)");
        }
        // Repeated flags: the last wins, as with argparse.
        out.system_args[flag] = refs.substitute(w, value);
        continue;
      }
    }
    out.user_args.push_back(refs.substitute(w, word));
  }
  return out;
}

}  // namespace detail
}  // namespace fanout::config
