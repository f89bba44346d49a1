// The --help layout shared by fanout, fanout-interchange and fanout-pool: 80 columns, plain
// value names. Header-only and without an include of CLI11: CLI11 has its home in the
// programs' main.cpp files (tools/check_layering.sh), so only a main.cpp, after its
// <CLI/CLI.hpp>, can include this file.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace fanout {

// --help laid out for an 80-column terminal: option names in a fixed margin with their
// descriptions wrapped beside it; plain value names (N, PATH) instead of CLI11's validator
// descriptions (INT:INT in [1 - 1000000]); a short set of allowed values shown as the value
// (local|slurm), a longer one and the default at the end of the description; the option groups in
// a fixed order (place_in_help). The man pages are made from this output
// (tools/packaging/gen_man.sh), so they read the same. Each program's main.cpp sets it:
// app.formatter(std::make_shared<fanout::HelpFormatter>()).
class HelpFormatter final : public CLI::Formatter {
 public:
  static constexpr std::size_t kWidth = 80;
  static constexpr std::size_t kMargin = 30;  // "  --interchange-address ADDR" fits

  HelpFormatter() { column_width(kMargin); }

  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    return make_description(app) + make_usage(app, name) + make_positionals(app) +
           ordered_groups(app) + make_subcommands(app, mode) + "\n" + make_footer(app);
  }

  std::string make_option(const CLI::Option* opt, bool positional) const override {
    const std::string opts = positional ? std::string() : make_option_opts(opt);
    return two_columns(make_option_name(opt, positional) + opts, make_option_desc(opt));
  }
  std::string make_subcommand(const CLI::App* sub) const override {
    return two_columns(sub->get_name(), sub->get_description());
  }
  std::string make_description(const CLI::App* app) const override {
    const std::string& d = app->get_description();
    return d.empty() ? std::string() : wrapped(d, 0, kWidth) + "\n";
  }
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
    if (opt->get_type_size() == 0) return {};  // a flag
    std::string value = base_type(*opt);
    const std::string set = allowed_set(*opt);
    if (!set.empty() && set.size() <= 20) {
      value = set;
      std::replace(value.begin(), value.end(), ',', '|');
    }
    if (opt->get_expected_max() >= CLI::detail::expected_max_vector_size) value += " ...";
    return " " + value;
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string d = opt->get_description();
    if (const std::string set = allowed_set(*opt); set.size() > 20) {
      std::string listed = set;
      for (std::size_t p = listed.find(','); p != std::string::npos; p = listed.find(',', p + 2)) {
        listed.insert(p + 1, " ");
      }
      d += " (one of: " + listed + ")";
    }
    if (!opt->get_default_str().empty() && d.find("default") == std::string::npos) {
      d += " (default: " + opt->get_default_str() + ")";
    }
    return d;
  }

 private:
  // CLI11's default group first, then groups of other names (in the order declared), then these.
  static std::size_t rank(const std::string& group) {
    static const std::array<const char*, 6> kOrder = {"Input",    "Output",  "Workers",
                                                      "Failures", "Cluster", "Advanced"};
    if (group == "Options") return 0;
    const auto* it = std::find(kOrder.begin(), kOrder.end(), group);
    return it == kOrder.end() ? 1 : 2 + static_cast<std::size_t>(it - kOrder.begin());
  }
  std::string ordered_groups(const CLI::App* app) const {
    std::vector<std::string> groups = app->get_groups();
    std::stable_sort(groups.begin(), groups.end(),
                     [](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
    std::string out;
    for (const std::string& g : groups) {
      auto opts = app->get_options(
          [&g](const CLI::Option* o) { return o->get_group() == g && o->nonpositional(); });
      if (!g.empty() && !opts.empty()) out += make_group(g, false, opts);
    }
    return out;
  }
  // The value's own name: what type_name() set, or CLI11's type with N for its integer types.
  static std::string base_type(const CLI::Option& opt) {
    std::string t = opt.get_type_name();
    t = t.substr(0, t.find(':'));
    if (t == "INT" || t == "UINT") return "N";
    if (t == "FLOAT") return "NUMBER";
    return t;
  }
  // "a,b,c" for an option checked with CLI::IsMember, else empty.
  static std::string allowed_set(const CLI::Option& opt) {
    const std::string t = opt.get_type_name();
    const std::size_t open = t.find(":{");
    const std::size_t close = t.find('}', open == std::string::npos ? 0 : open);
    if (open == std::string::npos || close == std::string::npos) return {};
    return t.substr(open + 2, close - open - 2);
  }
  // `text` in lines of at most `width` columns, each after the first indented by `indent`.
  static std::string wrapped(const std::string& text, std::size_t indent, std::size_t width) {
    std::string out, line;
    std::istringstream words(text);
    for (std::string w; words >> w;) {
      if (!line.empty() && indent + line.size() + 1 + w.size() > width) {
        out += line + "\n" + std::string(indent, ' ');
        line.clear();
      }
      line += (line.empty() ? "" : " ") + w;
    }
    return out + line;
  }
  static std::string two_columns(const std::string& name, const std::string& desc) {
    std::string out = "  " + name;
    if (desc.empty()) return out + "\n";
    out += out.size() + 1 > kMargin ? "\n" + std::string(kMargin, ' ')
                                    : std::string(kMargin - out.size(), ' ');
    return out + wrapped(desc, kMargin, kWidth) + "\n";
  }
};

// Names the value of each option in `names` ({"--db", "PATH"}) as help shows it, instead of
// CLI11's TEXT. An option the app lacks is skipped.
inline void value_names(CLI::App& app,
                        std::initializer_list<std::pair<const char*, const char*>> names) {
  for (const auto& [option, value] : names) {
    if (CLI::Option* o = app.get_option_no_throw(option)) o->type_name(value);
  }
}

}  // namespace fanout
