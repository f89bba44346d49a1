// Declared encodings to UTF-8 with iconv(3) (client/input/text_encoding.hpp): windows1252 is not
// latin1, and a byte an encoding does not define is an error, never dropped.
#include "client/input/text_encoding.hpp"

#include <doctest/doctest.h>

#include <string>

#include "fanout/util/error.hpp"

using fanout::client::ToUtf8;

TEST_CASE("client.text_encoding.windows1252_is_not_latin1") {
  ToUtf8 cp1252("windows1252");
  auto euro = cp1252("price \x80 5");
  REQUIRE(euro.has_value());
  CHECK(*euro == "price \xE2\x82\xAC 5");  // U+20AC, not U+0080
  ToUtf8 latin1("latin1");
  auto c1 = latin1("\x80\xE9");
  REQUIRE(c1.has_value());
  CHECK(*c1 == "\xC2\x80\xC3\xA9");
  ToUtf8 utf8("utf8");
  CHECK(*utf8("caf\xC3\xA9") == "caf\xC3\xA9");
  CHECK(*ToUtf8("ascii")("plain") == "plain");
}

TEST_CASE("client.text_encoding.undefined_bytes_are_located_errors") {
  ToUtf8 cp1252("windows1252");
  auto bad = cp1252("ab\x81");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message == "byte 0x81 at byte 3 is not valid windows1252");
  CHECK(*cp1252("ok \x80") == "ok \xE2\x82\xAC");  // usable again after an error
  auto ascii = ToUtf8("ascii")("x\xC3");
  REQUIRE_FALSE(ascii.has_value());
  CHECK(ascii.error().message == "byte 0xC3 at byte 2 is not valid ascii");
  auto cut = ToUtf8("utf8")("ok\xC3");  // a sequence cut short
  REQUIRE_FALSE(cut.has_value());
  CHECK(cut.error().message == "byte 0xC3 at byte 3 is not valid utf8");
}

TEST_CASE("client.text_encoding.unsupported_encoding_is_refused") {
  CHECK_THROWS_AS(ToUtf8("utf16"), fanout::Failure);
  CHECK_THROWS_AS(ToUtf8("ebcdic"), fanout::Failure);
}
