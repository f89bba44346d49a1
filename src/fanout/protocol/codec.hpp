// Frame encoding: [u8 version][u8 type][msgpack body] in one ZeroMQ message part.
// decode() never throws: every failure is an Error naming the message type and what was wrong.
// See docs/protocol.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "fanout/protocol/messages.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::proto {

struct Header {
  std::uint8_t version = 0;
  MsgType type{};
};

inline constexpr std::size_t kHeaderBytes = 2;

// The name of a message type ("TaskBatch"), or "unknown(N)".
std::string type_name(std::uint8_t type);

// Reads and checks the header. Errors: Protocol (too short, too large, unknown type),
// Version (another protocol version; the type is not checked then).
[[nodiscard]] Expected<Header> read_header(std::string_view frame);

namespace detail {
// Appends msgpack bytes of `obj` after a header. Implemented with msgpack's packer.
class FrameWriter {
 public:
  explicit FrameWriter(MsgType type, std::size_t reserve = 64) {
    buf_.reserve(reserve);
    buf_.push_back(static_cast<char>(kProtocolVersion));
    buf_.push_back(static_cast<char>(type));
  }
  void write(const char* data, std::size_t n) { buf_.append(data, n); }
  std::string take() { return std::move(buf_); }

 private:
  std::string buf_;
};
// Unpacks `body` (the frame after its header) into `obj`. Before anything is allocated, the
// elements the body declares (array items, map keys and values, at every depth) are counted
// without unpacking; more than `max_elements` is refused, since each costs a msgpack object of
// 24 bytes however small its bytes (100 MB of nils would take 2.4 GB). Containers are also
// limited to the body's size, so a short frame cannot claim a huge array. Returns a message
// naming `what` on failure.
[[nodiscard]] Expected<void> unpack_into(std::string_view body, const char* what,
                                         std::size_t max_elements,
                                         const std::function<void(const msgpack::object&)>& conv);

// The hot messages' direct decoders (codec.cpp): true when `body` is in the shape the
// pipeline's encoders write, with `m` then holding what the generic path would give; false for
// anything else, which decode() then hands to the generic path (unpack_into) to decode or to
// name the error. `m` is left partly filled on false.
[[nodiscard]] bool fast_decode(std::string_view body, std::size_t max_elements, SubmitTasks& m);
[[nodiscard]] bool fast_decode(std::string_view body, std::size_t max_elements, TaskBatch& m);
[[nodiscard]] bool fast_decode(std::string_view body, std::size_t max_elements, ResultBatch& m);
template <typename M>
concept FastDecoded = requires(std::string_view body, M& m) {
  fast_decode(body, 0, m);
};
}  // namespace detail

// The most msgpack elements a frame of type M may hold, matched to the real messages: the
// control messages hold a few dozen; JobInfo and SubmitJob carry a job's arguments and
// environment; ResultBatch up to a pool's capacity of results (19 fields each), a Heartbeat the
// ids of the tasks a pool holds, and a ResourceSample its node's processes and disks; SubmitTasks
// and TaskBatch carry mini-batches, whose items (files, or one per row of tabular input) are the
// one count a user sets: at most kMaxBatchElements in one frame. docs/protocol.md ("Limits").
inline constexpr std::size_t kMaxControlElements = 4096;
inline constexpr std::size_t kMaxSpecElements = 1u << 20;
inline constexpr std::size_t kMaxBatchElements = 8u << 20;
constexpr std::size_t max_elements(MsgType type) noexcept {
  switch (type) {
    case MsgType::SubmitTasks:
    case MsgType::TaskBatch:
      return kMaxBatchElements;
    case MsgType::JobInfo:
    case MsgType::SubmitJob:
    case MsgType::ResultBatch:
    case MsgType::Heartbeat:
    case MsgType::ResourceSample:
      return kMaxSpecElements;
    default:
      return kMaxControlElements;
  }
}

namespace detail {
// Decodes a body through msgpack objects: any shape msgpack-cxx converts to an M.
template <typename M>
[[nodiscard]] Expected<M> decode_generic(std::string_view body) {
  M m{};
  auto r = unpack_into(body, type_name(static_cast<std::uint8_t>(M::kType)).c_str(),
                       max_elements(M::kType), [&](const msgpack::object& o) { o.convert(m); });
  if (!r) return Unexpected{r.error()};
  return m;
}
}  // namespace detail

// Encodes `m` into one frame.
template <typename M>
std::string encode(const M& m, std::size_t reserve = 64) {
  detail::FrameWriter w(M::kType, reserve);
  msgpack::pack(w, m);
  return w.take();
}

// Decodes a frame that must hold an M. Checks header (version, type) before the body.
template <typename M>
[[nodiscard]] Expected<M> decode(std::string_view frame) {
  auto h = read_header(frame);
  if (!h) return Unexpected{h.error()};
  if (h->type != M::kType) {
    return make_error(ErrorCode::Protocol,
                      "frame: expected " + type_name(static_cast<std::uint8_t>(M::kType)) +
                          ", found " + type_name(static_cast<std::uint8_t>(h->type)));
  }
  const std::string_view body = frame.substr(kHeaderBytes);
  if constexpr (detail::FastDecoded<M>) {
    M m{};
    if (detail::fast_decode(body, max_elements(M::kType), m)) return m;
  }
  return detail::decode_generic<M>(body);
}

}  // namespace fanout::proto
