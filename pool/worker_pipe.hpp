// The worker pipe's frames: the one definition of their kinds and layouts, and the helpers that
// write and read them. fanout-pool (pool/worker.cpp) and fanout-worker (pool/worker_host.cpp) use
// it; the Python shim (pool/python/fanout_worker.py) is checked against it by
// tests/python/test_worker_pipe_catalogue.py. docs/worker-pipe.md describes the frames.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "fanout/util/expected.hpp"

namespace fanout::pipe {

// The integers go over the pipe as they lie in memory.
static_assert(std::endian::native == std::endian::little,
              "the worker pipe is little-endian; append_le/read_le would need byte swaps");

// A frame's kind: one ASCII letter after its length. Wire values: never change or reuse one.
enum class FrameKind : char {
  Task = 'T',        // pool -> worker: run one mini-batch
  Quit = 'Q',        // pool -> worker: call shutdown() and exit
  Ready = 'R',       // worker -> pool: loaded; text "<pid> <version>"
  LoadError = 'L',   // worker -> pool: cannot serve; text "<Category>: <message>\n<traceback>"
  RunStarted = 'S',  // worker -> pool: run() starts (only with FANOUT_RUN_MARKERS=1)
  RunEnded = 'E',    // worker -> pool: run() returned or raised (likewise)
  Done = 'D',        // worker -> pool: the reply to one T frame
};

// The category a worker gives (as "<category>: <message>" in a D frame's error text) when a
// mini-batch's input changed after the client listed it; the interchange does not retry it.
// Equal to proto::kInputChangedCategory (pool/pool.cpp asserts it).
inline constexpr std::string_view kInputChangedCategory = "INPUT_CHANGED";

// The status byte of a D frame.
enum class DoneStatus : std::uint8_t {
  Ok = 0,         // run() returned a sequence; n_result = its length
  Raised = 1,     // run() raised, or the mini-batch could not be prepared or its rows built
  BadReturn = 2,  // run() returned None or something that is not a sequence
  // run() raised a BaseException that is not an Exception (SystemExit, KeyboardInterrupt): as
  // Raised, and the worker exits after this reply, so tasks written behind it never start.
  Exiting = 3,
};

// Every frame: u32 N (the bytes after this field, N >= 1), u8 kind, then N - 1 bytes of payload.
// The offsets below count from the first byte of the frame (its length field), as the tables of
// docs/worker-pipe.md do; a decoder given a payload (what follows the kind byte) subtracts
// kPayloadOffset.
inline constexpr std::size_t kLengthBytes = 4;
inline constexpr std::size_t kKindOffset = 4;
inline constexpr std::size_t kPayloadOffset = 5;
// Longest N the pool accepts from a worker (the host's rows stop at 256 MiB; the shim answers
// longer rows with ResultTooLarge, status 1).
inline constexpr std::uint32_t kMaxReplyLength = 512u * 1024u * 1024u;

// T: u64 task_id, u64 minibatch_index, u32 detail_len, u32 n_items; then detail_len bytes of
// detail (JSON, or nothing), then the items joined by '\0' (no trailing '\0').
struct TaskLayout {
  static constexpr std::size_t kTaskId = 5;        // u64, echoed in S, E and D
  static constexpr std::size_t kIndex = 13;        // u64 minibatch_index
  static constexpr std::size_t kDetailLen = 21;    // u32
  static constexpr std::size_t kItemCount = 25;    // u32 n_items
  static constexpr std::size_t kHeaderBytes = 29;  // the detail starts here
};

// D: u64 task_id, u8 status, u64 n_result, u64 out_len, f64 run_seconds, f64 cpu_seconds; then
// out_len bytes of rows, then the error text (the rest).
struct DoneLayout {
  static constexpr std::size_t kTaskId = 5;        // u64
  static constexpr std::size_t kStatus = 13;       // u8 DoneStatus
  static constexpr std::size_t kResultCount = 14;  // u64 n_result
  static constexpr std::size_t kOutputLen = 22;    // u64 out_len
  static constexpr std::size_t kRunSeconds = 30;   // f64
  static constexpr std::size_t kCpuSeconds = 38;   // f64
  static constexpr std::size_t kHeaderBytes = 46;  // the rows start here
};

// S and E: u64 task_id, nothing else.
struct MarkerLayout {
  static constexpr std::size_t kTaskId = 5;       // u64
  static constexpr std::size_t kFrameBytes = 13;  // so N = 9
};

// Each field starts where the one before it ends.
static_assert(TaskLayout::kTaskId == kPayloadOffset &&
              TaskLayout::kIndex == TaskLayout::kTaskId + 8 &&
              TaskLayout::kDetailLen == TaskLayout::kIndex + 8 &&
              TaskLayout::kItemCount == TaskLayout::kDetailLen + 4 &&
              TaskLayout::kHeaderBytes == TaskLayout::kItemCount + 4);
static_assert(DoneLayout::kTaskId == kPayloadOffset &&
              DoneLayout::kStatus == DoneLayout::kTaskId + 8 &&
              DoneLayout::kResultCount == DoneLayout::kStatus + 1 &&
              DoneLayout::kOutputLen == DoneLayout::kResultCount + 8 &&
              DoneLayout::kRunSeconds == DoneLayout::kOutputLen + 8 &&
              DoneLayout::kCpuSeconds == DoneLayout::kRunSeconds + 8 &&
              DoneLayout::kHeaderBytes == DoneLayout::kCpuSeconds + 8);
static_assert(MarkerLayout::kTaskId == kPayloadOffset &&
              MarkerLayout::kFrameBytes == MarkerLayout::kTaskId + 8);

// Appends `v` as its little-endian bytes.
template <typename T>
void append_le(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

// Writes `v` as its little-endian bytes over the sizeof(T) bytes at `p`.
template <typename T>
void write_le(char* p, T v) noexcept {
  std::memcpy(p, &v, sizeof(T));
}

// Reads a T from the sizeof(T) bytes at `p`. The caller checked they are there.
template <typename T>
[[nodiscard]] T read_le(const char* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// ---------------------------------------------------------------- writing

// Bytes of the T frame of a task with `detail_bytes` of detail and these items.
[[nodiscard]] inline std::size_t task_frame_bytes(std::size_t detail_bytes,
                                                  std::span<const std::string> items) noexcept {
  std::size_t n = TaskLayout::kHeaderBytes + detail_bytes;
  for (const auto& it : items) n += it.size() + 1;
  return n - (items.empty() ? 0 : 1);
}

// Appends the T frame of a task to `out`. The items must not hold '\0'.
inline void append_task(std::string& out, std::uint64_t task_id, std::uint64_t index,
                        std::string_view detail, std::span<const std::string> items) {
  const std::size_t at = out.size();
  out.reserve(at + task_frame_bytes(detail.size(), items));
  append_le<std::uint32_t>(out, 0);  // the length, patched below
  out.push_back(static_cast<char>(FrameKind::Task));
  append_le<std::uint64_t>(out, task_id);
  append_le<std::uint64_t>(out, index);
  append_le<std::uint32_t>(out, static_cast<std::uint32_t>(detail.size()));
  append_le<std::uint32_t>(out, static_cast<std::uint32_t>(items.size()));
  out += detail;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out.push_back('\0');
    out += items[i];
  }
  const auto len = static_cast<std::uint32_t>(out.size() - at - kLengthBytes);
  std::memcpy(out.data() + at, &len, kLengthBytes);
}

// Appends a frame of `kind` whose payload is `payload` (Q: empty; R and L: their text).
inline void append_frame(std::string& out, FrameKind kind, std::string_view payload) {
  append_le<std::uint32_t>(out, static_cast<std::uint32_t>(payload.size() + 1));
  out.push_back(static_cast<char>(kind));
  out += payload;
}

// Appends an S or E frame.
inline void append_marker(std::string& out, FrameKind kind, std::uint64_t task_id) {
  append_le<std::uint32_t>(out, MarkerLayout::kFrameBytes - kLengthBytes);
  out.push_back(static_cast<char>(kind));
  append_le<std::uint64_t>(out, task_id);
}

// The fixed fields of a D frame.
struct DoneHead {
  std::uint64_t task_id = 0;
  DoneStatus status = DoneStatus::Ok;
  std::uint64_t n_result = 0;
  double run_s = 0;
  double cpu_s = 0;
};

// Appends a D frame. The caller keeps `output` and `error` small enough for a u32 length.
inline void append_done(std::string& out, const DoneHead& head, std::string_view output,
                        std::string_view error) {
  const std::size_t n = DoneLayout::kHeaderBytes - kLengthBytes + output.size() + error.size();
  append_le<std::uint32_t>(out, static_cast<std::uint32_t>(n));
  out.push_back(static_cast<char>(FrameKind::Done));
  append_le<std::uint64_t>(out, head.task_id);
  out.push_back(static_cast<char>(head.status));
  append_le<std::uint64_t>(out, head.n_result);
  append_le<std::uint64_t>(out, output.size());
  append_le<double>(out, head.run_s);
  append_le<double>(out, head.cpu_s);
  out += output;
  out += error;
}

// ---------------------------------------------------------------- reading

// The first frame of a buffer, cut without copying.
struct Cut {
  enum class Status : std::uint8_t {
    Frame,      // kind and payload are set; the frame takes frame_bytes() of the buffer
    Partial,    // the buffer does not hold the whole frame yet: read more
    BadLength,  // N is 0 or above the limit (length holds it): nothing after it can be framed
  };
  Status status = Status::Partial;
  std::uint32_t length = 0;  // N
  FrameKind kind{};          // any byte: the caller refuses kinds it does not expect
  std::string_view payload{};
  [[nodiscard]] std::size_t frame_bytes() const noexcept { return kLengthBytes + length; }
};

// Cuts the frame at the start of `buf`; `max_length` bounds N.
[[nodiscard]] inline Cut cut_frame(std::string_view buf, std::uint32_t max_length) noexcept {
  Cut c;
  if (buf.size() < kLengthBytes) return c;
  c.length = read_le<std::uint32_t>(buf.data());
  if (c.length == 0 || c.length > max_length) {
    c.status = Cut::Status::BadLength;
    return c;
  }
  if (buf.size() - kLengthBytes < c.length) return c;
  c.status = Cut::Status::Frame;
  c.kind = static_cast<FrameKind>(buf[kKindOffset]);
  c.payload = buf.substr(kPayloadOffset, c.length - 1);
  return c;
}

// A T frame's fields; the views point into the frame.
struct TaskView {
  std::uint64_t task_id = 0;
  std::uint64_t index = 0;
  std::uint32_t detail_len = 0;
  std::uint32_t n_items = 0;
  // False when detail_len runs past the frame: the task fails (ProtocolError) and the worker
  // keeps serving; `detail` and `items` are then empty.
  bool detail_fits = false;
  std::string_view detail{};
  std::string_view items{};  // joined by '\0'
};

// Decodes the payload of a T frame (what follows its kind byte). Error{Protocol} when it is
// shorter than the T header: the worker cannot even answer it.
[[nodiscard]] inline Expected<TaskView> decode_task(std::string_view payload) {
  constexpr std::size_t kHead = TaskLayout::kHeaderBytes - kPayloadOffset;
  if (payload.size() < kHead) {
    return make_error(ErrorCode::Protocol, "T frame: " + std::to_string(payload.size()) +
                                               " payload bytes, shorter than its " +
                                               std::to_string(kHead) + "-byte header");
  }
  const char* p = payload.data();
  TaskView t;
  t.task_id = read_le<std::uint64_t>(p + (TaskLayout::kTaskId - kPayloadOffset));
  t.index = read_le<std::uint64_t>(p + (TaskLayout::kIndex - kPayloadOffset));
  t.detail_len = read_le<std::uint32_t>(p + (TaskLayout::kDetailLen - kPayloadOffset));
  t.n_items = read_le<std::uint32_t>(p + (TaskLayout::kItemCount - kPayloadOffset));
  const std::size_t rest = payload.size() - kHead;
  if (t.detail_len <= rest) {
    t.detail_fits = true;
    t.detail = payload.substr(kHead, t.detail_len);
    t.items = payload.substr(kHead + t.detail_len);
  }
  return t;
}

// A D frame's fields; the views point into the frame.
struct DoneView {
  DoneHead head{};
  std::string_view output{};
  std::string_view error{};
};

// Decodes the payload of a D frame. Error{Protocol} when it is shorter than the D header or its
// out_len runs past it.
[[nodiscard]] inline Expected<DoneView> decode_done(std::string_view payload) {
  constexpr std::size_t kHead = DoneLayout::kHeaderBytes - kPayloadOffset;
  if (payload.size() < kHead) {
    return make_error(ErrorCode::Protocol, "D frame: " + std::to_string(payload.size()) +
                                               " payload bytes, shorter than its " +
                                               std::to_string(kHead) + "-byte header");
  }
  const char* p = payload.data();
  DoneView d;
  d.head.task_id = read_le<std::uint64_t>(p + (DoneLayout::kTaskId - kPayloadOffset));
  d.head.status = static_cast<DoneStatus>(p[DoneLayout::kStatus - kPayloadOffset]);
  d.head.n_result = read_le<std::uint64_t>(p + (DoneLayout::kResultCount - kPayloadOffset));
  const auto out_len = read_le<std::uint64_t>(p + (DoneLayout::kOutputLen - kPayloadOffset));
  d.head.run_s = read_le<double>(p + (DoneLayout::kRunSeconds - kPayloadOffset));
  d.head.cpu_s = read_le<double>(p + (DoneLayout::kCpuSeconds - kPayloadOffset));
  const std::size_t rest = payload.size() - kHead;
  if (out_len > rest) {
    return make_error(ErrorCode::Protocol, "D frame: out_len " + std::to_string(out_len) +
                                               " runs past the frame (" + std::to_string(rest) +
                                               " bytes left)");
  }
  d.output = payload.substr(kHead, out_len);
  d.error = payload.substr(kHead + out_len);
  return d;
}

// Decodes the payload of an S or E frame: its task id. Error{Protocol} unless it is 8 bytes.
[[nodiscard]] inline Expected<std::uint64_t> decode_marker(std::string_view payload) {
  constexpr std::size_t kSize = MarkerLayout::kFrameBytes - kPayloadOffset;
  if (payload.size() != kSize) {
    return make_error(ErrorCode::Protocol, "marker frame: " + std::to_string(payload.size()) +
                                               " payload bytes (expected " + std::to_string(kSize) +
                                               ")");
  }
  return read_le<std::uint64_t>(payload.data());
}

}  // namespace fanout::pipe
