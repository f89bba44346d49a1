// A table's declared encoding (MLTable read_delimited.encoding) converted to UTF-8 with iconv(3),
// so that column names and partition key values travel as the text the workers decode. See
// docs/mltable.md (encodings).
#pragma once

#include <string>
#include <string_view>

#include "fanout/util/expected.hpp"

namespace fanout::client {

// One conversion, reused (iconv_open is not cheap). Not thread-safe: one per thread.
class ToUtf8 final {
 public:
  // `encoding`: an MLTable name: utf8, utf8bom, ascii, latin1, iso88591, windows1252. Throws
  // Failure{InvalidArgument} for another name or one iconv cannot convert from.
  explicit ToUtf8(const std::string& encoding);
  ~ToUtf8();
  ToUtf8(const ToUtf8&) = delete;
  ToUtf8& operator=(const ToUtf8&) = delete;

  // `s` as UTF-8. Error{InvalidArgument} "byte 0xNN at byte N is not valid <encoding>" for a
  // byte (or a truncated sequence) the encoding does not define; the caller adds file and row.
  [[nodiscard]] Expected<std::string> operator()(std::string_view s);
  [[nodiscard]] const std::string& encoding() const noexcept { return encoding_; }

 private:
  std::string encoding_;
  void* cd_ = nullptr;  // iconv_t
};

}  // namespace fanout::client
