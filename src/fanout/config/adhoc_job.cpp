// The job file of an ad-hoc run (`fanout run -c`). See adhoc_job.hpp.
#include "fanout/config/adhoc_job.hpp"

#include <yaml-cpp/yaml.h>

#include <array>
#include <set>

namespace fanout::config {

namespace {

// GNU parallel's replacement strings, longest first so `{/.}` is not read as `{/}`. `var` is the
// loop's variable holding the value; `quoted` false for {#}, a number.
struct Replacement {
  std::string_view token;
  std::string_view var;
};
constexpr std::array<Replacement, 6> kReplacements{{
    {"{/.}", "fanout_base_noext"},
    {"{//}", "fanout_dir"},
    {"{/}", "fanout_base"},
    {"{.}", "fanout_noext"},
    {"{#}", "fanout_seq"},
    {"{}", "fanout_item"},
}};

// A piece of the user's command: literal text, or a replacement string (`var` names its value;
// a digit for the value of that input source).
struct Piece {
  std::string text{};
  std::string var{};  // empty: literal
};

// The command cut into literal text and replacement strings; ` {}` appended when it has none.
std::vector<Piece> pieces(const std::string& command, std::size_t sources) {
  std::vector<Piece> out;
  bool any = false;
  auto literal = [&out](char c) {
    if (out.empty() || !out.back().var.empty()) out.push_back({});
    out.back().text += c;
  };
  for (std::size_t i = 0; i < command.size();) {
    bool hit = false;
    for (const auto& r : kReplacements) {
      if (command.compare(i, r.token.size(), r.token) == 0) {
        out.push_back({std::string(r.token), std::string(r.var)});
        i += r.token.size();
        hit = any = true;
        break;
      }
    }
    // {1}..{9}: one input source's value, when there is such a source (GNU leaves others as
    // they are).
    if (!hit && i + 2 < command.size() && command[i] == '{' && command[i + 2] == '}' &&
        command[i + 1] >= '1' && command[i + 1] <= '9' &&
        static_cast<std::size_t>(command[i + 1] - '0') <= sources) {
      out.push_back({command.substr(i, 3), std::string(1, command[i + 1])});
      i += 3;
      hit = any = true;
    }
    if (!hit) literal(command[i++]);
  }
  if (!any) {
    literal(' ');
    out.push_back({"{}", "fanout_item"});
  }
  return out;
}

bool shell_safe(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_./:=@%+,-").find(c) != std::string_view::npos;
}

// sh text that sets `fanout_r_<var>` to the quoted value of each replacement string used, then
// `fanout_cmd` to the command line with them put in.
std::string command_assignment(const std::vector<Piece>& ps, std::size_t sources) {
  std::string s;
  std::set<std::string> done;
  for (const auto& p : ps) {
    if (p.var.empty() || p.var == "fanout_seq" || !done.insert(p.var).second) continue;
    if (p.var == "fanout_item" && sources > 1) {
      // {} with several sources: every value, each quoted, separated by spaces.
      s += "  fanout_r_fanout_item=\n";
      for (std::size_t k = 1; k <= sources; ++k) {
        s += "  fanout_q \"$fanout_f" + std::to_string(k) +
             "\"; fanout_r_fanout_item=" + (k > 1 ? "\"$fanout_r_fanout_item \"" : "") +
             "$fanout_qv\n";
      }
      continue;
    }
    const std::string value =
        p.var.size() == 1 ? (sources == 1 ? "fanout_item" : "fanout_f" + p.var) : p.var;
    s += "  fanout_q \"$" + value + "\"; fanout_r_" + p.var + "=$fanout_qv\n";
  }
  s += "  fanout_cmd=";
  for (const auto& p : ps) {
    if (p.var.empty()) {
      s += gnu_quote(p.text, true);
    } else if (p.var == "fanout_seq") {
      s += "\"$fanout_seq\"";
    } else {
      s += "\"$fanout_r_" + p.var + "\"";
    }
  }
  return s + "\n";
}

// The name parts of `item` as the loop derives them: {.} {/} {//} {/.}.
struct NameParts {
  std::string noext, base, dir, base_noext;
};
NameParts name_parts(const std::string& item) {
  NameParts n;
  const auto slash = item.rfind('/');
  n.base = slash == std::string::npos ? item : item.substr(slash + 1);
  n.dir = slash == std::string::npos ? "." : item.substr(0, slash);
  const auto dot = n.base.rfind('.');
  if (dot != std::string::npos && dot > 0) {
    n.base_noext = n.base.substr(0, dot);
    n.noext = item.substr(0, item.size() - (n.base.size() - dot));
  } else {
    n.base_noext = n.base;
    n.noext = item;
  }
  return n;
}

// The fixed parts of the loop: GNU's quoting as a function (fanout_qv), the line prefixer for
// --tag, and how an item's stderr is shown.
constexpr std::string_view kQuoteFn = R"SH(fanout_q() {
  case $1 in
    '') fanout_qv="''" ;;
    *[!A-Za-z0-9_./:=@%+,-]*) fanout_qv=$(printf '%s' "$1" | sed "s/'/'\"'\"'/g"; printf x)
      fanout_qv="'${fanout_qv%x}'" ;;
    *) fanout_qv=$1 ;;
  esac
}
)SH";
constexpr std::string_view kQuoteAllFn = R"SH(fanout_q() {
  fanout_qv=$(printf '%s' "$1" | sed "s/'/'\"'\"'/g"; printf x)
  fanout_qv="'${fanout_qv%x}'"
}
)SH";
constexpr std::string_view kPrefixFn = R"SH(fanout_prefix() {
  while IFS= read -r fanout_l || [ -n "$fanout_l" ]; do
    printf '%s\t%s\n' "$fanout_item" "$fanout_l"
  done
}
)SH";

