// Tests for JSON string quoting (util/json.hpp): escapes, valid UTF-8 kept as is, and bytes that
// are not UTF-8 written losslessly as \udcNN.
#include "fanout/util/json.hpp"

#include <doctest/doctest.h>

#include <string>

using fanout::json_quote;

TEST_CASE("util.json.quote_escapes_controls_and_keeps_utf8") {
  CHECK(json_quote("a\"b\\c\n\t\x01") == "\"a\\\"b\\\\c\\n\\t\\u0001\"");
  CHECK(json_quote("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") ==
        "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
}

// A file name in latin-1 once went into the store's TEXT columns as raw bytes, which Python's
// sqlite3 cannot decode: each byte that is not valid UTF-8 becomes \udcNN (surrogateescape).
TEST_CASE("util.json.quote_writes_bytes_that_are_not_utf8_as_surrogate_escapes") {
  CHECK(json_quote("caf\xe9.txt") == "\"caf\\udce9.txt\"");
  CHECK(json_quote("\xff\xfe") == "\"\\udcff\\udcfe\"");
  CHECK(json_quote("\xc3") == "\"\\udcc3\"");                        // cut short
  CHECK(json_quote("\xc0\xaf") == "\"\\udcc0\\udcaf\"");             // overlong
  CHECK(json_quote("\xed\xa0\x80") == "\"\\udced\\udca0\\udc80\"");  // a surrogate
  CHECK(json_quote("a\xe9\xc3\xa9") == "\"a\\udce9\xc3\xa9\"");  // valid UTF-8 after a stray byte
}
