// MLTable files to TableSpec, and the meaning of their patterns and partition formats. Reads the
// MLTable file only: listing what its paths name is client/input/listing.cpp's. See mltable.hpp and
// docs/job-spec.md#tabular-input.
#include "fanout/config/mltable.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "fanout/config/detail/located_yaml.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::config {
namespace {

namespace fs = std::filesystem;
using detail::describe;
using detail::line_of;
using detail::quote_whole;
using detail::Where;
using detail::YamlReader;

constexpr std::array<std::string_view, 4> kHeaders = {
    "no_header", "from_first_file", "all_files_different_headers", "all_files_same_headers"};
constexpr std::array<std::string_view, 8> kEncodings = {
    "utf8", "iso88591", "latin1", "ascii", "utf16", "utf32", "utf8bom", "windows1252"};

template <std::size_t N>
std::string one_of(const std::array<std::string_view, N>& names) {
  std::string s;
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) s += i + 1 == N ? " or " : ", ";
    s += names[i];
  }
  return s;
}

// Reads one MLTable file into t_. Single use: construct, call run() once.
class TableParser final {
 public:
  // `file` names the file in messages; `resolved` is its absolute path.
  TableParser(std::string file, const std::string& resolved) : r_(std::move(file)) {
    t_.source = r_.file();
    t_.base_dir = fs::path(resolved).parent_path().string();
  }

  TableSpec run(const YAML::Node& root) {
    if (!root.IsDefined() || !root.IsMap()) {
      r_.fail({"", line_of(root)},
              "expected a mapping with paths and transformations (got " + describe(root) + ")");
    }
    for (const auto& kv : root) {
      const std::string k = kv.first.Scalar();
      if (k != "paths" && k != "transformations" && k != "type" && k != "$schema" &&
          k != "metadata" && k != "traits") {
        r_.fail({k, line_of(kv.first)},
                "unknown key; expected paths, transformations, type, metadata or traits");
      }
    }
    const YAML::Node paths = root["paths"];
    if (!paths.IsDefined() || paths.IsNull()) {
      r_.fail({"paths", line_of(root)},
              "expected a list of file, folder or pattern entries (got nothing)");
    }
    parse_paths(paths);
    // Without a read_* transformation the table is a table of files (TableFormat::Files).
    t_.format = TableFormat::Files;
    if (const YAML::Node tr = root["transformations"]; tr.IsDefined() && !tr.IsNull()) {
      parse_transformations(tr);
    }
    return std::move(t_);
  }

 private:
  // A column name or a list of them; `holder` is n's parent, for the line when n is missing.
  std::vector<std::string> names(const YAML::Node& n, const std::string& key,
                                 const YAML::Node& holder) const {
    std::vector<std::string> out;
    if (!n.IsDefined()) {
      r_.fail({key, line_of(holder)}, "expected a column name or a list of them (got a mapping)");
    }
    if (n.IsScalar()) {
      out.push_back(n.Scalar());
    } else if (n.IsSequence()) {
      for (std::size_t i = 0; i < n.size(); ++i) {
        out.push_back(r_.scalar(n[i], key + "[" + std::to_string(i) + "]", "a column name"));
      }
    } else {
      r_.fail({key, line_of(n)},
              "expected a column name or a list of them (got " + describe(n) + ")");
    }
    for (const auto& s : out) {
      if (s.empty()) r_.fail({key, line_of(n)}, "expected a column name (got \"\")");
    }
    return out;
  }