// The lines that run the item's command line (fanout_cmd) and set fanout_rc to its status: its
// stdout to ours (--tag: each line tagged) or to --results' files; its stderr to fanout_e.
std::string run_lines(const AdhocShell& o) {
  std::string s;
  if (o.results) {
    // GNU's layout: RESULTS/<source>/<value>/ for each source, then stdout, stderr and seq.
    s += "  fanout_d=$FANOUT_ADHOC_RESULTS\n";
    for (std::size_t k = 1; k <= o.sources; ++k) {
      const std::string v = o.sources == 1 ? "$fanout_item" : "$fanout_f" + std::to_string(k);
      s += "  fanout_v=$(printf '%s' \"" + v +
           "\" | sed 's:\\\\:\\\\\\\\:g;s:/:\\\\057:g'; printf x); fanout_v=${fanout_v%x}\n";
      s += "  case $fanout_v in ''|.|..) fanout_v=\"\\\\$fanout_v\" ;; esac\n";
      s += "  fanout_d=\"$fanout_d/" + std::to_string(k) + "/$fanout_v\"\n";
    }
    s +=
        "  mkdir -p \"$fanout_d\" && printf '%s\\n' \"$fanout_seq\" >\"$fanout_d/seq\" || exit 1\n";
    s += "  (eval \"$fanout_cmd\") 3<&- 2>\"$fanout_e\" >\"$fanout_d/stdout\"; fanout_rc=$?\n";
    s += "  cp \"$fanout_e\" \"$fanout_d/stderr\"\n";
  } else if (o.tag) {
    // The exit status comes back on fd 7, past the pipe into the prefixer.
    s += "  fanout_rc=$( { { (eval \"$fanout_cmd\") 3<&- 7>&- 2>\"$fanout_e\"; echo $? >&7; } | "
         "fanout_prefix >&6; } 7>&1 )\n";
  } else {
    s += "  (eval \"$fanout_cmd\") 3<&- 6>&- 2>\"$fanout_e\"; fanout_rc=$?\n";
  }
  return s;
}

}  // namespace

