// How the store encodes what it keeps as blobs and text: msgpack for the job spec and a
// mini-batch's items (internal, may change encoding), and the default mini-batch detail.
// Private to the store: shared by the writer and recovery.
#pragma once

#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/protocol/messages.hpp"
#include "fanout/util/json.hpp"

namespace fanout::store::detail {

// Replaces the contents of `buf` with `v` packed.
template <typename T>
void pack_into(msgpack::sbuffer& buf, const T& v) {
  buf.clear();
  msgpack::pack(buf, v);
}

// Decodes msgpack `bytes` into `out`; false when they do not hold a T.
template <typename T>
bool unpack_from(std::string_view bytes, T& out) {
  try {
    msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
    oh.get().convert(out);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Appends the detail recorded when the client sent none: {"files": [...items...]}.
inline void append_default_detail(std::string& out, const std::vector<std::string>& items) {
  out += "{\"files\": [";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    json_quote(out, items[i]);
  }
  out += "]}";
}

}  // namespace fanout::store::detail