  void parse_paths(const YAML::Node& paths) {
    if (!paths.IsSequence() || paths.size() == 0) {
      r_.fail({"paths", line_of(paths)},
              "expected a list of file, folder or pattern entries (got " +
                  (paths.IsSequence() ? std::string("an empty list") : describe(paths)) + ")");
    }
    for (std::size_t i = 0; i < paths.size(); ++i) {
      const YAML::Node e = paths[i];
      const std::string key = "paths[" + std::to_string(i) + "]";
      if (!e.IsMap() || e.size() != 1) {
        r_.fail({key, line_of(e)},
                "expected one of file: <path>, folder: <path> or pattern: <glob> (got " +
                    describe(e) + ")");
      }
      const auto kv = *e.begin();
      TablePath p;
      p.kind = kv.first.Scalar();
      p.line = line_of(kv.first);
      if (p.kind != "file" && p.kind != "folder" && p.kind != "pattern") {
        r_.fail({key, p.line},
                "expected file, folder or pattern (got " + quote_whole(p.kind) + ")");
      }
      const Where at{key + "." + p.kind, p.line};
      std::string v = r_.scalar(kv.second, at.key, "a local path");
      if (v.empty()) r_.fail(at, "expected a local path (got \"\")");
      if (v.find("://") != std::string::npos || v.rfind("azureml:", 0) == 0) {
        r_.fail(at, "expected a local path; remote URIs and Azure ML assets are not read (got " +
                        quote_whole(v) + ")");
      }
      p.value = p.kind == "pattern" ? v : resolve_path(t_.base_dir, v);
      t_.paths.push_back(std::move(p));
    }
  }

  void parse_transformations(const YAML::Node& tr) {
    if (!tr.IsSequence()) {
      r_.fail({"transformations", line_of(tr)}, "expected a list (got " + describe(tr) + ")");
    }
    for (std::size_t i = 0; i < tr.size(); ++i) {
      const YAML::Node step = tr[i];
      const std::string key = "transformations[" + std::to_string(i) + "]";
      if (!step.IsMap() || step.size() != 1) {
        r_.fail({key, line_of(step)},
                "expected one transformation such as read_delimited (got " + describe(step) + ")");
      }
      const auto kv = *step.begin();
      const std::string name = kv.first.Scalar();
      const std::string k = key + "." + name;
      const YAML::Node v = kv.second;
      if (name == "read_delimited") {
        t_.format = TableFormat::Delimited;
        parse_read_delimited(v, k);
      } else if (name == "extract_columns_from_partition_format") {
        // Written either as the format itself or as {partition_format: ...}.
        if (v.IsMap()) {
          t_.partition_format = r_.scalar(v["partition_format"], k + ".partition_format",
                                          "a format such as {year}/{month}/*.csv");
        } else {
          t_.partition_format = r_.scalar(v, k, "a format such as {year}/{month}/*.csv");
        }
        if (partition_format_keys(t_.partition_format).empty()) {
          r_.fail({k, line_of(v)}, "expected a format naming at least one {column} (got " +
                                       quote_whole(t_.partition_format) + ")");
        }
      } else if (name == "drop_columns") {
        auto n = names(v.IsMap() ? v["columns"] : v, k, v);
        t_.drop_columns.insert(t_.drop_columns.end(), n.begin(), n.end());
      } else if (name == "keep_columns") {
        auto n = names(v.IsMap() ? v["columns"] : v, k, v);
        t_.keep_columns.insert(t_.keep_columns.end(), n.begin(), n.end());
      } else {
        r_.fail({key, line_of(kv.first)},
                "expected read_delimited, extract_columns_from_partition_format, drop_columns or "
                "keep_columns; fanout does not support " +
                    quote_whole(name) + " yet");
      }
    }
  }

