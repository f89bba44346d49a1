// libFuzzer target for the frame decoder: whatever bytes a peer sends, read_header()
// and decode<M>() return a value or an Error and never crash, hang or allocate without bound;
// and whatever they accept re-encodes to a frame that decodes again. The hot messages' direct
// decoders give what the generic path gives. Built and run by
// tools/fuzz_codec.sh (meson test suite `fuzz`).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fanout/protocol/codec.hpp"

namespace {

namespace proto = fanout::proto;

template <typename M>
void check(std::string_view frame) {
  auto m = proto::decode<M>(frame);
  if constexpr (proto::detail::FastDecoded<M>) {
    // The direct decoder and the generic path agree on every frame: the same value, or the
    // same error.
    if (frame.size() >= proto::kHeaderBytes) {
      auto g = proto::detail::decode_generic<M>(frame.substr(proto::kHeaderBytes));
      if (m.has_value() != g.has_value() && proto::read_header(frame)) __builtin_trap();
      if (m && g && proto::encode(*m) != proto::encode(*g)) __builtin_trap();
      if (!m && !g && proto::read_header(frame) && m.error().message != g.error().message) {
        __builtin_trap();
      }
    }
  }
  if (!m) {
    // Every refusal names something: an empty message would tell a reader nothing.
    if (m.error().message.empty()) __builtin_trap();
    return;
  }
  const std::string again = proto::encode(*m);
  auto m2 = proto::decode<M>(again);
  if (!m2 || proto::encode(*m2) != again) __builtin_trap();
}

// Decodes `frame` as the message its header names.
void decode_as_named(std::string_view frame) {
  auto h = proto::read_header(frame);
  if (!h) return;
  switch (h->type) {
    case proto::MsgType::Register:
      return check<proto::Register>(frame);
    case proto::MsgType::Registered:
      return check<proto::Registered>(frame);
    case proto::MsgType::Reject:
      return check<proto::Reject>(frame);
    case proto::MsgType::Heartbeat:
      return check<proto::Heartbeat>(frame);
    case proto::MsgType::TaskBatch:
      return check<proto::TaskBatch>(frame);
    case proto::MsgType::ResultBatch:
      return check<proto::ResultBatch>(frame);
    case proto::MsgType::Drain:
      return check<proto::Drain>(frame);
    case proto::MsgType::Shutdown:
      return check<proto::Shutdown>(frame);
    case proto::MsgType::JobInfo:
      return check<proto::JobInfo>(frame);
    case proto::MsgType::SubmitJob:
      return check<proto::SubmitJob>(frame);
    case proto::MsgType::JobAccepted:
      return check<proto::JobAccepted>(frame);
    case proto::MsgType::SubmitTasks:
      return check<proto::SubmitTasks>(frame);
    case proto::MsgType::SubmitEnd:
      return check<proto::SubmitEnd>(frame);
    case proto::MsgType::JobProgress:
      return check<proto::JobProgress>(frame);
    case proto::MsgType::JobEnded:
      return check<proto::JobEnded>(frame);
    case proto::MsgType::Attach:
      return check<proto::Attach>(frame);
    case proto::MsgType::CancelJob:
      return check<proto::CancelJob>(frame);
    case proto::MsgType::DropJob:
      return check<proto::DropJob>(frame);
    case proto::MsgType::PoolLeaving:
      return check<proto::PoolLeaving>(frame);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  // The bytes as a whole frame, header included (mostly refused by the header check).
  decode_as_named(raw);
  // The bytes as the body of each message type in turn, the first byte choosing it, so the
  // fuzzer spends its time in the msgpack decoder rather than on the two header bytes.
  if (size >= 1) {
    std::string frame;
    frame.push_back(static_cast<char>(proto::kProtocolVersion));
    frame.push_back(static_cast<char>(1 + data[0] % 18));
    frame.append(raw.substr(1));
    decode_as_named(frame);
  }
  return 0;
}
