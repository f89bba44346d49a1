// Tests for config's located-YAML helper (detail/located_yaml.hpp): values it accepts, and near
// misses it rejects with Error{InvalidArgument} naming the file, the line and the key.
#include "fanout/config/detail/located_yaml.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

using fanout::ErrorCode;
using fanout::Expected;
using namespace fanout::config::detail;

namespace {

constexpr const char* kFile = "dir/t.yaml";

// What the small schema below reads.
struct Values {
  std::int64_t n = 0;
  bool flag = false;
  std::string path{};
  std::string name{};
  std::string k{};
};

// A schema using each kind of check: n (integer 1..10), flag, path (against /base), name, and a
// `sub` mapping with one key k.
Expected<Values> read(const std::string& text) {
  return read_yaml(kFile, [&] {
    YamlReader r(kFile);
    const Fields top = r.fields(r.root(load_yaml(text, kFile, true), "a mapping of test keys"),
                                {"n", "flag", "path", "name", "sub"});
    Values v;
    if (const Entry* e = top.get("n")) v.n = r.integer(*e, 1, 10);
    if (const Entry* e = top.get("flag")) v.flag = r.boolean(*e);
    if (const Entry* e = top.get("path")) v.path = r.local_path(*e, "/base");
    if (const Entry* e = top.get("name")) v.name = r.text(*e, "a name");
    if (const Entry* e = top.get("sub")) {
      const Fields sub = r.fields(*e, {"k"});
      if (const Entry* k = sub.get("k")) v.k = r.text(*k);
    }
    return v;
  });
}

}  // namespace

TEST_CASE("config.located_yaml.accepts") {
  struct Case {
    const char* text;
    Values want;
  };
  const std::vector<Case> cases = {
      {"n: 3\n", {.n = 3}},
      {"n: 2.0\n", {.n = 2}},
      {"n: 1e1\n", {.n = 10}},
      {"# a comment\nn: ' 7 '\n", {.n = 7}},
      {"flag: Yes\n", {.flag = true}},
      {"flag: ON\n", {.flag = true}},
      {"flag: off\n", {.flag = false}},
      {"path: ./a/../b\n", {.path = "/base/b"}},
      {"path: file:///abs/x\n", {.path = "/abs/x"}},
      {"path: /abs/y\n", {.path = "/abs/y"}},
      {"name: \"two words\"\n", {.name = "two words"}},
      {"sub:\n", {}},
      {"sub: {k: v}\n", {.k = "v"}},
      {"{}\n", {}},
  };
  for (const auto& c : cases) {
    const std::string text = c.text;
    CAPTURE(text);
    auto v = read(text);
    REQUIRE_MESSAGE(v.has_value(), v.error().message);
    CHECK(v->n == c.want.n);
    CHECK(v->flag == c.want.flag);
    CHECK(v->path == c.want.path);
    CHECK(v->name == c.want.name);
    CHECK(v->k == c.want.k);
  }
}