  void parse_read_delimited(const YAML::Node& v, const std::string& k) {
    if (v.IsNull()) return;
    if (!v.IsMap()) {
      r_.fail({k, line_of(v)}, "expected a mapping of options (got " + describe(v) + ")");
    }
    for (const auto& kv : v) {
      const std::string opt = kv.first.Scalar();
      const std::string ok = k + "." + opt;
      const YAML::Node x = kv.second;
      if (opt == "delimiter") {
        t_.delimiter = r_.scalar(x, ok, "one character");
        if (t_.delimiter == "\\t") t_.delimiter = "\t";
        if (t_.delimiter.size() != 1 || t_.delimiter == "\"" || t_.delimiter == "\n") {
          r_.fail({ok, line_of(x)},
                  "expected one character other than a quote or a line break (got " +
                      quote_whole(t_.delimiter) + ")");
        }
      } else if (opt == "encoding") {
        t_.encoding = r_.scalar(x, ok, one_of(kEncodings));
        if (std::find(kEncodings.begin(), kEncodings.end(), t_.encoding) == kEncodings.end()) {
          r_.fail({ok, line_of(x)},
                  "expected " + one_of(kEncodings) + " (got " + quote_whole(t_.encoding) + ")");
        }
      } else if (opt == "header") {
        t_.header = r_.scalar(x, ok, one_of(kHeaders));
        if (std::find(kHeaders.begin(), kHeaders.end(), t_.header) == kHeaders.end()) {
          r_.fail({ok, line_of(x)},
                  "expected " + one_of(kHeaders) + " (got " + quote_whole(t_.header) + ")");
        }
      } else if (opt == "empty_as_string") {
        t_.empty_as_string = r_.boolean(x, ok);
      } else if (opt == "include_path_column") {
        t_.include_path_column = r_.boolean(x, ok);
      } else if (opt == "infer_column_types" || opt == "support_multi_line") {
        (void)r_.boolean(x, ok);  // pandas infers types; quoted fields may always span lines
      } else {
        r_.fail({ok, line_of(kv.first)},
                "unknown option; expected delimiter, encoding, header, empty_as_string, "
                "include_path_column, infer_column_types or support_multi_line");
      }
    }
  }

  YamlReader r_;
  TableSpec t_{};
};

bool segment_match(std::string_view p, std::string_view s) {
  std::size_t pi = 0, si = 0, star_p = std::string_view::npos, star_s = 0;
  while (si < s.size()) {
    if (pi < p.size() && p[pi] == '[') {
      const std::size_t close = p.find(']', pi + 1);
      if (close != std::string_view::npos) {
        std::string_view set = p.substr(pi + 1, close - pi - 1);
        const bool neg = !set.empty() && (set[0] == '!' || set[0] == '^');
        if (neg) set.remove_prefix(1);
        bool hit = false;
        for (std::size_t k = 0; k < set.size(); ++k) {
          if (k + 2 < set.size() && set[k + 1] == '-') {
            hit = hit || (s[si] >= set[k] && s[si] <= set[k + 2]);
            k += 2;
          } else {
            hit = hit || s[si] == set[k];
          }
        }
        if (hit != neg) {
          pi = close + 1;
          ++si;
          continue;
        }
      }
    } else if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++pi;
      ++si;
      continue;
    }
    if (pi < p.size() && p[pi] == '*') {
      star_p = pi++;
      star_s = si;
      continue;
    }
    if (star_p == std::string_view::npos) return false;
    pi = star_p + 1;
    si = ++star_s;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::vector<std::string_view> segments(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    const std::size_t slash = s.find('/');
    std::string_view seg = s.substr(0, slash);
    if (!seg.empty()) out.push_back(seg);
    if (slash == std::string_view::npos) break;
    s.remove_prefix(slash + 1);
  }
  return out;
}

bool match_segments(const std::vector<std::string_view>& p, std::size_t i,
                    const std::vector<std::string_view>& s, std::size_t j) {
  if (i == p.size()) return j == s.size();
  if (p[i] == "**") {
    for (std::size_t k = j; k <= s.size(); ++k) {
      if (match_segments(p, i + 1, s, k)) return true;
    }
    return false;
  }
  return j < s.size() && segment_match(p[i], s[j]) && match_segments(p, i + 1, s, j + 1);
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view path) {
  return match_segments(segments(pattern), 0, segments(path), 0);
}

std::vector<std::string> partition_format_keys(std::string_view format) {
  std::vector<std::string> keys;
  for (std::size_t i = 0; (i = format.find('{', i)) != std::string_view::npos;) {
    const std::size_t close = format.find('}', i);
    if (close == std::string_view::npos) break;
    keys.emplace_back(format.substr(i + 1, close - i - 1));
    i = close + 1;
  }
  return keys;
}

