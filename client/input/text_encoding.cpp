// Declared encodings to UTF-8 with iconv(3). See text_encoding.hpp.
#include "client/input/text_encoding.hpp"

#include <fmt/format.h>
#include <iconv.h>

#include <cerrno>

#include "fanout/util/error.hpp"

namespace fanout::client {

namespace {

// iconv's name for an MLTable encoding; "" for one fanout does not convert.
const char* iconv_name(const std::string& encoding) {
  if (encoding == "utf8" || encoding == "utf8bom") return "UTF-8";
  if (encoding == "ascii") return "ASCII";
  if (encoding == "latin1" || encoding == "iso88591") return "ISO-8859-1";
  if (encoding == "windows1252") return "WINDOWS-1252";
  return "";
}

}  // namespace

ToUtf8::ToUtf8(const std::string& encoding) : encoding_(encoding) {
  const char* from = iconv_name(encoding);
  iconv_t cd = *from != '\0' ? ::iconv_open("UTF-8", from) : reinterpret_cast<iconv_t>(-1);
  if (cd == reinterpret_cast<iconv_t>(-1)) {
    throw Failure(ErrorCode::InvalidArgument,
                  fmt::format("encoding {}: cannot be converted to UTF-8 here", encoding));
  }
  cd_ = cd;
}

ToUtf8::~ToUtf8() { ::iconv_close(static_cast<iconv_t>(cd_)); }

Expected<std::string> ToUtf8::operator()(std::string_view s) {
  auto* cd = static_cast<iconv_t>(cd_);
  ::iconv(cd, nullptr, nullptr, nullptr, nullptr);  // a fresh shift state
  std::string out(s.size() * 3 + 4, '\0');          // a byte becomes at most 3 UTF-8 bytes (BMP)
  char* in = const_cast<char*>(s.data());           // iconv's signature; the input is not written
  std::size_t in_left = s.size();
  char* dst = out.data();
  std::size_t out_left = out.size();
  while (in_left > 0) {
    if (::iconv(cd, &in, &in_left, &dst, &out_left) != static_cast<std::size_t>(-1)) break;
    if (errno == E2BIG) {  // not for the single-byte encodings; grow for any other
      const std::size_t used = out.size() - out_left;
      out.resize(out.size() * 2);
      dst = out.data() + used;
      out_left = out.size() - used;
      continue;
    }
    // EILSEQ: a byte the encoding does not define; EINVAL: a sequence cut short at the end.
    const std::size_t at = s.size() - in_left;
    return make_error(ErrorCode::InvalidArgument,
                      fmt::format("byte 0x{:02X} at byte {} is not valid {}",
                                  static_cast<unsigned char>(s[at]), at + 1, encoding_));
  }
  out.resize(out.size() - out_left);
  return out;
}

}  // namespace fanout::client
