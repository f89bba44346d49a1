// Frame encoding and decoding. See docs/protocol.md.
#include "fanout/protocol/codec.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace fanout::proto {

RejectCode reject_code(const Reject& m) noexcept {
  if (m.code > 0 && m.code <= static_cast<std::uint8_t>(RejectCode::ReopenRefused)) {
    return static_cast<RejectCode>(m.code);
  }
  if (m.code != 0) return RejectCode::Unspecified;
  // The prefixes an interchange from before the code field wrote; kept for those peers only.
  const std::string_view r = m.reason;
  if (r.rfind("SubmitJob: ", 0) == 0) return RejectCode::JobRefused;
  if (r.rfind("Attach:", 0) == 0) return RejectCode::UnknownJob;
  if (r.rfind("SubmitTasks:", 0) == 0) return RejectCode::JobNotRunning;
  if (r.rfind("Shutdown: deferred", 0) == 0) return RejectCode::ShutdownDeferred;
  return RejectCode::Unspecified;
}

const char* to_string(AttemptStatus s) noexcept {
  switch (s) {
    case AttemptStatus::RunDone:
      return "RUN_DONE";
    case AttemptStatus::RunException:
      return "RUN_EXCEPTION";
    case AttemptStatus::RunTimeout:
      return "RUN_TIMEOUT";
    case AttemptStatus::LoadException:
      return "LOAD_EXCEPTION";
    case AttemptStatus::LoadTimeout:
      return "LOAD_TIMEOUT";
    case AttemptStatus::WorkerLost:
      return "WORKER_LOST";
    case AttemptStatus::PoolLost:
      return "POOL_LOST";
    case AttemptStatus::Cancelled:
      return "CANCELLED";
  }
  return "UNKNOWN";
}

std::string type_name(std::uint8_t type) {
  static constexpr const char* kNames[] = {
      nullptr,     "Register",    "Registered",  "Reject",    "Heartbeat",
      "TaskBatch", "ResultBatch", "Drain",       "Shutdown",  "JobInfo",
      "SubmitJob", "JobAccepted", "SubmitTasks", "SubmitEnd", "JobProgress",
      "JobEnded",  "Attach",      "CancelJob",   "DropJob",
  };
  constexpr std::size_t n = sizeof(kNames) / sizeof(kNames[0]);
  if (type > 0 && type < n && kNames[type] != nullptr) return kNames[type];
  if (type == static_cast<std::uint8_t>(MsgType::ResourceSample)) return "ResourceSample";
  if (type == static_cast<std::uint8_t>(MsgType::PoolLeaving)) return "PoolLeaving";
  if (type == static_cast<std::uint8_t>(MsgType::ReopenJob)) return "ReopenJob";
  return fmt::format("unknown({})", type);
}

Expected<Header> read_header(std::string_view frame) {
  if (frame.size() < kHeaderBytes) {
    return make_error(ErrorCode::Protocol,
                      fmt::format("frame: expected at least {} header bytes, found {}",
                                  kHeaderBytes, frame.size()));
  }
  if (frame.size() > kMaxFrameBytes) {
    return make_error(ErrorCode::Protocol, fmt::format("frame: {} bytes exceeds the limit of {}",
                                                       frame.size(), kMaxFrameBytes));
  }
  auto version = static_cast<std::uint8_t>(frame[0]);
  auto type = static_cast<std::uint8_t>(frame[1]);
  if (version != kProtocolVersion) {
    return make_error(
        ErrorCode::Version,
        fmt::format("frame: expected protocol version {}, found {}", kProtocolVersion, version));
  }
  const bool known = (type >= static_cast<std::uint8_t>(MsgType::Register) &&
                      type <= static_cast<std::uint8_t>(MsgType::DropJob)) ||
                     type == static_cast<std::uint8_t>(MsgType::ResourceSample) ||
                     type == static_cast<std::uint8_t>(MsgType::PoolLeaving) ||
                     type == static_cast<std::uint8_t>(MsgType::ReopenJob);
  if (!known) {
    return make_error(ErrorCode::Protocol, "frame: unknown message type " + std::to_string(type));
  }
  return Header{version, static_cast<MsgType>(type)};
}

