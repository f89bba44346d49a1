// Tests for the worker pipe's frames (pool/worker_pipe.hpp): every kind round-trips, the bytes
// sit at the offsets docs/worker-pipe.md gives, and truncated or garbage input is refused without
// a read outside the bytes given (each input lies against a page the process may not read).
#include "pool/worker_pipe.hpp"

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace fanout;
using namespace fanout::pipe;

namespace {

// Bytes placed right before (or right after) a page that cannot be read, so that a read past
// the end (or before the start) of the view kills the test instead of passing unseen.
class Guarded final {
 public:
  enum class Side { End, Start };
  Guarded(std::string_view bytes, Side side) {
    page_ = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    REQUIRE(bytes.size() <= page_);
    map_ = static_cast<char*>(
        ::mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(map_ != MAP_FAILED);
    char* data = nullptr;
    if (side == Side::End) {
      REQUIRE(::mprotect(map_ + page_, page_, PROT_NONE) == 0);
      data = map_ + page_ - bytes.size();
    } else {
      REQUIRE(::mprotect(map_, page_, PROT_NONE) == 0);
      data = map_ + page_;
    }
    std::memcpy(data, bytes.data(), bytes.size());
    view_ = std::string_view(data, bytes.size());
  }
  ~Guarded() { ::munmap(map_, 2 * page_); }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
  [[nodiscard]] std::string_view view() const { return view_; }

 private:
  std::size_t page_ = 0;
  char* map_ = nullptr;
  std::string_view view_{};
};

// The one frame `bytes` holds. Fails the test unless it is whole.
Cut whole(std::string_view bytes) {
  const Cut c = cut_frame(bytes, kMaxReplyLength);
  REQUIRE(c.status == Cut::Status::Frame);
  CHECK(c.frame_bytes() == bytes.size());
  return c;
}

template <typename T>
T at(const std::string& f, std::size_t offset) {
  REQUIRE(offset + sizeof(T) <= f.size());
  return read_le<T>(f.data() + offset);
}

}  // namespace

TEST_CASE("pool.worker_pipe.kinds_are_their_wire_letters") {
  CHECK(static_cast<char>(FrameKind::Task) == 'T');
  CHECK(static_cast<char>(FrameKind::Quit) == 'Q');
  CHECK(static_cast<char>(FrameKind::Ready) == 'R');
  CHECK(static_cast<char>(FrameKind::LoadError) == 'L');
  CHECK(static_cast<char>(FrameKind::RunStarted) == 'S');
  CHECK(static_cast<char>(FrameKind::RunEnded) == 'E');
  CHECK(static_cast<char>(FrameKind::Done) == 'D');
  CHECK(static_cast<int>(DoneStatus::Ok) == 0);
  CHECK(static_cast<int>(DoneStatus::Raised) == 1);
  CHECK(static_cast<int>(DoneStatus::BadReturn) == 2);
  CHECK(static_cast<int>(DoneStatus::Exiting) == 3);
}

TEST_CASE("pool.worker_pipe.task_round_trips") {
  struct Case {
    const char* name;
    std::string detail;
    std::vector<std::string> items;
  };
  const std::vector<Case> cases = {
      {"plain files", "", {"/data/a.txt", "/data/b.txt", "/data/c.txt"}},
      {"no items", "", {}},
      {"one empty item", "", {""}},
      {"detail and items", R"({"kind": "tabular"})", {"", "", ""}},
      {"detail only", R"({"global_row_offset": 7})", {}},
  };
  for (const auto& k : cases) {
    CAPTURE(k.name);
    std::string f;
    append_task(f, 0x0102030405060708ull, 42, k.detail, k.items);
    CHECK(f.size() == task_frame_bytes(k.detail.size(), k.items));
    const Cut c = whole(f);
    CHECK(c.kind == FrameKind::Task);
    auto t = decode_task(c.payload);
    REQUIRE(t);
    CHECK(t->task_id == 0x0102030405060708ull);
    CHECK(t->index == 42);
    CHECK(t->detail_len == k.detail.size());
    CHECK(t->n_items == k.items.size());
    CHECK(t->detail_fits);
    CHECK(t->detail == k.detail);
    std::string joined;
    for (std::size_t i = 0; i < k.items.size(); ++i) {
      if (i > 0) joined.push_back('\0');
      joined += k.items[i];
    }
    CHECK(t->items == joined);
  }
}

TEST_CASE("pool.worker_pipe.task_fields_sit_at_the_documented_offsets") {
  std::string f;
  const std::vector<std::string> items = {"ab", "c"};
  append_task(f, 11, 22, "{}", items);
  CHECK(at<std::uint32_t>(f, 0) == f.size() - 4);
  CHECK(f[4] == 'T');
  CHECK(at<std::uint64_t>(f, 5) == 11);
  CHECK(at<std::uint64_t>(f, 13) == 22);
  CHECK(at<std::uint32_t>(f, 21) == 2);
  CHECK(at<std::uint32_t>(f, 25) == 2);
  CHECK(f.substr(29) == std::string("{}ab\0c", 6));
  CHECK(TaskLayout::kHeaderBytes == 29);
}

TEST_CASE("pool.worker_pipe.done_round_trips") {
  for (const auto status : {DoneStatus::Ok, DoneStatus::Raised, DoneStatus::BadReturn}) {
    for (const std::string& output : {std::string(), std::string("a\nb\n")}) {
      const std::string error = status == DoneStatus::Ok ? "" : "ValueError: bad\nTraceback";
      CAPTURE(static_cast<int>(status));
      CAPTURE(output);
      std::string f;
      append_done(f, DoneHead{77, status, 2, 0.25, 0.125}, output, error);
      CHECK(f.size() == DoneLayout::kHeaderBytes + output.size() + error.size());
      const Cut c = whole(f);
      CHECK(c.kind == FrameKind::Done);
      auto d = decode_done(c.payload);
      REQUIRE(d);
      CHECK(d->head.task_id == 77);
      CHECK(d->head.status == status);
      CHECK(d->head.n_result == 2);
      CHECK(d->head.run_s == 0.25);
      CHECK(d->head.cpu_s == 0.125);
      CHECK(d->output == output);
      CHECK(d->error == error);
    }
  }
}

TEST_CASE("pool.worker_pipe.done_fields_sit_at_the_documented_offsets") {
  std::string f;
  append_done(f, DoneHead{9, DoneStatus::BadReturn, 3, 1.5, 2.5}, "xy", "E");
  CHECK(at<std::uint32_t>(f, 0) == 42 + 2 + 1);
  CHECK(f[4] == 'D');
  CHECK(at<std::uint64_t>(f, 5) == 9);
  CHECK(f[13] == 2);
  CHECK(at<std::uint64_t>(f, 14) == 3);
  CHECK(at<std::uint64_t>(f, 22) == 2);
  CHECK(at<double>(f, 30) == 1.5);
  CHECK(at<double>(f, 38) == 2.5);
  CHECK(f.substr(46) == "xyE");
}

TEST_CASE("pool.worker_pipe.markers_round_trip") {
  for (const auto kind : {FrameKind::RunStarted, FrameKind::RunEnded}) {
    std::string f;
    append_marker(f, kind, 0xfeedull);
    CHECK(f.size() == 13);
    CHECK(at<std::uint32_t>(f, 0) == 9);
    CHECK(at<std::uint64_t>(f, 5) == 0xfeedull);
    const Cut c = whole(f);
    CHECK(c.kind == kind);
    auto id = decode_marker(c.payload);
    REQUIRE(id);
    CHECK(*id == 0xfeedull);
  }
}

TEST_CASE("pool.worker_pipe.text_frames_round_trip") {
  for (const auto kind : {FrameKind::Ready, FrameKind::LoadError, FrameKind::Quit}) {
    const std::string text = kind == FrameKind::Quit ? "" : "4242 3.11.7";
    std::string f;
    append_frame(f, kind, text);
    CHECK(at<std::uint32_t>(f, 0) == text.size() + 1);
    const Cut c = whole(f);
    CHECK(c.kind == kind);
    CHECK(c.payload == text);
  }
}

TEST_CASE("pool.worker_pipe.frames_follow_one_another") {
  std::string buf;
  append_marker(buf, FrameKind::RunStarted, 1);
  append_marker(buf, FrameKind::RunEnded, 1);
  append_done(buf, DoneHead{1, DoneStatus::Ok, 1, 0, 0}, "row\n", "");
  std::vector<FrameKind> kinds;
  std::string_view rest = buf;
  while (true) {
    const Cut c = cut_frame(rest, kMaxReplyLength);
    if (c.status != Cut::Status::Frame) {
      CHECK(c.status == Cut::Status::Partial);
      break;
    }
    kinds.push_back(c.kind);
    rest.remove_prefix(c.frame_bytes());
  }
  CHECK(rest.empty());
  CHECK(kinds ==
        std::vector<FrameKind>{FrameKind::RunStarted, FrameKind::RunEnded, FrameKind::Done});
}

TEST_CASE("pool.worker_pipe.a_cut_frame_waits_for_all_its_bytes") {
  std::string f;
  append_done(f, DoneHead{5, DoneStatus::Ok, 1, 0, 0}, "row\n", "");
  for (std::size_t n = 0; n < f.size(); ++n) {
    CAPTURE(n);
    Guarded g(std::string_view(f).substr(0, n), Guarded::Side::End);
    CHECK(cut_frame(g.view(), kMaxReplyLength).status == Cut::Status::Partial);
  }
}

TEST_CASE("pool.worker_pipe.bad_lengths_are_refused") {
  std::string zero;
  append_le<std::uint32_t>(zero, 0);
  zero += "D";
  const Cut z = cut_frame(zero, kMaxReplyLength);
  CHECK(z.status == Cut::Status::BadLength);
  CHECK(z.length == 0);

  std::string huge;
  append_le<std::uint32_t>(huge, kMaxReplyLength + 1);
  const Cut h = cut_frame(huge, kMaxReplyLength);
  CHECK(h.status == Cut::Status::BadLength);
  CHECK(h.length == kMaxReplyLength + 1);
  // fanout-worker takes any u32 length: it waits for the bytes instead.
  CHECK(cut_frame(huge, UINT32_MAX).status == Cut::Status::Partial);
}

TEST_CASE("pool.worker_pipe.truncated_payloads_are_refused") {
  SUBCASE("T shorter than its header") {
    std::string f;
    append_task(f, 1, 2, "", std::vector<std::string>{});
    const std::string payload = f.substr(kPayloadOffset);
    REQUIRE(payload.size() == 24);
    for (std::size_t n = 0; n < payload.size(); ++n) {
      CAPTURE(n);
      for (const auto side : {Guarded::Side::End, Guarded::Side::Start}) {
        Guarded g(std::string_view(payload).substr(0, n), side);
        auto t = decode_task(g.view());
        REQUIRE_FALSE(t);
        CHECK(t.error().code == ErrorCode::Protocol);
        CHECK(t.error().message.find("T frame") != std::string::npos);
      }
    }
  }
  SUBCASE("T whose detail runs past it") {
    std::string f;
    append_task(f, 1, 2, "{\"a\": 1}", std::vector<std::string>{"x"});
    std::string payload = f.substr(kPayloadOffset);
    payload.resize(payload.size() - 4);  // detail_len 8, but only 6 bytes of frame follow
    Guarded g(payload, Guarded::Side::End);
    auto t = decode_task(g.view());
    REQUIRE(t);  // answered with a failed D frame, not a protocol error
    CHECK(t->task_id == 1);
    CHECK_FALSE(t->detail_fits);
    CHECK(t->detail.empty());
    CHECK(t->items.empty());
  }
  SUBCASE("D shorter than its header") {
    std::string f;
    append_done(f, DoneHead{1, DoneStatus::Ok, 0, 0, 0}, "", "");
    const std::string payload = f.substr(kPayloadOffset);
    REQUIRE(payload.size() == 41);
    for (std::size_t n = 0; n < payload.size(); ++n) {
      CAPTURE(n);
      for (const auto side : {Guarded::Side::End, Guarded::Side::Start}) {
        Guarded g(std::string_view(payload).substr(0, n), side);
        auto d = decode_done(g.view());
        REQUIRE_FALSE(d);
        CHECK(d.error().code == ErrorCode::Protocol);
        CHECK(d.error().message.find("D frame") != std::string::npos);
      }
    }
  }
  SUBCASE("D whose out_len runs past it") {
    std::string f;
    append_done(f, DoneHead{1, DoneStatus::Ok, 1, 0, 0}, "row\n", "");
    std::string payload = f.substr(kPayloadOffset);
    payload.pop_back();
    Guarded g(payload, Guarded::Side::End);
    auto d = decode_done(g.view());
    REQUIRE_FALSE(d);
    CHECK(d.error().message.find("out_len") != std::string::npos);
    // An out_len near 2^64 must not wrap around the bounds check.
    std::string wrap = f.substr(kPayloadOffset);
    const std::uint64_t big = ~0ull - 2;
    std::memcpy(wrap.data() + (DoneLayout::kOutputLen - kPayloadOffset), &big, 8);
    Guarded w(wrap, Guarded::Side::End);
    CHECK_FALSE(decode_done(w.view()));
  }
  SUBCASE("markers of another size") {
    for (const std::size_t n : {0, 1, 7, 9, 16}) {
      CAPTURE(n);
      Guarded g(std::string(n, 'x'), Guarded::Side::End);
      auto id = decode_marker(g.view());
      REQUIRE_FALSE(id);
      CHECK(id.error().message.find("expected 8") != std::string::npos);
    }
  }
}

TEST_CASE("pool.worker_pipe.garbage_is_cut_and_decoded_within_its_bytes") {
  std::mt19937 rng(15);
  for (int round = 0; round < 2000; ++round) {
    std::string bytes(rng() % 96, '\0');
    for (auto& b : bytes) b = static_cast<char>(rng());
    if (bytes.size() >= 4 && round % 2 == 0) {
      // A plausible length, so that some rounds reach the decoders.
      const auto len = static_cast<std::uint32_t>(bytes.size() - 4 - rng() % 2);
      std::memcpy(bytes.data(), &len, 4);
      bytes[4] = "TQRLSED"[rng() % 7];
    }
    Guarded g(bytes, Guarded::Side::End);
    std::string_view rest = g.view();
    while (true) {
      const Cut c = cut_frame(rest, kMaxReplyLength);
      if (c.status != Cut::Status::Frame) break;
      REQUIRE(c.frame_bytes() <= rest.size());
      REQUIRE(c.payload.data() + c.payload.size() <= rest.data() + rest.size());
      // Whatever the kind, no decoder may read past the payload; the results are not checked.
      (void)decode_task(c.payload);
      (void)decode_done(c.payload);
      (void)decode_marker(c.payload);
      rest.remove_prefix(c.frame_bytes());
    }
  }
}
