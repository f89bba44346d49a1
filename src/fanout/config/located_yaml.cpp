// Located YAML reading for config/'s readers. See detail/located_yaml.hpp.
#include "fanout/config/detail/located_yaml.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>
#include <utility>

#include "fanout/util/fs.hpp"
#include "fanout/util/spelling.hpp"

namespace fanout::config::detail {
namespace {

constexpr std::int64_t kMaxU32 = std::numeric_limits<std::uint32_t>::max();

std::string with_line(const std::string& file, int mark_line) {
  return mark_line >= 0 ? file + ":" + std::to_string(mark_line + 1) : file;
}

// `s` quoted and escaped, cut at `max` characters.
std::string quote_at_most(std::string_view s, std::size_t max) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size() && i < max; ++i) {
    char c = s[i];
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  if (s.size() > max) out += "...";
  out += '"';
  return out;
}

}  // namespace

std::string located(std::string_view file, const Where& w, std::string_view what) {
  std::string msg(file);
  if (w.line > 0) {
    // Appended in two steps: GCC 12 at -O3 reports `":" + std::to_string(...)` as a
    // -Wrestrict overlap that cannot happen (a known false positive).
    msg += ':';
    msg += std::to_string(w.line);
  }
  msg += ": ";
  if (!w.key.empty()) msg += w.key + ": ";
  msg += what;
  return msg;
}

void fail(std::string_view file, const Where& w, std::string_view what) {
  throw YamlError{located(file, w, what)};
}

int line_of(const YAML::Node& n) {
  if (!n.IsDefined()) return 0;
  const YAML::Mark m = n.Mark();
  return m.line >= 0 ? m.line + 1 : 0;
}

std::string describe(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "nothing";
  if (n.IsScalar()) return quote(n.Scalar());
  if (n.IsSequence()) return "a list";
  return "a mapping";
}

std::string quote(std::string_view s) { return quote_at_most(s, 80); }

std::string quote_whole(std::string_view s) { return quote_at_most(s, s.size()); }

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::optional<std::string> sole_ref(std::string_view s) {
  s = trim(s);
  if (!s.starts_with("${{") || !s.ends_with("}}") || s.size() < 5) return std::nullopt;
  std::string_view inner = s.substr(3, s.size() - 5);
  // A second reference, or text between two, makes it not one reference.
  if (inner.find("}}") != std::string_view::npos) return std::nullopt;
  if (inner.find("${{") != std::string_view::npos) return std::nullopt;
  return std::string(trim(inner));
}

YAML::Node load_yaml(const std::string& text, const std::string& file, bool one_document) {
  try {
    if (!one_document) return YAML::Load(text);
    std::vector<YAML::Node> docs = YAML::LoadAll(text);
    if (docs.size() > 1) {
      fail(file, {"", line_of(docs[1])},
           "expected one YAML document (got " + std::to_string(docs.size()) + ")");
    }
    return docs.empty() ? YAML::Node() : docs.front();
  } catch (const YAML::ParserException& e) {
    throw YamlError{with_line(file, e.mark.line) + ": YAML syntax error: " + e.msg};
  }
}

Error yaml_exception_error(const std::string& file, const YAML::Exception& e) {
  return Error{ErrorCode::InvalidArgument, with_line(file, e.mark.line) + ": " + e.msg};
}

int Entry::line() const {
  int l = is_null() ? 0 : line_of(value);
  return l > 0 ? l : line_of(key_node);
}