namespace detail {

namespace {

const char* kind_name(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL:
      return "nil";
    case msgpack::type::BOOLEAN:
      return "bool";
    case msgpack::type::POSITIVE_INTEGER:
      return "positive integer";
    case msgpack::type::NEGATIVE_INTEGER:
      return "negative integer";
    case msgpack::type::FLOAT32:
      return "float32";
    case msgpack::type::FLOAT64:
      return "float64";
    case msgpack::type::STR:
      return "str";
    case msgpack::type::BIN:
      return "bin";
    case msgpack::type::ARRAY:
      return "array";
    case msgpack::type::MAP:
      return "map";
    case msgpack::type::EXT:
      return "ext";
  }
  return "unknown";
}

// Says which top-level field `conv` refused. Fields missing from the end of an array keep their
// defaults (forward compatibility), so converting ever longer prefixes finds the first bad one.
// Runs on the error path only.
std::string describe_type_error(const msgpack::object& o,
                                const std::function<void(const msgpack::object&)>& conv) {
  if (o.type != msgpack::type::ARRAY) {
    return fmt::format("expected an array, found {}", kind_name(o));
  }
  for (std::uint32_t i = 0; i < o.via.array.size; ++i) {
    msgpack::object prefix = o;
    prefix.via.array.size = i + 1;
    try {
      conv(prefix);
    } catch (const std::exception&) {  // this runs inside a catch handler: nothing may escape
      const msgpack::object& f = o.via.array.ptr[i];
      if (f.type == msgpack::type::ARRAY || f.type == msgpack::type::MAP) {
        return fmt::format("field {} (found {}) or a value inside it has the wrong type", i,
                           kind_name(f));
      }
      return fmt::format("field {} has the wrong type or range (found {})", i, kind_name(f));
    }
  }
  return "a field has the wrong type";
}

// Counts the elements a body declares, containers first (their sizes are known from their
// headers, before any item is read), without allocating anything but the parser's stack.
struct ElementCounter : msgpack::null_visitor {
  static constexpr std::size_t kMaxDepth = 64;
  std::size_t left = 0;
  std::size_t depth = 0;
  bool over = false;
  bool take(std::size_t n) {
    if (++depth > kMaxDepth || n > left) {
      over = true;
      return false;
    }
    left -= n;
    return true;
  }
  bool start_array(std::uint32_t n) { return take(n); }
  bool start_map(std::uint32_t n) { return take(2 * static_cast<std::size_t>(n)); }
  bool end_array() {
    --depth;
    return true;
  }
  bool end_map() {
    --depth;
    return true;
  }
  // msgpack-cxx re-encodes an integral double d with `d <= double(UINT64_MAX)` as an unsigned
  // integer, and double(UINT64_MAX) rounds up to 2^64, so a decoded float equal to 2^64 would be
  // converted to uint64 out of range (undefined behaviour) the next time it is encoded. No
  // field of the protocol carries such a value, so the frame is refused here instead.
  bool visit_float32(float v) { return visit_float64(v); }
  bool visit_float64(double v) {
    if (v == kTwoTo64) {
      float_out_of_range = true;
      return false;
    }
    return true;
  }
  static constexpr double kTwoTo64 = 18446744073709551616.0;
  bool float_out_of_range = false;
  void parse_error(std::size_t, std::size_t) {}
  void insufficient_bytes(std::size_t, std::size_t) {}
};

}  // namespace

Expected<void> unpack_into(std::string_view body, const char* what, std::size_t max_elements,
                           const std::function<void(const msgpack::object&)>& conv) {
  const std::size_t n = body.size();
  {
    ElementCounter counter;
    counter.left = max_elements;
    std::size_t off = 0;
    try {
      (void)msgpack::parse(body.data(), body.size(), off, counter);
    } catch (const std::exception&) {
      // Malformed bytes: the unpack below says what is wrong with them.
    }
    if (counter.over) {
      return make_error(ErrorCode::Protocol,
                        fmt::format("{}: body: more than {} elements, or nested deeper than {} "
                                    "(the limit of this message; docs/protocol.md)",
                                    what, max_elements, ElementCounter::kMaxDepth));
    }
    if (counter.float_out_of_range) {
      return make_error(ErrorCode::Protocol,
                        fmt::format("{}: body: a float equal to 2^64, which no field holds and "
                                    "msgpack cannot re-encode",
                                    what));
    }
  }
  // Every msgpack element takes at least one byte, so no container in a body of n bytes can
  // legitimately hold more than n elements: limit allocations to that.
  const std::size_t m = std::min(n, max_elements);
  msgpack::unpack_limit limit(m, m, n, n, n, ElementCounter::kMaxDepth);
  msgpack::object_handle oh;
  try {
    std::size_t off = 0;
    oh = msgpack::unpack(body.data(), body.size(), off, nullptr, nullptr, limit);
    if (off != body.size()) {
      return make_error(
          ErrorCode::Protocol,
          fmt::format("{}: body: {} trailing bytes after the message", what, body.size() - off));
    }
  } catch (const msgpack::insufficient_bytes&) {
    return make_error(ErrorCode::Protocol,
                      fmt::format("{}: body: truncated ({} bytes)", what, body.size()));
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::Protocol, fmt::format("{}: body: too large to decode", what));
  } catch (const std::exception& e) {
    return make_error(ErrorCode::Protocol,
                      fmt::format("{}: body: not valid msgpack ({})", what, e.what()));
  }
  try {
    conv(oh.get());
  } catch (const msgpack::type_error&) {
    return make_error(ErrorCode::Protocol,
                      fmt::format("{}: body: {}", what, describe_type_error(oh.get(), conv)));
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::Protocol, fmt::format("{}: body: too large to decode", what));
  } catch (const std::exception& e) {
    return make_error(ErrorCode::Protocol,
                      fmt::format("{}: body: cannot convert ({})", what, e.what()));
  }
  return {};
}

