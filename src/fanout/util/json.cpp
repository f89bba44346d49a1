// JSON string quoting.
#include "fanout/util/json.hpp"

namespace fanout {

namespace {

// The length of the valid UTF-8 sequence starting at s[i] (a byte >= 0x80), or 0 when the byte
// does not start one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF,
// or a sequence cut short).
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > s.size() || b(1) < lo || b(1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (b(k) < 0x80 || b(k) > 0xbf) return 0;
  }
  return n;
}

}  // namespace

void json_quote(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  // Copies runs of plain characters at once: most strings (paths, names) need no escaping, and
  // the store quotes every mini-batch's items with this.
  std::size_t run = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') continue;
    if (c >= 0x80) {
      // Valid UTF-8 passes through unchanged. A byte that is not (a file name in another
      // encoding) becomes the lone surrogate \udcNN, as Python's surrogateescape writes it: the
      // text stays valid UTF-8 (SQLite TEXT that every reader can decode), and
      // json.loads(...).encode("utf-8", "surrogateescape") gives back the exact bytes.
      if (const std::size_t n = utf8_length(s, i); n > 0) {
        i += n - 1;
        continue;
      }
      out.append(s.data() + run, i - run);
      run = i + 1;
      out += "\\udc";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
      continue;
    }
    out.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += "\\u00";
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xf]);
    }
  }
  out.append(s.data() + run, s.size() - run);
  out.push_back('"');
}

std::string json_quote(std::string_view s) {
  std::string out;
  json_quote(out, s);
  return out;
}

}  // namespace fanout