std::string gnu_quote(std::string_view v, bool quote_all) {
  bool safe = !v.empty() && !quote_all;
  for (char c : v) safe = safe && shell_safe(c);
  if (safe) return std::string(v);
  std::string q = "'";
  for (char c : v) {
    if (c == '\'') {
      q += "'\"'\"'";
    } else {
      q.push_back(c);
    }
  }
  return q + "'";
}

std::string adhoc_command_for(const std::string& command, const std::vector<std::string>& values,
                              std::uint64_t seq, bool quote_all) {
  std::string item;
  for (const auto& v : values) item += (item.empty() ? "" : " ") + v;
  const NameParts n = name_parts(item);
  std::string out;
  for (const auto& p : pieces(command, values.size())) {
    if (p.var.empty()) {
      out += p.text;
    } else if (p.var == "fanout_seq") {
      out += std::to_string(seq);
    } else if (p.var == "fanout_item") {
      std::string all;
      for (const auto& v : values) all += (all.empty() ? "" : " ") + gnu_quote(v, quote_all);
      out += values.empty() ? gnu_quote("", quote_all) : all;
    } else if (p.var.size() == 1) {
      out += gnu_quote(values.at(static_cast<std::size_t>(p.var[0] - '1')), quote_all);
    } else {
      const std::string& v = p.var == "fanout_noext"  ? n.noext
                             : p.var == "fanout_base" ? n.base
                             : p.var == "fanout_dir"  ? n.dir
                                                      : n.base_noext;
      out += gnu_quote(v, quote_all);
    }
  }
  return out;
}