namespace {

// Reads the msgpack shapes the pipeline's own encoders write (msgpack-cxx's packer of the
// structs in messages.hpp) straight into those structs: no msgpack::object tree, no zone, each
// string copied once. It accepts a subset of what the generic path accepts, and yields the same
// values for it: arrays of exactly the struct's field count, unsigned integers in the field's
// range, str (not bin) strings, floats and integers for doubles, containers within the frame's
// element limit and no trailing bytes. On anything else it returns false and decode() takes the
// generic path, which decodes or names the error as before.
class Reader {
 public:
  Reader(std::string_view body, std::size_t max_elements)
      : p_(reinterpret_cast<const unsigned char*>(body.data())),
        end_(p_ + body.size()),
        left_(max_elements) {}

  bool done() const { return p_ == end_; }

  // An array header; its size goes to `n`, counted against the element limit.
  bool array(std::size_t& n) {
    if (p_ == end_) return false;
    const unsigned char b = *p_;
    if ((b & 0xf0) == 0x90) {
      n = b & 0x0f;
      ++p_;
    } else if (b == 0xdc || b == 0xdd) {  // array 16, 32
      if (!wide(2u << (b - 0xdc), n)) return false;
    } else {
      return false;
    }
    if (n > left_ || n > static_cast<std::size_t>(end_ - p_)) return false;
    left_ -= n;
    return true;
  }
  // An array of exactly `n` elements (a struct's fields).
  bool fields(std::size_t n) {
    std::size_t got = 0;
    return array(got) && got == n;
  }

  template <typename T>
  bool uint(T& v) {
    if (p_ == end_) return false;
    const unsigned char b = *p_;
    std::uint64_t x = 0;
    if (b <= 0x7f) {
      x = b;
      ++p_;
    } else if (b >= 0xcc && b <= 0xcf) {  // uint 8, 16, 32, 64
      if (!wide(1u << (b - 0xcc), x)) return false;
    } else {
      return false;
    }
    if (x > std::numeric_limits<T>::max()) return false;
    v = static_cast<T>(x);
    return true;
  }

  bool int64(std::int64_t& v) {
    if (p_ == end_) return false;
    const unsigned char b = *p_;
    if (b >= 0xe0) {  // negative fixint
      v = static_cast<std::int8_t>(b);
      ++p_;
      return true;
    }
    if (b >= 0xd0 && b <= 0xd3) {  // int 8, 16, 32, 64
      const unsigned w = 1u << (b - 0xd0);
      std::uint64_t u = 0;
      if (!wide(w, u)) return false;
      const unsigned shift = 64 - 8 * w;  // sign-extend from w bytes
      v = static_cast<std::int64_t>(u << shift) >> shift;
      // msgpack-cxx reads a non-negative value in a signed encoding as a positive integer,
      // which converts the same way.
      return true;
    }
    std::uint64_t u = 0;
    if (!uint(u) || u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return false;
    }
    v = static_cast<std::int64_t>(u);
    return true;
  }

