// The launcher keys of the `fanout:` block. See detail/launcher_settings.hpp.
#include "fanout/config/detail/launcher_settings.hpp"

#include <cctype>
#include <limits>
#include <string>
#include <vector>

namespace fanout::config::detail {

namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

// Splits on ':' and checks that each part is a number; `max_parts` of them at most.
bool colon_parts(std::string_view s, std::size_t max_parts) {
  std::size_t parts = 0;
  for (std::size_t pos = 0;;) {
    auto c = s.find(':', pos);
    if (!all_digits(s.substr(pos, c - pos))) return false;
    ++parts;
    if (c == std::string_view::npos) break;
    pos = c + 1;
  }
  return parts <= max_parts;
}

// gpus_per_node and mem_per_node, as Slurm reads them: [type:]count, and a count with an
// optional unit (M by default).
void read_slurm_resources(const YamlReader& r, const Fields& f, LauncherSettings& s) {
  auto slurm_word = [&](const char* key, std::string& out, const char* expect) {
    if (const Entry* x = f.get(key)) {
      out = std::string(trim(r.text(*x)));
      const auto colon = out.rfind(':');
      const std::string_view count = std::string_view(out).substr(colon + 1);
      const bool unit = std::string(key) == "mem_per_node" && !count.empty() &&
                        std::string_view("KMGTkmgt").find(count.back()) != std::string_view::npos;
      const bool typed = colon != std::string::npos && std::string(key) == "gpus_per_node";
      if ((colon != std::string::npos && !typed) ||
          !all_digits(unit ? count.substr(0, count.size() - 1) : count) ||
          out.find_first_of(" \t\n\"'") != std::string::npos) {
        r.fail(x->where(),
               std::string("expected ") + expect + " (got " + quote(x->value.Scalar()) + ")");
      }
    }
  };
  slurm_word("gpus_per_node", s.gpus_per_node, "a GPU count such as 4 or a100:4");
  slurm_word("mem_per_node", s.mem_per_node, "a memory size as Slurm's --mem takes it: 64G, 4000");
}

// The keys of the PBS, LSF and HTCondor launchers: queue, nodes_per_block, pbs_flavor.
void read_batch_settings(const YamlReader& r, const Fields& f, LauncherSettings& s) {
  if (const Entry* x = f.get("queue")) {
    s.queue = std::string(trim(r.text(*x)));
    if (s.queue.empty() || s.queue.find_first_of(" \t\n\"'") != std::string::npos) {
      r.fail(x->where(), "expected one word (got " + quote(x->value.Scalar()) + ")");
    }
  }
  if (const Entry* x = f.get("nodes_per_block")) {
    s.nodes_per_block = static_cast<std::uint32_t>(r.integer(*x, 1, 100000));
  }
  if (const Entry* x = f.get("pbs_flavor")) {
    s.pbs_flavor = lower(trim(r.text(*x)));
    if (s.pbs_flavor != "pro" && s.pbs_flavor != "torque") {
      r.fail(x->where(), "expected pro or torque (got " + quote(x->value.Scalar()) + ")");
    }
  }
}

// The elastic keys (docs/cluster.md, section 6): init_nodes, parallelism (0 to 1) and
// max_idletime (seconds >= 0).
void read_elastic_settings(const YamlReader& r, const Fields& f, LauncherSettings& s) {
  if (const Entry* x = f.get("init_nodes")) {
    s.init_nodes = static_cast<std::uint32_t>(r.integer(*x, 1, 100000));
  }
  auto real = [&](const char* key, double lo, double hi, const char* expect, double& out) {
    if (const Entry* x = f.get(key)) {
      auto v = to_double(trim(r.text(*x)));
      if (!v || *v < lo || *v > hi) {
        r.fail(x->where(),
               std::string("expected ") + expect + " (got " + quote(x->value.Scalar()) + ")");
      }
      out = *v;
    }
  };
  real("parallelism", 0, 1, "a number from 0 to 1", s.parallelism);
  real("max_idletime", 0, 1e9, "a number of seconds >= 0", s.max_idletime_s);
  const std::uint32_t start = s.init_nodes > 0 ? s.init_nodes : s.nodes;
  if (s.init_nodes > 0 && s.max_nodes > 0 && s.max_nodes < s.init_nodes) {
    r.fail(f.get("max_nodes")->where(), "expected max_nodes >= init_nodes (got " +
                                            std::to_string(s.max_nodes) + " < " +
                                            std::to_string(start) + ")");
  }
}

// Whether `line` (trimmed, not empty) is a condor submit description command: `key = value`
// with a key of letters, digits, '_' and '.', or '+' before it (a job ClassAd attribute).
bool is_condor_command(std::string_view line) {
  auto eq = line.find('=');
  if (eq == std::string_view::npos) return false;
  auto key = trim(line.substr(0, eq));
  if (!key.empty() && key.front() == '+') key.remove_prefix(1);
  if (key.empty()) return false;
  for (char c : key) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_' && c != '.') return false;
  }
  return true;
}