const Entry* Fields::get(std::string_view name) const {
  for (const auto& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

Where Fields::missing(std::string_view name) const {
  std::string key = self.key.empty() ? std::string(name) : self.key + "." + std::string(name);
  return {key, self.key.empty() ? line_of(self.value) : line_of(self.key_node)};
}

void YamlReader::fail(const Where& w, std::string_view what) const { detail::fail(file_, w, what); }

Entry YamlReader::root(const YAML::Node& doc, std::string_view what) const {
  if (!doc.IsDefined() || !doc.IsMap()) {
    fail({"", line_of(doc)}, "expected " + std::string(what) + " (got " + describe(doc) + ")");
  }
  return Entry{"", "", YAML::Node(), doc};
}

Fields YamlReader::collect(const Entry& parent) const {
  Fields f{parent, {}};
  // `task:` with nothing after it reads as an empty mapping; the checks on its keys follow.
  if (parent.is_null()) return f;
  if (!parent.value.IsMap()) {
    fail(parent.where(), "expected a mapping (got " + describe(parent.value) + ")");
  }
  for (const auto& kv : parent.value) {
    const YAML::Node k = kv.first;  // copies: yaml-cpp's iterator hands out temporaries
    if (!k.IsScalar()) {
      fail({parent.key, line_of(k)}, "expected a plain key (got " + describe(k) + ")");
    }
    Entry e{parent.key.empty() ? k.Scalar() : parent.key + "." + k.Scalar(), k.Scalar(), k,
            kv.second};
    // yaml-cpp keeps both copies of a repeated key; Azure ML would take one silently.
    if (const Entry* first = f.get(e.name)) {
      fail({e.key, line_of(k)},
           "duplicate key (first at line " + std::to_string(line_of(first->key_node)) + ")");
    }
    f.entries.push_back(std::move(e));
  }
  return f;
}

void YamlReader::reject_unknown(const Fields& f,
                                std::initializer_list<std::string_view> allowed) const {
  for (const auto& e : f.entries) {
    if (std::find(allowed.begin(), allowed.end(), e.name) != allowed.end()) continue;
    std::string what = "unknown key";
    // Suggest only near misses: up to two edits.
    const std::string_view best = nearest_word(e.name, {allowed.begin(), allowed.end()});
    if (!best.empty()) what += " (did you mean " + std::string(best) + "?)";
    fail({e.key, line_of(e.key_node)}, what);
  }
}

Fields YamlReader::fields(const Entry& parent,
                          std::initializer_list<std::string_view> allowed) const {
  Fields f = collect(parent);
  reject_unknown(f, allowed);
  return f;
}

std::string YamlReader::text(const Entry& e, std::string_view expect) const {
  if (!e.value.IsDefined() || !e.value.IsScalar()) {
    fail(e.where(), "expected " + std::string(expect) + " (got " + describe(e.value) + ")");
  }
  return e.value.Scalar();
}

std::string YamlReader::scalar(const YAML::Node& n, const std::string& key,
                               std::string_view expect) const {
  if (!n.IsDefined() || !n.IsScalar()) {
    fail({key, line_of(n)}, "expected " + std::string(expect) + " (got " + describe(n) + ")");
  }
  return n.Scalar();
}

std::int64_t YamlReader::integer(const Where& w, std::string_view s, std::int64_t lo,
                                 std::int64_t hi) const {
  auto v = to_int(s);
  if (!v) fail(w, "expected an integer " + int_range(lo, hi) + " (got " + quote(s) + ")");
  const std::string got = " (got " + std::string(trim(s)) + ")";
  if (*v < lo) fail(w, "expected an integer >= " + std::to_string(lo) + got);
  if (*v > hi) fail(w, "expected an integer <= " + std::to_string(hi) + got);
  return *v;
}

std::int64_t YamlReader::integer(const Entry& e, std::int64_t lo, std::int64_t hi) const {
  return integer(e.where(), text(e, "an integer " + int_range(lo, hi)), lo, hi);
}

bool YamlReader::boolean(const Where& w, std::string_view s) const {
  const std::string v = lower(trim(s));
  if (v == "true" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "no" || v == "off") return false;
  fail(w, "expected true or false (got " + quote(s) + ")");
}

bool YamlReader::boolean(const Entry& e) const {
  return boolean(e.where(), text(e, "true or false"));
}

bool YamlReader::boolean(const YAML::Node& n, const std::string& key) const {
  return boolean(Where{key, line_of(n)}, scalar(n, key, "true or false"));
}

std::string YamlReader::local_path(const Where& w, std::string_view s,
                                   const std::string& base) const {
  std::string_view p = trim(s);
  if (p.empty()) fail(w, "expected a local path (got nothing)");
  if (p.starts_with("azureml:")) {
    fail(w, "expected a local path; Azure ML assets and datastores are not local (got " + quote(p) +
                ")");
  }
  if (p.starts_with("file://")) {
    p.remove_prefix(7);
  } else if (auto scheme = p.find("://"); scheme != std::string_view::npos) {
    fail(w, "expected a local path; remote URIs are not read (got " + quote(p) + ")");
  }
  return resolve_path(base, std::string(p));
}

std::string YamlReader::local_path(const Entry& e, const std::string& base) const {
  return local_path(e.where(), text(e, "a local path"), base);
}

std::optional<double> to_double(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::int64_t> to_int(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && p == s.data() + s.size()) return v;
  // YAML floats that hold a whole number ("2.0", "1e3") are fine where an integer is expected.
  auto d = to_double(s);
  if (d && std::floor(*d) == *d && std::fabs(*d) < 9.0e18) return static_cast<std::int64_t>(*d);
  return std::nullopt;
}

std::string int_range(std::int64_t lo, std::int64_t hi) {
  return hi >= kMaxU32 ? ">= " + std::to_string(lo)
                       : "from " + std::to_string(lo) + " to " + std::to_string(hi);
}

}  // namespace fanout::config::detail