  bool float64(double& v) {
    if (p_ == end_) return false;
    const unsigned char b = *p_;
    if (b == 0xcb || b == 0xca) {  // float 64, 32
      const unsigned w = b == 0xcb ? 8 : 4;
      std::uint64_t u = 0;
      if (!wide(w, u)) return false;
      if (w == 8) {
        v = std::bit_cast<double>(u);
      } else {
        v = static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(u)));
      }
      // The generic path refuses 2^64 (ElementCounter::visit_float64): so does this one.
      return v != 18446744073709551616.0;
    }
    if (b >= 0xe0 || (b >= 0xd0 && b <= 0xd3)) {  // negative fixint, int 8..64
      std::int64_t i = 0;
      if (!int64(i)) return false;
      v = static_cast<double>(i);
      return true;
    }
    std::uint64_t u = 0;  // positive fixint, uint 8..64
    if (!uint(u)) return false;
    v = static_cast<double>(u);
    return true;
  }

  bool str(std::string& s) {
    if (p_ == end_) return false;
    const unsigned char b = *p_;
    std::size_t n = 0;
    if ((b & 0xe0) == 0xa0) {
      n = b & 0x1f;
      ++p_;
    } else if (b >= 0xd9 && b <= 0xdb) {  // str 8, 16, 32
      if (!wide(1u << (b - 0xd9), n)) return false;
    } else {
      return false;
    }
    if (n > static_cast<std::size_t>(end_ - p_)) return false;
    s.assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }

  bool strings(std::vector<std::string>& v) {
    std::size_t n = 0;
    if (!array(n)) return false;
    v.resize(n);
    for (std::string& s : v) {
      if (!str(s)) return false;
    }
    return true;
  }

 private:
  // The big-endian unsigned of `width` bytes after the type byte at p_; moves past both.
  template <typename U>
  bool wide(unsigned width, U& out) {
    if (static_cast<std::size_t>(end_ - p_) < 1 + width) return false;
    std::uint64_t u = 0;
    for (unsigned i = 1; i <= width; ++i) u = (u << 8) | p_[i];
    p_ += 1 + width;
    out = static_cast<U>(u);
    return true;
  }

  const unsigned char* p_;
  const unsigned char* end_;
  std::size_t left_;
};

bool read_minibatch(Reader& r, MiniBatch& b) {
  // Three fields from a client before `refused`.
  std::size_t n = 0;
  if (!r.array(n) || (n != 3 && n != 4)) return false;
  return r.uint(b.index) && r.strings(b.items) && r.str(b.detail) && (n == 3 || r.str(b.refused));
}

bool read_task(Reader& r, Task& t) {
  return r.fields(6) && r.uint(t.task_id) && r.uint(t.job_id) && r.uint(t.index) &&
         r.uint(t.attempt) && r.strings(t.items) && r.str(t.detail);
}

bool read_result(Reader& r, TaskResult& t) {
  return r.fields(22) && r.uint(t.task_id) && r.uint(t.job_id) && r.uint(t.index) &&
         r.uint(t.attempt) && r.uint(t.status) && r.uint(t.items) && r.uint(t.succeeded) &&
         r.uint(t.failed) && r.uint(t.rows) && r.str(t.output) && r.str(t.error_category) &&
         r.str(t.error_message) && r.str(t.node) && r.str(t.process) && r.int64(t.worker_pid) &&
         r.float64(t.start) && r.float64(t.elapsed_s) && r.float64(t.cpu_s) && r.float64(t.run_s) &&
         r.str(t.device) && r.str(t.cpus) && r.uint(t.threads);
}

// A vector of `read`'s structs, one per element of an array.
template <typename T, typename F>
bool read_all(Reader& r, std::vector<T>& v, F read) {
  std::size_t n = 0;
  if (!r.array(n)) return false;
  v.resize(n);
  for (T& x : v) {
    if (!read(r, x)) return false;
  }
  return true;
}

}  // namespace

bool fast_decode(std::string_view body, std::size_t max_elements, SubmitTasks& m) {
  Reader r(body, max_elements);
  return r.fields(2) && r.uint(m.job_id) && read_all(r, m.batches, read_minibatch) && r.done();
}

bool fast_decode(std::string_view body, std::size_t max_elements, TaskBatch& m) {
  Reader r(body, max_elements);
  return r.fields(1) && read_all(r, m.tasks, read_task) && r.done();
}

bool fast_decode(std::string_view body, std::size_t max_elements, ResultBatch& m) {
  Reader r(body, max_elements);
  return r.fields(2) && read_all(r, m.results, read_result) && r.uint(m.capacity) && r.done();
}

}  // namespace detail
}  // namespace fanout::proto