FormatMatch match_partition_format(std::string_view format, std::string_view rel_path) {
  while (!format.empty() && format.front() == '/') format.remove_prefix(1);
  while (!rel_path.empty() && rel_path.front() == '/') rel_path.remove_prefix(1);
  // Backtracking over the literal pieces; {name} and * never cross a '/'.
  FormatMatch m;
  std::vector<std::pair<std::string, std::string>> vals;
  auto rec = [&](auto& self, std::size_t fi, std::size_t pi) -> bool {
    if (fi == format.size()) return pi == rel_path.size();
    const char c = format[fi];
    if (c == '{' || c == '*') {
      std::size_t next = fi + 1;
      std::string name;
      if (c == '{') {
        const std::size_t close = format.find('}', fi);
        if (close == std::string_view::npos) return false;
        name = std::string(format.substr(fi + 1, close - fi - 1));
        next = close + 1;
      }
      for (std::size_t end = pi; end <= rel_path.size(); ++end) {
        if (end > pi && rel_path[end - 1] == '/') break;
        if (c == '{' && end == pi) continue;  // a named value is never empty
        if (c == '{') vals.emplace_back(name, std::string(rel_path.substr(pi, end - pi)));
        if (self(self, next, end)) return true;
        if (c == '{') vals.pop_back();
      }
      return false;
    }
    return pi < rel_path.size() && rel_path[pi] == c && self(self, fi + 1, pi + 1);
  };
  if (rec(rec, 0, 0)) {
    m.ok = true;
    m.values = std::move(vals);
  }
  return m;
}

std::string glob_prefix(std::string_view pattern) {
  std::string prefix;
  for (auto seg : segments(pattern)) {
    if (seg.find_first_of("*?[") != std::string_view::npos) break;
    prefix += std::string(seg) + "/";
  }
  return prefix;
}

std::string output_mltable_text(const std::string& folder, const std::string& row_file,
                                const std::string& separator, bool header) {
  // Single-quoted YAML keeps everything but the quote itself, which is doubled; a tab is written
  // as \t, which read_delimited reads back as a tab.
  auto yaml_quote = [](const std::string& v) {
    std::string out = "'";
    for (char c : v) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
  };
  std::string text =
      "$schema: https://azuremlschemas.azureedge.net/latest/MLTable.schema.json\n"
      "# Written by fanout when the job ended: what the job wrote into this folder.\n"
      "type: mltable\npaths:\n";
  std::string rel;
  if (!row_file.empty()) {
    const fs::path r = fs::path(row_file).lexically_relative(fs::path(folder));
    if (!r.empty() && *r.begin() != "..") rel = r.string();
  }
  if (rel.empty()) return text + "  - folder: ./\n";
  text += "  - file: " + yaml_quote("./" + rel) + "\n";
  text += "transformations:\n  - read_delimited:\n";
  text +=
      "      delimiter: " + yaml_quote(separator == "\t" ? std::string("\\t") : separator) + "\n";
  text += std::string("      header: ") + (header ? "all_files_same_headers" : "no_header") + "\n";
  text += "      encoding: utf8\n";
  return text;
}

Expected<TableSpec> parse_mltable(const std::string& text, const std::string& file) {
  std::error_code ec;
  const std::string resolved = resolve_path(fs::current_path(ec).string(), file);
  return detail::read_yaml(file, [&] {
    return TableParser(file, resolved).run(detail::load_yaml(text, file, /*one_document=*/false));
  });
}

Expected<TableSpec> load_mltable(const std::string& path) {
  std::error_code ec;
  std::string file = fs::is_directory(path, ec) ? (fs::path(path) / "MLTable").string() : path;
  auto text = read_file(file);
  if (!text) return Unexpected{text.error()};
  return parse_mltable(*text, file);
}

}  // namespace fanout::config