// A list key of words, written as a YAML list or as one text: "a,b" (`comma`) or "a b".
std::vector<std::string> word_list(const YamlReader& r, const Entry& x, bool comma) {
  std::vector<std::string> raw;
  if (x.value.IsSequence()) {
    for (const auto& n : x.value) raw.push_back(r.scalar(n, x.key, "a list of words"));
  } else {
    raw = comma ? split_host_list(r.text(x, "a list, or one text of words separated by commas"))
                : split_words(r.text(x, "a list, or one text of options"));
  }
  std::vector<std::string> out;
  for (auto& w : raw) {
    const auto t = std::string(trim(w));
    if (t.empty()) continue;
    if (comma && t.find_first_of(" \t\n\"'") != std::string::npos) {
      r.fail(x.where(), "expected host names without spaces or quotes (got " + quote(t) + ")");
    }
    out.push_back(t);
  }
  return out;
}

// The ssh launcher's keys: hosts, ssh_options, pool_command.
void read_ssh_settings(const YamlReader& r, const Fields& f, LauncherSettings& s) {
  if (const Entry* x = f.get("hosts")) {
    s.hosts = word_list(r, *x, true);
    if (s.hosts.empty()) r.fail(x->where(), "expected at least one host (got none)");
  }
  if (const Entry* x = f.get("ssh_options")) s.ssh_options = word_list(r, *x, false);
  if (const Entry* x = f.get("pool_command")) {
    s.pool_command = std::string(trim(r.text(*x, "the pool binary's path on the hosts")));
    if (s.pool_command.empty()) r.fail(x->where(), "expected a path (got an empty text)");
  }
}

}  // namespace

bool is_slurm_time(std::string_view s) {
  if (s == "infinite" || s == "UNLIMITED" || s == "unlimited") return true;
  auto dash = s.find('-');
  if (dash == std::string_view::npos) return colon_parts(s, 3);
  return all_digits(s.substr(0, dash)) && colon_parts(s.substr(dash + 1), 3);
}

LauncherSettings read_launcher_settings(const YamlReader& r, const Fields& f) {
  constexpr std::int64_t kMaxU32 = std::numeric_limits<std::uint32_t>::max();
  auto u32 = [&](const Entry& x, std::int64_t lo) {
    return static_cast<std::uint32_t>(r.integer(x, lo, kMaxU32));
  };
  LauncherSettings s;
  if (const Entry* x = f.get("launcher")) {
    std::string k = lower(trim(r.text(*x)));
    if (!is_launcher_kind(k)) {
      r.fail(x->where(), "expected local, slurm, sge, pbs, lsf, condor or ssh (got " +
                             quote(x->value.Scalar()) + ")");
    }
    s.kind = k;
    s.line = x->line();
  }
  auto word = [&](const char* key, std::string& out) {
    if (const Entry* x = f.get(key)) {
      out = std::string(trim(r.text(*x)));
      if (out.empty() || out.find_first_of(" \t\n\"'") != std::string::npos) {
        r.fail(x->where(), "expected one word (got " + quote(x->value.Scalar()) + ")");
      }
    }
  };
  word("partition", s.partition);
  word("account", s.account);
  word("qos", s.qos);
  word("interchange_address", s.interchange_address);
  if (const Entry* x = f.get("walltime")) {
    s.walltime = std::string(trim(r.text(*x)));
    if (!is_slurm_time(s.walltime)) {
      r.fail(x->where(),
             "expected a Slurm time limit like \"01:00:00\", \"30\" or \"2-00:00:00\" "
             "(got " +
                 quote(x->value.Scalar()) + ")");
    }
  }
  if (const Entry* x = f.get("nodes")) s.nodes = u32(*x, 1);
  if (const Entry* x = f.get("min_nodes")) s.min_nodes = u32(*x, 0);
  if (const Entry* x = f.get("max_nodes")) s.max_nodes = u32(*x, 1);
  if (const Entry* x = f.get("cores_per_node")) s.cores_per_node = u32(*x, 1);
  read_slurm_resources(r, f, s);
  if (const Entry* x = f.get("exclusive")) s.exclusive = r.boolean(*x);
  if (const Entry* x = f.get("scheduler_options")) {
    s.scheduler_options = r.text(*x, "scheduler directives as one text (a YAML block: `|`)");
    if (auto e = check_scheduler_options(s.kind, s.scheduler_options); !e.empty()) {
      r.fail(x->where(), e);
    }
  }
  if (const Entry* x = f.get("worker_init")) s.worker_init = r.text(*x, "shell lines as one text");
  read_batch_settings(r, f, s);
  read_ssh_settings(r, f, s);
  read_elastic_settings(r, f, s);
  // The counts against each other where both are written (nodes may come from instance_count
  // later: the client checks again then).
  if (s.nodes > 0 && s.max_nodes > 0 && s.max_nodes < s.nodes) {
    r.fail(f.get("max_nodes")->where(), "expected max_nodes >= nodes (got " +
                                            std::to_string(s.max_nodes) + " < " +
                                            std::to_string(s.nodes) + ")");
  }
  if (s.nodes > 0 && s.min_nodes > s.nodes) {
    r.fail(f.get("min_nodes")->where(), "expected min_nodes <= nodes (got " +
                                            std::to_string(s.min_nodes) + " > " +
                                            std::to_string(s.nodes) + ")");
  }
  return s;
}

}  // namespace fanout::config::detail

