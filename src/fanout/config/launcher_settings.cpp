// The launcher keys of the `fanout:` block. See detail/launcher_settings.hpp.
#include "fanout/config/detail/launcher_settings.hpp"

#include <cctype>
#include <limits>
#include <string>

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
    if (k != "local" && k != "slurm" && k != "sge") {
      r.fail(x->where(), "expected local, slurm or sge (got " + quote(x->value.Scalar()) + ")");
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
    s.scheduler_options = r.text(*x, "#SBATCH lines as one text (a YAML block: `|`)");
    std::size_t n = 0;
    for (std::size_t pos = 0; pos < s.scheduler_options.size(); ++n) {
      auto nl = s.scheduler_options.find('\n', pos);
      auto line = trim(std::string_view(s.scheduler_options).substr(pos, nl - pos));
      pos = nl == std::string::npos ? s.scheduler_options.size() : nl + 1;
      if (!line.empty() && line.rfind("#SBATCH", 0) != 0) {
        r.fail(x->where(), "line " + std::to_string(n + 1) + ": expected an #SBATCH line (got " +
                               quote(line) + ")");
      }
    }
  }
  if (const Entry* x = f.get("worker_init")) s.worker_init = r.text(*x, "shell lines as one text");
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