std::string adhoc_shell_line(const AdhocShell& o) {
  // The items come from the NUL-separated list, so a name holding a newline stays one item
  // (the one-per-line list would split it, and `rm {}` would remove a second file named by
  // its tail). sh cannot hold a NUL in a variable, so each name is turned into one line first:
  // `\` doubled, a newline written `\n`, and a line with a backslash decoded back exactly with
  // printf %b (the `x` keeps trailing newlines from $(...)). Items are read on fd 3, so a
  // command that reads stdin does not eat the list; the derived names are POSIX parameter
  // expansions (no process per item but for names with a backslash). Each value is quoted by
  // fanout_q only where the shell needs it (a process only for those), the command line is
  // built with them and run by eval in a subshell (its `exit` or `cd` ends there), as GNU
  // parallel runs each command in a shell of its own. The item's stderr is held in a
  // file beside the mini-batch list and shown when it ends (with --tag, each line tagged).
  std::string s;
  s += o.quote_all ? kQuoteAllFn : kQuoteFn;
  if (o.tag) s += kPrefixFn;
  s += "fanout_n=0\nfanout_us=$(printf '\\037')\nfanout_e=\"$FANOUT_MINI_BATCH.stderr\"\n";
  s += "exec 6>&1\n";
  s += "sed -z 's/\\\\/\\\\\\\\/g;s/\\n/\\\\n/g' \"$FANOUT_MINI_BATCH_NUL\" | tr '\\000' '\\n' | "
       "{\n";
  s += "exec 3<&0 </dev/null\n";
  s += "while IFS= read -r fanout_item <&3 || [ -n \"$fanout_item\" ]; do\n";
  s += "  case $fanout_item in *\\\\*) fanout_item=$(printf '%bx' \"$fanout_item\")\n";
  s += "    fanout_item=${fanout_item%x} ;; esac\n";
  s += "  fanout_n=$((fanout_n + 1))\n";
  s += "  fanout_seq=$((FANOUT_MINI_BATCH_INDEX * " + std::to_string(o.mini_batch_size) +
       " + fanout_n))\n";
  if (o.sources > 1) {
    // One value per source; {} and the tag are all of them, separated by spaces.
    s += "  fanout_rest=$fanout_item\n";
    for (std::size_t k = 1; k < o.sources; ++k) {
      const std::string f = "fanout_f" + std::to_string(k);
      s += "  " + f +
           "=${fanout_rest%%\"$fanout_us\"*}; fanout_rest=${fanout_rest#*\"$fanout_us\"}\n";
    }
    s += "  fanout_f" + std::to_string(o.sources) + "=$fanout_rest\n";
    s += "  fanout_item=$fanout_f1";
    for (std::size_t k = 2; k <= o.sources; ++k) s += "\" $fanout_f" + std::to_string(k) + "\"";
    s += "\n";
  }
  s += "  fanout_base=${fanout_item##*/}\n";
  s += "  case $fanout_item in */*) fanout_dir=${fanout_item%/*} ;; *) fanout_dir=. ;; esac\n";
  s += "  case $fanout_base in\n";
  s += "    ?*.*) fanout_base_noext=${fanout_base%.*}; fanout_noext=${fanout_item%.*} ;;\n";
  s += "    *) fanout_base_noext=$fanout_base; fanout_noext=$fanout_item ;;\n";
  s += "  esac\n";
  s += command_assignment(pieces(o.command, o.sources), o.sources);
  s += run_lines(o);
  s += "  if [ -s \"$fanout_e\" ]; then\n";
  s += std::string("    ") + (o.tag ? "fanout_prefix <\"$fanout_e\"" : "cat \"$fanout_e\"") +
       " | if [ -n \"$FANOUT_ADHOC_STDERR\" ]; then tee -a \"$FANOUT_ADHOC_STDERR\"; else cat; "
       "fi >&2\n";
  s += "  fi\n";
  s += "  if [ \"$fanout_rc\" -ne 0 ]; then\n";
  s += "    printf 'fanout: item %s (#%s) exited with status %s\\n' \"$fanout_item\" "
       "\"$fanout_seq\" \"$fanout_rc\" | if [ -n \"$FANOUT_ADHOC_STDERR\" ]; then tee -a "
       "\"$FANOUT_ADHOC_STDERR\"; else cat; fi >&2\n";
  s += "    rm -f \"$fanout_e\"; exit \"$fanout_rc\"\n";
  s += "  fi\n";
  s += "done\nrm -f \"$fanout_e\"\n}\n";
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
  y << YAML::Key << "mini_batch_size" << YAML::Value << std::to_string(o.shell.mini_batch_size);
  y << YAML::Key << "error_threshold" << YAML::Value << o.error_threshold;
  y << YAML::Key << "mini_batch_error_threshold" << YAML::Value << -1;
  y << YAML::Key << "retry_settings" << YAML::Value << YAML::BeginMap << YAML::Key << "max_retries"
    << YAML::Value << o.max_retries;
  if (o.timeout_s > 0) y << YAML::Key << "timeout" << YAML::Value << o.timeout_s;
  y << YAML::EndMap;
  y << YAML::Key << "environment_variables" << YAML::Value << YAML::BeginMap;
  // GNU parallel's rule: an item succeeds by its exit status, whatever it prints.
  y << YAML::Key << "FANOUT_COMMAND_ITEMS" << YAML::Value << "exit_status";
  for (const auto& [name, value] : o.env) {
    y << YAML::Key << name << YAML::Value << YAML::DoubleQuoted << value;
  }
  y << YAML::EndMap;
  y << YAML::Key << "task" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "type" << YAML::Value << "command";
  y << YAML::Key << "code" << YAML::Value << o.code;
  y << YAML::Key << "command" << YAML::Value << YAML::Literal << adhoc_shell_line(o.shell);
  y << YAML::Key << "append_row_to" << YAML::Value << "${{outputs.rows}}";
  y << YAML::EndMap << YAML::EndMap;

  return std::string(
             "# Written by `fanout run -c`; kept so that `fanout resume` can finish the job.\n") +
         y.c_str() + "\n";
}

}  // namespace fanout::config