namespace fanout::config {

bool is_launcher_kind(std::string_view kind) {
  return kind == "local" || kind == "slurm" || kind == "sge" || kind == "pbs" || kind == "lsf" ||
         kind == "condor" || kind == "ssh";
}

std::vector<std::string> split_host_list(std::string_view text) {
  std::vector<std::string> out;
  for (std::size_t pos = 0; pos <= text.size();) {
    auto c = text.find(',', pos);
    if (c == std::string_view::npos) c = text.size();
    auto w = detail::trim(text.substr(pos, c - pos));
    if (!w.empty()) out.emplace_back(w);
    pos = c + 1;
  }
  return out;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::string check_scheduler_options(std::string_view kind, std::string_view text) {
  using detail::quote;
  using detail::trim;
  // ssh has no scheduler to pass directives to; its own options are ssh_options.
  if (kind == "ssh" && !trim(text).empty()) {
    return "launcher ssh takes no scheduler directives (ssh's options go in fanout.ssh_options, "
           "--ssh-option)";
  }
  // Each branch: the one directive prefix the scheduler reads in its script (a line without it
  // would run as a command, or be ignored), condor's `key = value` commands, or, where no batch
  // launcher is written (it may come from --launcher), a line any of them takes.
  std::vector<std::string> prefixes;
  if (kind == "slurm" || kind == "local") prefixes.emplace_back("#SBATCH");
  if (kind == "sge" || kind == "local") prefixes.emplace_back("#$");
  if (kind == "pbs" || kind == "local") prefixes.emplace_back("#PBS");
  if (kind == "lsf" || kind == "local") prefixes.emplace_back("#BSUB");
  const bool condor = kind == "condor" || kind == "local";
  std::string what = prefixes.empty() ? "" : "an " + prefixes[0];
  for (std::size_t i = 1; i < prefixes.size(); ++i) what += ", " + prefixes[i];
  if (!what.empty()) what += " line";
  if (condor) {
    what += what.empty() ? "a submit description command `key = value`"
                         : " or a condor submit command `key = value`";
  }
  std::size_t n = 0;
  for (std::size_t pos = 0; pos < text.size(); ++n) {
    auto nl = text.find('\n', pos);
    auto line = trim(text.substr(pos, nl - pos));
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (line.empty()) continue;
    bool ok = condor && detail::is_condor_command(line);
    for (const auto& p : prefixes) ok = ok || line.starts_with(p);
    if (!ok) {
      return "line " + std::to_string(n + 1) + ": expected " + what +
             (kind == "local" ? "" : " for launcher " + std::string(kind)) + " (got " +
             quote(line) + ")";
    }
  }
  return {};
}

}  // namespace fanout::config
