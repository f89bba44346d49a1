// Private to config/: reading YAML so that every message says where, "file:line: key: what",
// as a user needs to fix a job file. The one helper and the one error type behind the job spec,
// pipeline and MLTable readers. It names yaml-cpp's types, so it is included by config/*.cpp and
// config's tests only.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/util/expected.hpp"

namespace fanout::config::detail {

// Where a message points: the dotted key and its 1-based line (0 when there is none).
struct Where {
  std::string key{};
  int line = 0;
};

// The first mistake found in a file, as its full message. Thrown only inside config/, so that a
// check deep in a tree ends the whole read in one step ("the first error wins"); read_yaml()
// turns it into Error{InvalidArgument}. config's only error type while reading.
struct YamlError {
  std::string message;
};

// "file:line: key: what"; the line is left out when 0 and the key when empty.
std::string located(std::string_view file, const Where& w, std::string_view what);

// Throws YamlError{located(file, w, what)}.
[[noreturn]] void fail(std::string_view file, const Where& w, std::string_view what);

// A node's 1-based line, or 0 when the node is undefined or has no mark.
int line_of(const YAML::Node& n);

// What a node is, for the "(got ...)" part of a message: nothing, "its text", a list, a mapping.
std::string describe(const YAML::Node& n);

// `s` in double quotes with quotes, backslashes, tabs and line breaks escaped; cut at 80
// characters, with "..." after.
std::string quote(std::string_view s);
// The same, never cut: for paths, which are no use shortened.
std::string quote_whole(std::string_view s);

// `s` without leading and trailing white space.
std::string_view trim(std::string_view s);
std::string lower(std::string_view s);
std::string upper(std::string_view s);
// "a, b, c".
std::string join(const std::vector<std::string>& v);

// What sits between `${{` and `}}` (spaces trimmed) when `s` is exactly one such reference, spaces
// around allowed; nullopt otherwise ("${{a}}/x", "${{a}} ${{b}}", plain text).
std::optional<std::string> sole_ref(std::string_view s);

// Parses `text` as YAML: a single document when `one_document`, else the first one. Throws
// YamlError naming `file` and the line for a syntax error ("YAML syntax error: ...") and, with
// one_document, for a second document.
YAML::Node load_yaml(const std::string& text, const std::string& file, bool one_document);

// Runs `read` and returns its value; a YamlError it throws, and any yaml-cpp exception, become
// Error{InvalidArgument} (a yaml-cpp one named by `file` and its line). Nothing escapes.
template <typename F>
auto read_yaml(const std::string& file, F&& read) -> Expected<decltype(read())>;

// One `key: value` pair of a mapping.
struct Entry {
  std::string key{};   // dotted from the root, for messages: "task.entry_script"
  std::string name{};  // the last part: "entry_script"
  YAML::Node key_node{};
  YAML::Node value{};

  [[nodiscard]] bool is_null() const { return !value.IsDefined() || value.IsNull(); }
  // The value's line; the key's when the value is null, since yaml-cpp marks a null value at
  // the token after it (often the next line).
  [[nodiscard]] int line() const;
  [[nodiscard]] Where where() const { return {key, line()}; }
};

// The entries of one mapping, in file order.
struct Fields {
  Entry self{};
  std::vector<Entry> entries{};

  // The entry named `name`, or nullptr.
  [[nodiscard]] const Entry* get(std::string_view name) const;
  // Where a missing key would go: the mapping's own key and line.
  [[nodiscard]] Where missing(std::string_view name) const;
};

// Reads one file: holds its name for messages and checks values against what is expected,
// failing (YamlError) with the file, the line and the key. Cheap to copy; no other state.
class YamlReader final {
 public:
  explicit YamlReader(std::string file) : file_(std::move(file)) {}

  [[nodiscard]] const std::string& file() const { return file_; }

  // Throws YamlError{located(file(), w, what)}.
  [[noreturn]] void fail(const Where& w, std::string_view what) const;

  // The root of a document as an Entry with an empty key; fails unless it is a mapping, saying
  // "expected <what> (got ...)".
  [[nodiscard]] Entry root(const YAML::Node& doc, std::string_view what) const;

  // The pairs of a mapping entry, keys checked to be plain scalars and not repeated. A null value
  // (`task:` with nothing after it) reads as an empty mapping; anything else fails.
  [[nodiscard]] Fields collect(const Entry& parent) const;
  // collect(), then reject_unknown().
  [[nodiscard]] Fields fields(const Entry& parent,
                              std::initializer_list<std::string_view> allowed) const;
  // Fails on the first key not in `allowed`: "unknown key (did you mean <nearest>?)" when one is
  // within two edits.
  void reject_unknown(const Fields& f, std::initializer_list<std::string_view> allowed) const;

  // The text of a scalar entry; `expect` says what was wanted when it is not one.
  [[nodiscard]] std::string text(const Entry& e, std::string_view expect = "a single value") const;
  // The same for a bare node named `key`, placed at the node's own line.
  [[nodiscard]] std::string scalar(const YAML::Node& n, const std::string& key,
                                   std::string_view expect) const;

  // An integer from lo to hi ("2.0" and "1e3" count); fails naming the range.
  [[nodiscard]] std::int64_t integer(const Where& w, std::string_view s, std::int64_t lo,
                                     std::int64_t hi) const;
  [[nodiscard]] std::int64_t integer(const Entry& e, std::int64_t lo, std::int64_t hi) const;
  // true/yes/on or false/no/off, any case (YAML 1.1's spellings, which Azure ML's reader takes).
  [[nodiscard]] bool boolean(const Where& w, std::string_view s) const;
  [[nodiscard]] bool boolean(const Entry& e) const;
  [[nodiscard]] bool boolean(const YAML::Node& n, const std::string& key) const;
  // A local path resolved against `base`: file:// is stripped; azureml: assets and other URIs
  // fail, saying they are not local.
  [[nodiscard]] std::string local_path(const Where& w, std::string_view s,
                                       const std::string& base) const;
  [[nodiscard]] std::string local_path(const Entry& e, const std::string& base) const;

 private:
  std::string file_;
};

// A number, whole or not, or nullopt ("", "x", "inf").
std::optional<double> to_double(std::string_view s);
// A whole number, also written as a float ("2.0", "1e3"), or nullopt.
std::optional<std::int64_t> to_int(std::string_view s);
// ">= 1" for open-ended ranges (hi at least UINT32_MAX), "from 0 to 100" otherwise.
std::string int_range(std::int64_t lo, std::int64_t hi);

// ---- implementation of the template ----

// A yaml-cpp exception as an Error naming `file` and its line.
Error yaml_exception_error(const std::string& file, const YAML::Exception& e);

template <typename F>
auto read_yaml(const std::string& file, F&& read) -> Expected<decltype(read())> {
  try {
    return read();
  } catch (const YamlError& e) {
    return make_error(ErrorCode::InvalidArgument, e.message);
  } catch (const YAML::Exception& e) {
    // Not expected after a successful load, but a yaml-cpp surprise must not escape.
    return Unexpected{yaml_exception_error(file, e)};
  }
}

}  // namespace fanout::config::detail
