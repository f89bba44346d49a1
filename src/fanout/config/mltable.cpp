// MLTable files to TableSpec, and the meaning of their patterns and partition formats. Reads the
// MLTable file only: listing what its paths name is client/input/listing.cpp's. See mltable.hpp and
// docs/job-spec.md#tabular-input.
#include "fanout/config/mltable.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string_view>
#include <system_error>

#include "fanout/config/detail/located_yaml.hpp"
#include "fanout/util/fs.hpp"
#include "fanout/util/json.hpp"

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

// A filter expression as JSON: [[column, op, value], ...], every comparison to hold; or the
// reason it is not one fanout reads.
struct ParsedFilter {
  std::string json{};
  std::string error{};
};

// Longer than most: one left-to-right reader of the grammar, kept whole so it reads top to bottom.
ParsedFilter parse_filter(std::string_view e) {
  ParsedFilter out;
  std::size_t i = 0;
  auto space = [&] {
    while (i < e.size() && (e[i] == ' ' || e[i] == '\t')) ++i;
  };
  auto quoted = [&](std::string& v) {
    if (i >= e.size() || (e[i] != '"' && e[i] != '\'')) return false;
    const char q = e[i];
    const std::size_t close = e.find(q, i + 1);
    if (close == std::string_view::npos) return false;
    v = std::string(e.substr(i + 1, close - i - 1));
    i = close + 1;
    return true;
  };
  out.json = "[";
  for (bool first = true;; first = false) {
    space();
    std::string column;
    if (e.substr(i, 4) != "col(") {
      out.error = "expected col(\"name\") at character " + std::to_string(i + 1);
      return out;
    }
    i += 4;
    space();
    if (!quoted(column)) {
      out.error = "expected a quoted column name at character " + std::to_string(i + 1);
      return out;
    }
    space();
    if (i >= e.size() || e[i] != ')') {
      out.error = "expected ')' at character " + std::to_string(i + 1);
      return out;
    }
    ++i;
    space();
    std::string op;
    for (std::string_view cand : {"==", "!=", "<=", ">=", "<", ">"}) {
      if (e.substr(i, cand.size()) == cand) {
        op = std::string(cand);
        break;
      }
    }
    if (op.empty()) {
      out.error = "expected ==, !=, <, <=, > or >= at character " + std::to_string(i + 1);
      return out;
    }
    i += op.size();
    space();
    std::string value;
    if (std::string text; quoted(text)) {
      value = json_quote(text);
    } else {
      const std::size_t start = i;
      while (i < e.size() && e[i] != ' ' && e[i] != '\t') ++i;
      const std::string word(e.substr(start, i - start));
      char* end = nullptr;
      (void)std::strtod(word.c_str(), &end);
      if (word == "true" || word == "True") {
        value = "true";
      } else if (word == "false" || word == "False") {
        value = "false";
      } else if (!word.empty() && *end == '\0' && word.find_first_of("xXnN") == std::string::npos) {
        value = word;  // a decimal number is valid JSON as written, after a leading '+' or '.'
        if (value.front() == '+') value.erase(0, 1);
        if (value.front() == '.' || value.starts_with("-.")) {
          value.insert(value.front() == '-' ? 1 : 0, "0");
        }
        if (value.back() == '.') value += "0";
      } else {
        out.error = "expected a number, a quoted string, true or false at character " +
                    std::to_string(start + 1);
        return out;
      }
    }
    out.json += std::string(first ? "" : ",") + "[" + json_quote(column) + "," + json_quote(op) +
                "," + value + "]";
    space();
    if (i == e.size()) break;
    if (e.substr(i, 4) != "and " && e.substr(i, 4) != "and\t") {
      out.error = "expected and or the end at character " + std::to_string(i + 1);
      return out;
    }
    i += 4;
  }
  out.json += "]";
  return out;
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
      } else if (name == "read_json_lines") {
        t_.format = TableFormat::JsonLines;
        parse_read_json_lines(v, k);
      } else if (name == "read_parquet" || name == "read_delta_lake") {
        r_.fail({key, line_of(kv.first)},
                name +
                    " is not supported: fanout reads tables with Debian 12's packages, which "
                    "have no Parquet library (pyarrow, fastparquet); convert the files to CSV "
                    "(read_delimited) or JSON lines (read_json_lines)");
      } else if (name == "take" || name == "skip" || name == "take_random_sample") {
        if (filter_line_ > 0) {
          r_.fail({k, line_of(kv.first)},
                  "fanout applies filter after the rows are cut into mini-batches, so " + name +
                      " cannot follow the filter of line " + std::to_string(filter_line_) +
                      "; put " + name + " before filter");
        }
        t_.row_steps.push_back(row_step(name, v, k));
      } else if (name == "convert_column_types") {
        add_column_step(convert_step(v, k));
      } else if (name == "filter") {
        filter_line_ = line_of(kv.first);
        add_column_step(filter_step(v, k));
      } else {
        r_.fail({key, line_of(kv.first)},
                "expected read_delimited, read_json_lines, extract_columns_from_partition_format, "
                "drop_columns, keep_columns, take, skip, take_random_sample, "
                "convert_column_types or filter; fanout does not support " +
                    quote_whole(name) + " yet");
      }
    }
  }

  void add_column_step(const std::string& json) {
    t_.column_steps.pop_back();  // the closing ']'
    if (t_.column_steps.size() > 1) t_.column_steps += ",";
    t_.column_steps += json + "]";
  }

  RowStep row_step(const std::string& name, const YAML::Node& v, const std::string& k) const {
    RowStep st;
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    if (name == "take" || name == "skip") {
      st.kind = name == "take" ? RowStep::Kind::Take : RowStep::Kind::Skip;
      // `take: 10` or `take: {count: 10}`.
      const YAML::Node c = v.IsMap() ? v["count"] : v;
      const std::string ck = v.IsMap() ? k + ".count" : k;
      st.count = static_cast<std::uint64_t>(
          r_.integer({ck, line_of(v)}, r_.scalar(c, ck, "a row count"), 0, kMax));
      return st;
    }
    st.kind = RowStep::Kind::Sample;
    if (!v.IsMap()) {
      r_.fail({k, line_of(v)},
              "expected a mapping with probability and seed (got " + describe(v) + ")");
    }
    for (const auto& kv : v) {
      const std::string opt = kv.first.Scalar();
      if (opt != "probability" && opt != "seed") {
        r_.fail({k + "." + opt, line_of(kv.first)}, "unknown option; expected probability or seed");
      }
    }
    const std::string pk = k + ".probability";
    const std::string p = r_.scalar(v["probability"], pk, "a number from 0 to 1");
    char* end = nullptr;
    st.probability = std::strtod(p.c_str(), &end);
    if (p.empty() || *end != '\0' || !(st.probability >= 0 && st.probability <= 1)) {
      r_.fail({pk, line_of(v)}, "expected a number from 0 to 1 (got " + quote_whole(p) + ")");
    }
    if (v["seed"]) {
      const std::string sk = k + ".seed";
      st.seed = static_cast<std::uint64_t>(
          r_.integer({sk, line_of(v)}, r_.scalar(v["seed"], sk, "an integer"), 0, kMax));
    }
    return st;
  }

  // convert_column_types: a list of {columns, column_type}; as JSON for the worker.
  std::string convert_step(const YAML::Node& v, const std::string& k) const {
    if (!v.IsSequence()) {
      r_.fail({k, line_of(v)},
              "expected a list of {columns, column_type} entries (got " + describe(v) + ")");
    }
    std::string j = "{\"convert\":[";
    for (std::size_t i = 0; i < v.size(); ++i) {
      const YAML::Node e = v[i];
      const std::string ek = k + "[" + std::to_string(i) + "]";
      if (!e.IsMap()) {
        r_.fail({ek, line_of(e)}, "expected {columns, column_type} (got " + describe(e) + ")");
      }
      for (const auto& kv : e) {
        const std::string opt = kv.first.Scalar();
        if (opt != "columns" && opt != "column_type") {
          r_.fail({ek + "." + opt, line_of(kv.first)},
                  "unknown key; expected columns or column_type");
        }
      }
      auto cols = names(e["columns"], ek + ".columns", e);
      if (i > 0) j += ",";
      j += "{\"columns\":[";
      for (std::size_t c = 0; c < cols.size(); ++c) j += (c ? "," : "") + json_quote(cols[c]);
      j += "]," + column_type(e["column_type"], ek + ".column_type", e) + "}";
    }
    return j + "]}";
  }

  // "type":"int" etc., with the options of boolean and datetime.
  std::string column_type(const YAML::Node& n, const std::string& k,
                          const YAML::Node& holder) const {
    constexpr std::array<std::string_view, 5> kTypes = {"int", "float", "string", "boolean",
                                                        "datetime"};
    if (!n.IsDefined() || n.IsNull()) {
      r_.fail({k, line_of(holder)}, "expected " + one_of(kTypes) + " (got nothing)");
    }
    std::string type;
    YAML::Node opts;
    if (n.IsScalar()) {
      type = n.Scalar();
    } else if (n.IsMap() && n.size() == 1) {
      type = n.begin()->first.Scalar();
      opts = n.begin()->second;
    } else {
      r_.fail({k, line_of(n)}, "expected " + one_of(kTypes) + " (got " + describe(n) + ")");
    }
    if (std::find(kTypes.begin(), kTypes.end(), type) == kTypes.end()) {
      r_.fail({k, line_of(n)}, "expected " + one_of(kTypes) + " (got " + quote_whole(type) + ")");
    }
    std::string j = "\"type\":" + json_quote(type);
    if (!opts.IsDefined() || opts.IsNull()) return j;
    const bool is_bool = type == "boolean";
    if (!opts.IsMap() || (type != "boolean" && type != "datetime")) {
      r_.fail({k + "." + type, line_of(opts)},
              "expected no options for " + type + " (got " + describe(opts) + ")");
    }
    for (const auto& kv : opts) {
      const std::string opt = kv.first.Scalar();
      const std::string ok = k + "." + type + "." + opt;
      const bool list =
          is_bool ? (opt == "true_values" || opt == "false_values") : (opt == "formats");
      if (list) {
        auto vals = names(kv.second, ok, opts);
        j += "," + json_quote(opt) + ":[";
        for (std::size_t c = 0; c < vals.size(); ++c) j += (c ? "," : "") + json_quote(vals[c]);
        j += "]";
      } else if (is_bool && opt == "mismatch_as") {
        const std::string m = r_.scalar(kv.second, ok, "true, false or error");
        if (m != "true" && m != "false" && m != "error") {
          r_.fail({ok, line_of(kv.second)},
                  "expected true, false or error (got " + quote_whole(m) + ")");
        }
        j += ",\"mismatch_as\":" + json_quote(m);
      } else {
        r_.fail({ok, line_of(kv.first)},
                is_bool ? "unknown option; expected true_values, false_values or mismatch_as"
                        : "unknown option; expected formats");
      }
    }
    return j;
  }

  // filter: comparisons of a column with a literal, joined by `and`; as JSON for the worker.
  std::string filter_step(const YAML::Node& v, const std::string& k) const {
    const std::string expr = r_.scalar(v, k, "an expression such as col(\"age\") > 30");
    auto parsed = parse_filter(expr);
    if (!parsed.error.empty()) {
      r_.fail({k, line_of(v)},
              parsed.error + " in " + quote_whole(expr) +
                  "; fanout supports comparisons of a column with a number, string or boolean "
                  "(col(\"a\") > 3, col(\"b\") == \"x\"), joined by and");
    }
    return "{\"filter\":" + parsed.json + "}";
  }

  // One of `allowed`, else an error naming the key, the choices and the value.
  template <std::size_t N>
  std::string choice(const YAML::Node& x, const std::string& key,
                     const std::array<std::string_view, N>& allowed) const {
    std::string v = r_.scalar(x, key, one_of(allowed));
    if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
      r_.fail({key, line_of(x)}, "expected " + one_of(allowed) + " (got " + quote_whole(v) + ")");
    }
    return v;
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
        t_.encoding = choice(x, ok, kEncodings);
      } else if (opt == "header") {
        t_.header = choice(x, ok, kHeaders);
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

  void parse_read_json_lines(const YAML::Node& v, const std::string& k) {
    if (v.IsNull()) return;
    if (!v.IsMap()) {
      r_.fail({k, line_of(v)}, "expected a mapping of options (got " + describe(v) + ")");
    }
    for (const auto& kv : v) {
      const std::string opt = kv.first.Scalar();
      const std::string ok = k + "." + opt;
      const YAML::Node x = kv.second;
      if (opt == "encoding") {
        t_.encoding = choice(x, ok, kEncodings);
      } else if (opt == "invalid_lines") {
        t_.invalid_lines = r_.scalar(x, ok, "error or drop");
        if (t_.invalid_lines != "error" && t_.invalid_lines != "drop") {
          r_.fail({ok, line_of(x)},
                  "expected error or drop (got " + quote_whole(t_.invalid_lines) + ")");
        }
      } else if (opt == "include_path_column") {
        t_.include_path_column = r_.boolean(x, ok);
      } else {
        r_.fail({ok, line_of(kv.first)},
                "unknown option; expected encoding, invalid_lines or include_path_column");
      }
    }
  }

  YamlReader r_;
  TableSpec t_{};
  int filter_line_ = 0;  // the line of the first filter step (0: none yet)
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

// A 64-bit mix of (seed, n) (splitmix64's finaliser): uniform enough for a Bernoulli draw and
// the same on every platform, unlike std:: distributions.
std::uint64_t mix(std::uint64_t seed, std::uint64_t n) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ULL + n + 0x632BE59BD9B4E5A9ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

RowSelector::RowSelector(std::vector<RowStep> steps)
    : steps_(std::move(steps)), seen_(steps_.size(), 0) {}

bool RowSelector::keep() {
  if (done_) return false;
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    const RowStep& st = steps_[i];
    const std::uint64_t n = seen_[i]++;
    bool pass = true;
    switch (st.kind) {
      case RowStep::Kind::Take:
        pass = n < st.count;
        // Full: nothing later passes this step, so no later row is kept.
        if (pass && n + 1 == st.count) done_ = true;
        if (!pass) done_ = true;
        break;
      case RowStep::Kind::Skip:
        pass = n >= st.count;
        break;
      case RowStep::Kind::Sample:
        // The top 53 bits as a fraction in [0, 1).
        pass = static_cast<double>(mix(st.seed, n) >> 11) * 0x1.0p-53 < st.probability;
        break;
    }
    if (!pass) return false;
  }
  return true;
}

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
