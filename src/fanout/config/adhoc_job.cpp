// The job file of an ad-hoc run (`fanout run -c`). See adhoc_job.hpp.
#include "fanout/config/adhoc_job.hpp"

#include <yaml-cpp/yaml.h>

#include <array>
#include <cstdlib>
#include <set>

namespace fanout::config {

namespace {

// Which part of a value a replacement string stands for: {} {.} {/} {//} {/.}.
enum class Part { Whole, NoExt, Base, Dir, BaseNoExt };

// A piece of the user's command: literal text, or one of GNU parallel's replacement strings.
struct Piece {
  enum class Kind { Literal, Value, Seq, Slot, Empty } kind = Kind::Literal;
  std::string text{};      // the literal text, or the token as written
  std::size_t source = 0;  // Value: 0 the whole item (every value), k the k-th value
  Part part = Part::Whole;
  bool raw = false;  // at the very start of the command: put in unquoted (GNU's rule)
};

// The part named by what follows `{` or `{n` in a token ("}", ".}", "/}", "//}", "/.}"), with
// the token's length from there; nullopt when it is none of them.
std::optional<std::pair<Part, std::size_t>> part_at(std::string_view s) {
  constexpr std::array<std::pair<std::string_view, Part>, 5> kParts{{
      {"/.}", Part::BaseNoExt},
      {"//}", Part::Dir},
      {"/}", Part::Base},
      {".}", Part::NoExt},
      {"}", Part::Whole},
  }};
  for (const auto& [tail, part] : kParts) {
    if (s.substr(0, tail.size()) == tail) return std::make_pair(part, tail.size());
  }
  return std::nullopt;
}

// The replacement string at the start of `s`, if there is one (with its length): {} {.} {/}
// {//} {/.} {#} {%}, and {n} {n.} {n/} {n//} {n/.} (n negative: the n-th last value; past the
// values, empty as in GNU parallel).
std::optional<std::pair<Piece, std::size_t>> token_at(std::string_view s, std::size_t values) {
  if (s.size() < 2 || s[0] != '{') return std::nullopt;
  if (s.substr(0, 3) == "{#}") return std::make_pair(Piece{.kind = Piece::Kind::Seq}, 3);
  if (s.substr(0, 3) == "{%}") return std::make_pair(Piece{.kind = Piece::Kind::Slot}, 3);
  std::size_t i = 1;
  const bool negative = s[i] == '-';
  if (negative) ++i;
  const std::size_t digits = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - digits < 6) ++i;
  if (negative && i == digits) return std::nullopt;
  const auto part = part_at(s.substr(i));
  if (!part) return std::nullopt;
  Piece p{.kind = Piece::Kind::Value, .part = part->first};
  if (i > digits) {
    const long n = std::strtol(std::string(s.substr(digits, i - digits)).c_str(), nullptr, 10);
    const long k = negative ? static_cast<long>(values) + 1 - n : n;
    if (k < 1 || k > static_cast<long>(values)) {
      p.kind = Piece::Kind::Empty;
    } else {
      p.source = static_cast<std::size_t>(k);
    }
  }
  return std::make_pair(p, i + part->second);
}

// The command cut into literal text and replacement strings; ` {}` appended when it has none
// (unless `append` is false: --pipe, and -N0). `start`: the text begins the command line, where
// a replacement string is put in unquoted.
std::vector<Piece> pieces(const std::string& command, std::size_t values, bool append = true,
                          bool start = true) {
  std::vector<Piece> out;
  bool any = false;
  for (std::size_t i = 0; i < command.size();) {
    if (auto t = token_at(std::string_view(command).substr(i), values)) {
      t->first.text = command.substr(i, t->second);
      t->first.raw = start && i == 0;
      out.push_back(std::move(t->first));
      i += t->second;
      any = true;
      continue;
    }
    if (out.empty() || out.back().kind != Piece::Kind::Literal) out.push_back({});
    out.back().text += command[i++];
  }
  if (!any && append) {
    if (out.empty() || out.back().kind != Piece::Kind::Literal) out.push_back({});
    out.back().text += ' ';
    out.push_back({.kind = Piece::Kind::Value, .text = "{}"});
  }
  return out;
}

bool shell_safe(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_./:=@%+,-").find(c) != std::string_view::npos;
}

std::string_view part_name(Part p) {
  switch (p) {
    case Part::Whole:
      return "";
    case Part::NoExt:
      return "noext";
    case Part::Base:
      return "base";
    case Part::Dir:
      return "dir";
    case Part::BaseNoExt:
      return "base_noext";
  }
  return "";
}

// The shell variable holding the value a Value piece stands for, once put in: fanout_r_<...>.
std::string value_var(const Piece& p) {
  std::string v = "fanout_r_" + (p.source == 0 ? std::string("item") : std::to_string(p.source));
  if (p.part != Part::Whole) v += "_" + std::string(part_name(p.part));
  return p.raw ? v + "_raw" : v;
}

// sh text that sets each Value piece's variable to its value (quoted as GNU does, unless raw),
// then `fanout_cmd` to the command line with them put in.
std::string command_assignment(const std::vector<Piece>& ps, std::size_t sources) {
  std::string s;
  std::set<std::string> done;
  for (const auto& p : ps) {
    if (p.kind != Piece::Kind::Value || !done.insert(value_var(p)).second) continue;
    const std::string var = value_var(p);
    if (p.source == 0 && p.part == Part::Whole && sources > 1 && !p.raw) {
      // {} with several sources: every value, each quoted, separated by spaces.
      s += "  " + var + "=\n";
      for (std::size_t k = 1; k <= sources; ++k) {
        s += "  fanout_q \"$fanout_f" + std::to_string(k) + "\"; " + var + "=" +
             (k > 1 ? "\"$" + var + " \"" : "") + "$fanout_qv\n";
      }
      continue;
    }
    const std::string value =
        p.source == 0 ? "fanout_item"
                      : (sources == 1 ? "fanout_item" : "fanout_f" + std::to_string(p.source));
    std::string from = "\"$" + value + "\"";
    if (p.part != Part::Whole) {
      s += "  fanout_parts " + from + "\n";
      from = "\"$fanout_p_" + std::string(part_name(p.part)) + "\"";
    }
    if (p.raw) {
      s += "  " + var + "=" + from + "\n";
    } else {
      s += "  fanout_q " + from + "; " + var + "=$fanout_qv\n";
    }
  }
  s += "  fanout_cmd=";
  for (const auto& p : ps) {
    switch (p.kind) {
      case Piece::Kind::Literal:
        s += gnu_quote(p.text, true);
        break;
      case Piece::Kind::Seq:
        s += "\"$fanout_seq\"";
        break;
      case Piece::Kind::Slot:
        s += "\"$fanout_slot\"";
        break;
      case Piece::Kind::Empty:
        break;
      case Piece::Kind::Value:
        s += "\"$" + value_var(p) + "\"";
        break;
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

std::string part_of(const std::string& v, Part p) {
  if (p == Part::Whole) return v;
  const NameParts n = name_parts(v);
  return p == Part::NoExt  ? n.noext
         : p == Part::Base ? n.base
         : p == Part::Dir  ? n.dir
                           : n.base_noext;
}

// The fixed parts of the loop: GNU's quoting as a function (fanout_qv), the name parts of a
// value (fanout_p_*), the line prefixer for --tag, and the job slot ({%}: the worker's process
// number, process<N>, 1-based, which no two running items share).
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
constexpr std::string_view kPartsFn = R"SH(fanout_parts() {
  fanout_p_base=${1##*/}
  case $1 in */*) fanout_p_dir=${1%/*} ;; *) fanout_p_dir=. ;; esac
  case $fanout_p_base in
    ?*.*) fanout_p_base_noext=${fanout_p_base%.*}; fanout_p_noext=${1%.*} ;;
    *) fanout_p_base_noext=$fanout_p_base; fanout_p_noext=$1 ;;
  esac
}
)SH";
constexpr std::string_view kPrefixFn = R"SH(fanout_prefix() {
  while IFS= read -r fanout_l || [ -n "$fanout_l" ]; do
    printf '%s\t%s\n' "$fanout_item" "$fanout_l"
  done
}
)SH";
constexpr std::string_view kSlot = R"SH(fanout_slot=${FANOUT_PROCESS#process}
while :; do case $fanout_slot in 0?*) fanout_slot=${fanout_slot#0} ;; *) break ;; esac; done
fanout_slot=${fanout_slot:-1}
)SH";

// The lines that run the item's command line (fanout_cmd) and set fanout_rc to its status: its
// stdout to ours (--tag: each line tagged) or to --results' files; its stderr to fanout_e. With
// --pipe the item is a chunk of the input, given to the command on its stdin.
std::string run_lines(const AdhocShell& o) {
  // A pipe, as GNU parallel gives: some commands read a file otherwise (`wc` pads its columns
  // only for a pipe).
  const std::string feed = o.pipe ? "cat \"$fanout_item\" | " : "";
  std::string s;
  if (o.results) {
    // GNU's layout (parallel 20221122): RESULTS/<source>/<value>/ for each source, a value's
    // `\` written `\\` and `/` written `\_`, then stdout, stderr and seq (no newline after it).
    s += "  fanout_d=$FANOUT_ADHOC_RESULTS\n";
    for (std::size_t k = 1; k <= o.sources; ++k) {
      const std::string v = o.sources == 1 ? "$fanout_item" : "$fanout_f" + std::to_string(k);
      s += "  fanout_v=$(printf '%s' \"" + v +
           "\" | sed 's:\\\\:\\\\\\\\:g;s:/:\\\\_:g'; printf x); fanout_v=${fanout_v%x}\n";
      s += "  fanout_d=\"$fanout_d/" + std::to_string(k) + "/$fanout_v\"\n";
    }
    s += "  mkdir -p \"$fanout_d\" && printf '%s' \"$fanout_seq\" >\"$fanout_d/seq\" || exit 1\n";
    s += "  " + feed +
         "(eval \"$fanout_cmd\") 3<&- 2>\"$fanout_e\" >\"$fanout_d/stdout\"; fanout_rc=$?\n";
    s += "  cp \"$fanout_e\" \"$fanout_d/stderr\"\n";
  } else if (o.tag) {
    // The exit status comes back on fd 7, past the pipe into the prefixer.
    s += "  fanout_rc=$( { { " + feed +
         "(eval \"$fanout_cmd\") 3<&- 7>&- 2>\"$fanout_e\"; echo $? >&7; } | fanout_prefix >&6; } "
         "7>&1 )\n";
  } else {
    s += "  " + feed + "(eval \"$fanout_cmd\") 3<&- 6>&- 2>\"$fanout_e\"; fanout_rc=$?\n";
  }
  return s;
}

// Pieces put in for `values`: Sources mode (one value per input source) puts every value, each
// quoted, for {}, and the name parts of them all joined for {.} and the like; Multi (-m, -N)
// puts each value's part, each quoted, separated by spaces.
std::string render(const std::vector<Piece>& ps, const std::vector<std::string>& values,
                   std::uint64_t seq, bool quote_all, AdhocArgs mode, std::string_view slot) {
  std::string joined;
  for (const auto& v : values) joined += (joined.empty() ? "" : " ") + v;
  auto put = [quote_all](const Piece& p, const std::string& v) {
    return p.raw ? v : gnu_quote(v, quote_all);
  };
  std::string out;
  for (const auto& p : ps) {
    switch (p.kind) {
      case Piece::Kind::Literal:
        out += p.text;
        break;
      case Piece::Kind::Seq:
        out += std::to_string(seq);
        break;
      case Piece::Kind::Slot:
        out += slot;
        break;
      case Piece::Kind::Empty:
        break;
      case Piece::Kind::Value:
        if (p.source > 0) {
          out += put(p, part_of(values.at(p.source - 1), p.part));
        } else if (mode == AdhocArgs::Sources && (p.part != Part::Whole || p.raw)) {
          out += put(p, part_of(joined, p.part));
        } else if (values.empty()) {
          out += mode == AdhocArgs::Sources ? put(p, "") : "";
        } else {
          std::string all;
          for (const auto& v : values) all += (all.empty() ? "" : " ") + put(p, part_of(v, p.part));
          out += all;
        }
        break;
    }
  }
  return out;
}

bool has_value_of_all(const std::vector<Piece>& ps) {
  for (const auto& p : ps) {
    if (p.kind == Piece::Kind::Value && p.source == 0) return true;
  }
  return false;
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

std::optional<std::string> unsupported_replacement(const std::string& command) {
  if (const auto at = command.find("{="); at != std::string::npos) {
    const auto end = command.find("=}", at + 2);
    const std::string token =
        command.substr(at, end == std::string::npos ? std::string::npos : end + 2 - at);
    return "-c: " + token +
           " is a Perl replacement string, and fanout runs no Perl: compute the value in the "
           "command instead, e.g. $(printf %s {} | sed 's/a/b/')";
  }
  for (const std::string_view t : {"{0#}", "{0%}"}) {
    if (command.find(t) != std::string::npos) {
      return "-c: " + std::string(t) + " (zero-padded) is not supported: use " +
             std::string(t.substr(0, 1)) + std::string(t.substr(2)) +
             " and printf to pad, e.g. $(printf %03d " + std::string(t.substr(0, 1)) +
             std::string(t.substr(2)) + ")";
    }
  }
  return std::nullopt;
}

std::string adhoc_command_for(const std::string& command, const std::vector<std::string>& values,
                              std::uint64_t seq, bool quote_all, AdhocArgs mode,
                              std::string_view slot) {
  if (mode != AdhocArgs::Context) {
    return render(pieces(command, values.size(), !(mode == AdhocArgs::Multi && values.empty())),
                  values, seq, quote_all, mode, slot);
  }
  // -X: each word that holds a replacement string of the whole item is repeated, once per value.
  std::string cmd = command;
  bool any = false;
  for (const auto& p : pieces(cmd, values.size(), false))
    any = any || p.kind != Piece::Kind::Literal;
  if (!any) cmd += " {}";
  std::string out;
  for (std::size_t i = 0; i < cmd.size();) {
    const std::size_t end = std::min(cmd.find_first_of(" \t\n", i), cmd.size());
    if (end == i) {
      out += cmd[i++];
      continue;
    }
    const std::string word = cmd.substr(i, end - i);
    const auto ps = pieces(word, values.size(), false, i == 0);
    if (!has_value_of_all(ps)) {
      out += render(ps, values, seq, quote_all, AdhocArgs::Multi, slot);
    } else {
      std::string all;
      for (const auto& v : values) {
        all += (all.empty() ? "" : " ") + render(ps, {v}, seq, quote_all, AdhocArgs::Multi, slot);
      }
      out += all;
    }
    i = end;
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
  // expansions, made only for the replacement strings used. Each value is quoted by fanout_q
  // only where the shell needs it (a process only for those), the command line is built with
  // them and run by eval in a subshell (its `exit` or `cd` ends there), as GNU parallel runs
  // each command in a shell of its own. The item's stderr is held in a file beside the
  // mini-batch list and shown when it ends (with --tag, each line tagged).
  std::string s;
  s += o.quote_all ? kQuoteAllFn : kQuoteFn;
  s += kPartsFn;
  if (o.tag) s += kPrefixFn;
  s += kSlot;
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
  if (o.precomputed) {
    // -X, -m, -N: the client wrote each command line whole; only {%} is left to put in.
    s += "  fanout_cmd=$fanout_item\n";
  } else {
    s += command_assignment(pieces(o.command, o.sources, !o.pipe), o.sources);
  }
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
  // Always written: left out, the job file's default (Azure's 60 s) would apply to commands
  // that GNU parallel lets run as long as they take.
  y << YAML::Key << "timeout" << YAML::Value << o.timeout_s;
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