TEST_CASE("config.located_yaml.rejects_near_misses") {
  struct Case {
    const char* text;
    int line;
    const char* key;   // "" when the message names no key
    const char* what;  // part of the message after the key
  };
  const std::vector<Case> cases = {
      {"n: 11\n", 1, "n", "expected an integer <= 10 (got 11)"},
      {"n: 0\n", 1, "n", "expected an integer >= 1 (got 0)"},
      {"n: 2.5\n", 1, "n", "expected an integer from 1 to 10 (got \"2.5\")"},
      {"n: [1]\n", 1, "n", "expected an integer from 1 to 10 (got a list)"},
      {"nn: 1\n", 1, "nn", "unknown key (did you mean n?)"},
      {"x: 1\nsomething: 2\n", 1, "x", "unknown key"},
      {"n: 1\nname: a\nn: 2\n", 3, "n", "duplicate key (first at line 1)"},
      {"flag: maybe\n", 1, "flag", "expected true or false (got \"maybe\")"},
      {"flag: {a: 1}\n", 1, "flag", "expected true or false (got a mapping)"},
      {"path: azureml:data:1\n", 1, "path",
       "expected a local path; Azure ML assets and datastores are not local"},
      {"path: https://x/y\n", 1, "path",
       "expected a local path; remote URIs are not read (got \"https://x/y\")"},
      {"path: '  '\n", 1, "path", "expected a local path (got nothing)"},
      {"name: a\npath:\n", 2, "path", "expected a local path (got nothing)"},
      {"name:\n  - a\n", 2, "name", "expected a name (got a list)"},
      {"sub: 3\n", 1, "sub", "expected a mapping (got \"3\")"},
      {"sub:\n  kk: 1\n", 2, "sub.kk", "unknown key (did you mean k?)"},
      {"sub:\n  ? [a]\n  : 1\n", 2, "sub", "expected a plain key (got a list)"},
      {"[1, 2]\n", 1, "", "expected a mapping of test keys (got a list)"},
      {"", 0, "", "expected a mapping of test keys (got nothing)"},
      {"n: 1\n---\nn: 2\n", 3, "", "expected one YAML document (got 2)"},
      {"n: 1\nname: [a\n", 3, "", "YAML syntax error: "},
  };
  for (const auto& c : cases) {
    const std::string text = c.text;
    CAPTURE(text);
    auto v = read(text);
    REQUIRE(!v.has_value());
    CHECK(v.error().code == ErrorCode::InvalidArgument);
    const std::string& m = v.error().message;
    CAPTURE(m);
    std::string head = kFile;
    if (c.line > 0) head += ":" + std::to_string(c.line);
    head += ": ";
    if (*c.key != '\0') head += std::string(c.key) + ": ";
    CHECK(m.rfind(head + c.what, 0) == 0);
  }
}

TEST_CASE("config.located_yaml.located_message_parts") {
  CHECK(located("f.yaml", {"a.b", 4}, "bad") == "f.yaml:4: a.b: bad");
  CHECK(located("f.yaml", {"a", 0}, "bad") == "f.yaml: a: bad");
  CHECK(located("f.yaml", {"", 2}, "bad") == "f.yaml:2: bad");
  CHECK_THROWS_AS(fail("f.yaml", {"k", 1}, "bad"), YamlError);
}

TEST_CASE("config.located_yaml.sole_ref") {
  CHECK(sole_ref("${{inputs.x}}") == std::optional<std::string>("inputs.x"));
  CHECK(sole_ref("  ${{ parent.jobs.a.outputs.b }} ") ==
        std::optional<std::string>("parent.jobs.a.outputs.b"));
  CHECK(!sole_ref("${{inputs.x}}/sub").has_value());
  CHECK(!sole_ref("x ${{inputs.x}}").has_value());
  CHECK(!sole_ref("${{a}} ${{b}}").has_value());
  CHECK(!sole_ref("${{a}}}}").has_value());
  CHECK(!sole_ref("${{}").has_value());
  CHECK(!sole_ref("plain").has_value());
}

TEST_CASE("config.located_yaml.quote_and_describe") {
  CHECK(quote("a\"b\\c\nd\te") == "\"a\\\"b\\\\c\\nd\\te\"");
  CHECK(quote(std::string(81, 'x')) == "\"" + std::string(80, 'x') + "...\"");
  CHECK(quote_whole(std::string(81, 'x')) == "\"" + std::string(81, 'x') + "\"");
  CHECK(quote_whole("a\"b") == "\"a\\\"b\"");
  CHECK(describe(YAML::Node()) == "nothing");
  CHECK(describe(YAML::Load("~")) == "nothing");
  CHECK(describe(YAML::Load("abc")) == "\"abc\"");
  CHECK(describe(YAML::Load("[1]")) == "a list");
  CHECK(describe(YAML::Load("{a: 1}")) == "a mapping");
  CHECK(trim(" \t a b \n") == "a b");
}
