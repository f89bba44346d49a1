// Tests for the frame codec (src/fanout/protocol/codec.hpp): every MsgType round-trips, and every
// kind of bad frame is an Error with the right code and a message that says what was wrong.
// The frame format is specified in docs/protocol.md.
#include "fanout/protocol/codec.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <msgpack.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/protocol/messages.hpp"

namespace proto = fanout::proto;
using fanout::ErrorCode;
using proto::AttemptStatus;
using proto::MsgType;

namespace {

template <typename... Ms>
struct TypeList {};

using AllMessages =
    TypeList<proto::Register, proto::Registered, proto::Reject, proto::Heartbeat, proto::TaskBatch,
             proto::ResultBatch, proto::Drain, proto::Shutdown, proto::JobInfo, proto::SubmitJob,
             proto::JobAccepted, proto::SubmitTasks, proto::SubmitEnd, proto::JobProgress,
             proto::JobEnded, proto::Attach, proto::CancelJob, proto::DropJob>;

// Calls f.template operator()<M>() for every message type M.
template <typename F, typename... Ms>
void for_each_message(TypeList<Ms...> /*unused*/, F&& f) {
  (f.template operator()<Ms>(), ...);
}

std::string header(std::uint8_t version, std::uint8_t type) {
  std::string h;
  h.push_back(static_cast<char>(version));
  h.push_back(static_cast<char>(type));
  return h;
}

std::string header(MsgType type) {
  return header(proto::kProtocolVersion, static_cast<std::uint8_t>(type));
}

// A frame of `type` whose body is whatever `pack` writes.
template <typename F>
std::string frame_with_body(MsgType type, F&& pack) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pack(pk);
  return header(type) + std::string(buf.data(), buf.size());
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Decodes and fails the test (with the error) if decoding failed.
template <typename M>
M round_trip(const M& in) {
  const std::string frame = proto::encode(in);
  REQUIRE(frame.size() > proto::kHeaderBytes);
  CHECK(static_cast<std::uint8_t>(frame[0]) == proto::kProtocolVersion);
  CHECK(static_cast<std::uint8_t>(frame[1]) == static_cast<std::uint8_t>(M::kType));
  auto h = proto::read_header(frame);
  REQUIRE(h.has_value());
  CHECK(h->type == M::kType);
  auto out = proto::decode<M>(frame);
  if (!out) FAIL_CHECK(out.error().message);
  REQUIRE(out.has_value());
  // Encoding is deterministic: the decoded value encodes to the same bytes.
  CHECK(proto::encode(*out) == frame);
  return std::move(out).value();
}

// ---- sample values: every field differs from its default ----

proto::JobSpec sample_spec() {
  proto::JobSpec s;
  s.name = "resnet-scoring";
  s.spec_path = "/jobs/score.yaml";
  s.runtime = "python";
  s.code_dir = "/srv/code";
  s.entry_script = "score.py";
  s.python = "/usr/bin/python3.11";
  s.args = {"--model", "resnet50", ""};
  s.env = {"OMP_NUM_THREADS=1", "EMPTY="};
  s.output_path = "/out/parallel_run_step.txt";
  s.log_dir = "/out/logs";
  s.max_tries = 7;
  s.run_timeout_s = 12.5;
  s.error_threshold = 1234567890123;
  s.mini_batch_error_threshold = 42;
  s.allowed_failed_percent = 2.25;
  s.settings_json = R"({"mini_batch_size":"10","unicode":"\u00e9"})";
  s.input_name = "images";
  s.task_overhead_timeout_s = 30;
  s.first_task_creation_timeout_s = 600;
  s.progress_update_timeout_s = 90.5;
  s.resource_monitor_interval_s = 2.5;
  s.priority = 7;
  s.interchange_run_dir = true;
  return s;
}

void check_spec(const proto::JobSpec& a, const proto::JobSpec& b) {
  CHECK(a.name == b.name);
  CHECK(a.spec_path == b.spec_path);
  CHECK(a.runtime == b.runtime);
  CHECK(a.code_dir == b.code_dir);
  CHECK(a.entry_script == b.entry_script);
  CHECK(a.python == b.python);
  CHECK(a.args == b.args);
  CHECK(a.env == b.env);
  CHECK(a.output_path == b.output_path);
  CHECK(a.log_dir == b.log_dir);
  CHECK(a.max_tries == b.max_tries);
  CHECK(a.run_timeout_s == b.run_timeout_s);
  CHECK(a.error_threshold == b.error_threshold);
  CHECK(a.mini_batch_error_threshold == b.mini_batch_error_threshold);
  CHECK(a.allowed_failed_percent == b.allowed_failed_percent);
  CHECK(a.settings_json == b.settings_json);
  CHECK(a.input_name == b.input_name);
  CHECK(a.task_overhead_timeout_s == b.task_overhead_timeout_s);
  CHECK(a.first_task_creation_timeout_s == b.first_task_creation_timeout_s);
  CHECK(a.progress_update_timeout_s == b.progress_update_timeout_s);
  CHECK(a.resource_monitor_interval_s == b.resource_monitor_interval_s);
  CHECK(a.priority == b.priority);
  CHECK(a.interchange_run_dir == b.interchange_run_dir);
}

proto::Task sample_task(std::uint64_t i) {
  proto::Task t;
  t.task_id = 1000 + i;
  t.job_id = std::numeric_limits<std::uint64_t>::max() - i;
  t.index = 70000 + i;
  t.attempt = 3 + static_cast<std::uint32_t>(i);
  for (std::uint64_t k = 0; k <= i; ++k) t.items.push_back("/data/f" + std::to_string(k) + ".jpg");
  t.detail = R"({"i":)" + std::to_string(i) + "}";
  return t;
}

void check_task(const proto::Task& a, const proto::Task& b) {
  CHECK(a.task_id == b.task_id);
  CHECK(a.job_id == b.job_id);
  CHECK(a.index == b.index);
  CHECK(a.attempt == b.attempt);
  CHECK(a.items == b.items);
  CHECK(a.detail == b.detail);
}

proto::TaskResult sample_result(std::uint64_t i) {
  using namespace std::string_literals;
  proto::TaskResult r;
  r.task_id = 500 + i;
  r.job_id = 9;
  r.index = 31 + i;
  r.attempt = 2;
  r.status =
      static_cast<std::uint8_t>(i % 2 == 0 ? AttemptStatus::RunDone : AttemptStatus::RunException);
  r.items = 10;
  r.succeeded = 8;
  r.failed = 2;
  r.rows = 3;
  // Output is raw bytes: embedded NUL and newlines must survive.
  r.output = "row one\n\0binary\0\nlast row "s + std::to_string(i) + "\n"s;
  r.error_category = "UserError";
  r.error_message = "ValueError: bad pixel\nTraceback...";
  r.node = "node-07";
  r.process = "process003";
  r.worker_pid = -4321;  // negative: the sign must survive
  r.start = 1763786052.125;
  r.elapsed_s = 1.5;
  r.cpu_s = 0.75;
  r.run_s = 1.25;
  r.device = "GPU-8f1c2d3e,1";
  r.cpus = "0-3,8";
  r.threads = 4;
  return r;
}

void check_result(const proto::TaskResult& a, const proto::TaskResult& b) {
  CHECK(a.task_id == b.task_id);
  CHECK(a.job_id == b.job_id);
  CHECK(a.index == b.index);
  CHECK(a.attempt == b.attempt);
  CHECK(a.status == b.status);
  CHECK(a.items == b.items);
  CHECK(a.succeeded == b.succeeded);
  CHECK(a.failed == b.failed);
  CHECK(a.rows == b.rows);
  CHECK(a.output == b.output);
  CHECK(a.output.size() == b.output.size());
  CHECK(a.error_category == b.error_category);
  CHECK(a.error_message == b.error_message);
  CHECK(a.node == b.node);
  CHECK(a.process == b.process);
  CHECK(a.worker_pid == b.worker_pid);
  CHECK(a.start == b.start);
  CHECK(a.elapsed_s == b.elapsed_s);
  CHECK(a.cpu_s == b.cpu_s);
  CHECK(a.run_s == b.run_s);
  CHECK(a.device == b.device);
  CHECK(a.cpus == b.cpus);
  CHECK(a.threads == b.threads);
}

proto::JobProgress sample_progress() {
  proto::JobProgress p;
  p.job_id = 77;
  p.total = 1000;
  p.submitted = 900;
  p.succeeded = 850;
  p.failed = 3;
  p.items_succeeded = 8500;
  p.items_failed = 31;
  p.attempts_failed = 12;
  p.pools = 4;
  p.workers = 64;
  p.instance = 0xfeedface12345678ull;
  p.in_flight = 17;
  p.idle_pools = {proto::IdlePool{"n1-slurm42-0", 12.5}, proto::IdlePool{"n2-slurm43-0", 0.25}};
  return p;
}

void check_progress(const proto::JobProgress& a, const proto::JobProgress& b) {
  CHECK(a.job_id == b.job_id);
  CHECK(a.total == b.total);
  CHECK(a.submitted == b.submitted);
  CHECK(a.succeeded == b.succeeded);
  CHECK(a.failed == b.failed);
  CHECK(a.items_succeeded == b.items_succeeded);
  CHECK(a.items_failed == b.items_failed);
  CHECK(a.attempts_failed == b.attempts_failed);
  CHECK(a.pools == b.pools);
  CHECK(a.workers == b.workers);
  CHECK(a.instance == b.instance);
  CHECK(a.in_flight == b.in_flight);
  REQUIRE(a.idle_pools.size() == b.idle_pools.size());
  for (std::size_t i = 0; i < a.idle_pools.size(); ++i) {
    CHECK(a.idle_pools[i].name == b.idle_pools[i].name);
    CHECK(a.idle_pools[i].idle_s == b.idle_pools[i].idle_s);
  }
}

proto::TaskBatch sample_task_batch() {
  proto::TaskBatch b;
  for (std::uint64_t i = 0; i < 4; ++i) b.tasks.push_back(sample_task(i));
  return b;
}

}  // namespace

// ---------------------------------------------------------------- wire values

TEST_CASE("protocol.codec.wire_values_are_fixed") {
  // Append-only: these numbers are on the wire and must never change.
  static_assert(proto::kProtocolVersion == 1);
  static_assert(proto::kHeaderBytes == 2);
  static_assert(static_cast<int>(MsgType::Register) == 1);
  static_assert(static_cast<int>(MsgType::Registered) == 2);
  static_assert(static_cast<int>(MsgType::Reject) == 3);
  static_assert(static_cast<int>(MsgType::Heartbeat) == 4);
  static_assert(static_cast<int>(MsgType::TaskBatch) == 5);
  static_assert(static_cast<int>(MsgType::ResultBatch) == 6);
  static_assert(static_cast<int>(MsgType::Drain) == 7);
  static_assert(static_cast<int>(MsgType::Shutdown) == 8);
  static_assert(static_cast<int>(MsgType::JobInfo) == 9);
  static_assert(static_cast<int>(MsgType::SubmitJob) == 10);
  static_assert(static_cast<int>(MsgType::JobAccepted) == 11);
  static_assert(static_cast<int>(MsgType::SubmitTasks) == 12);
  static_assert(static_cast<int>(MsgType::SubmitEnd) == 13);
  static_assert(static_cast<int>(MsgType::JobProgress) == 14);
  static_assert(static_cast<int>(MsgType::JobEnded) == 15);
  static_assert(static_cast<int>(MsgType::Attach) == 16);
  static_assert(static_cast<int>(MsgType::CancelJob) == 17);
  static_assert(static_cast<int>(MsgType::DropJob) == 18);
  static_assert(static_cast<int>(AttemptStatus::RunDone) == 1);
  static_assert(static_cast<int>(AttemptStatus::Cancelled) == 8);

  int seen = 0;
  for_each_message(AllMessages{}, [&]<typename M>() {
    ++seen;
    const auto wire = static_cast<std::uint8_t>(M::kType);
    CHECK(wire == seen);  // AllMessages lists the types in wire order, with no gaps
    const std::string frame = proto::encode(M{});
    CHECK(static_cast<std::uint8_t>(frame[1]) == wire);
  });
  CHECK(seen == 18);
}

TEST_CASE("protocol.codec.type_names") {
  CHECK(proto::type_name(1) == "Register");
  CHECK(proto::type_name(5) == "TaskBatch");
  CHECK(proto::type_name(6) == "ResultBatch");
  CHECK(proto::type_name(9) == "JobInfo");
  CHECK(proto::type_name(17) == "CancelJob");
  CHECK(proto::type_name(0) == "unknown(0)");
  CHECK(proto::type_name(18) == "DropJob");
  CHECK(proto::type_name(19) == "unknown(19)");
  CHECK(proto::type_name(23) == "PoolLeaving");
  CHECK(proto::type_name(24) == "ReopenJob");
  CHECK(proto::type_name(25) == "unknown(25)");
  CHECK(proto::type_name(255) == "unknown(255)");
}

TEST_CASE("protocol.codec.attempt_status_names") {
  CHECK(std::string(proto::to_string(AttemptStatus::RunDone)) == "RUN_DONE");
  CHECK(std::string(proto::to_string(AttemptStatus::RunException)) == "RUN_EXCEPTION");
  CHECK(std::string(proto::to_string(AttemptStatus::RunTimeout)) == "RUN_TIMEOUT");
  CHECK(std::string(proto::to_string(AttemptStatus::LoadException)) == "LOAD_EXCEPTION");
  CHECK(std::string(proto::to_string(AttemptStatus::LoadTimeout)) == "LOAD_TIMEOUT");
  CHECK(std::string(proto::to_string(AttemptStatus::WorkerLost)) == "WORKER_LOST");
  CHECK(std::string(proto::to_string(AttemptStatus::PoolLost)) == "POOL_LOST");
  CHECK(std::string(proto::to_string(AttemptStatus::Cancelled)) == "CANCELLED");
  // A status byte from the wire may hold anything; naming it must not crash.
  CHECK(std::string(proto::to_string(static_cast<AttemptStatus>(0))) == "UNKNOWN");
  CHECK(std::string(proto::to_string(static_cast<AttemptStatus>(200))) == "UNKNOWN");
}

// ---------------------------------------------------------------- round trips

TEST_CASE("protocol.codec.round_trips_every_type") {
  SUBCASE("Register") {
    proto::Register in{"pool-a", "node-3", 16, 4, "fanout 0.1.0 (abc123)", 31337};
    auto out = round_trip(in);
    CHECK(out.pool_name == in.pool_name);
    CHECK(out.node == in.node);
    CHECK(out.workers == in.workers);
    CHECK(out.prefetch == in.prefetch);
    CHECK(out.build == in.build);
    CHECK(out.pid == in.pid);
  }
  SUBCASE("Registered") {
    proto::Registered in{std::numeric_limits<std::uint64_t>::max(), 2000, 10000};
    auto out = round_trip(in);
    CHECK(out.pool_id == in.pool_id);
    CHECK(out.heartbeat_period_ms == in.heartbeat_period_ms);
    CHECK(out.heartbeat_threshold_ms == in.heartbeat_threshold_ms);
  }
  SUBCASE("Reject") {
    auto out = round_trip(proto::make_reject(proto::RejectCode::Version,
                                             "frame: expected protocol version 1, found 2"));
    CHECK(out.reason == "frame: expected protocol version 1, found 2");
    CHECK(proto::reject_code(out) == proto::RejectCode::Version);
  }
  SUBCASE("Heartbeat") {
    auto out = round_trip(proto::Heartbeat{std::numeric_limits<std::uint32_t>::max()});
    CHECK(out.capacity == std::numeric_limits<std::uint32_t>::max());
  }
  SUBCASE("JobInfo") {
    proto::JobInfo in{123456789, sample_spec()};
    auto out = round_trip(in);
    CHECK(out.job_id == in.job_id);
    check_spec(out.spec, in.spec);
  }
  SUBCASE("TaskBatch") {
    auto in = sample_task_batch();
    auto out = round_trip(in);
    REQUIRE(out.tasks.size() == in.tasks.size());
    for (std::size_t i = 0; i < in.tasks.size(); ++i) check_task(out.tasks[i], in.tasks[i]);
  }
  SUBCASE("ResultBatch") {
    proto::ResultBatch in;
    for (std::uint64_t i = 0; i < 3; ++i) in.results.push_back(sample_result(i));
    in.capacity = 20;
    REQUIRE(in.results[0].output.find('\0') != std::string::npos);
    auto out = round_trip(in);
    REQUIRE(out.results.size() == in.results.size());
    for (std::size_t i = 0; i < in.results.size(); ++i) check_result(out.results[i], in.results[i]);
    CHECK(out.capacity == in.capacity);
  }
  SUBCASE("Drain") {
    CHECK(round_trip(proto::Drain{"node maintenance"}).reason == "node maintenance");
  }
  SUBCASE("Shutdown") {
    auto sd = round_trip(proto::Shutdown{"interchange stopping", "tok3n"});
    CHECK(sd.reason == "interchange stopping");
    CHECK(sd.token == "tok3n");
  }
  SUBCASE("SubmitJob") {
    proto::SubmitJob in{sample_spec()};
    check_spec(round_trip(in).spec, in.spec);
  }
  SUBCASE("JobAccepted") {
    auto out = round_trip(proto::JobAccepted{88, 20000, "/srv/fanout.db", "/srv/runs/x/logs"});
    CHECK(out.job_id == 88);
    CHECK(out.window == 20000);
    // The interchange's own paths.
    CHECK(out.db_path == "/srv/fanout.db");
    CHECK(out.log_dir == "/srv/runs/x/logs");
  }
  SUBCASE("SubmitTasks") {
    proto::SubmitTasks in;
    in.job_id = 5;
    in.batches.push_back(proto::MiniBatch{0, {"a.txt", "b.txt"}, ""});
    in.batches.push_back(proto::MiniBatch{1, {"c.txt"}, R"({"partition":"2024"})"});
    in.batches.push_back(proto::MiniBatch{std::numeric_limits<std::uint64_t>::max(), {}, "x"});
    auto out = round_trip(in);
    CHECK(out.job_id == in.job_id);
    REQUIRE(out.batches.size() == in.batches.size());
    for (std::size_t i = 0; i < in.batches.size(); ++i) {
      CHECK(out.batches[i].index == in.batches[i].index);
      CHECK(out.batches[i].items == in.batches[i].items);
      CHECK(out.batches[i].detail == in.batches[i].detail);
    }
  }
  SUBCASE("SubmitEnd") {
    auto out = round_trip(proto::SubmitEnd{6, 1000001});
    CHECK(out.job_id == 6);
    CHECK(out.total == 1000001);
  }
  SUBCASE("JobProgress") {
    auto in = sample_progress();
    check_progress(round_trip(in), in);
  }
  SUBCASE("JobEnded") {
    proto::JobEnded in{
        77,   "failed", "error_threshold exceeded: 31 failed items > 30", sample_progress(),
        2.25, 1.5};
    auto out = round_trip(in);
    CHECK(out.job_id == in.job_id);
    CHECK(out.state == in.state);
    CHECK(out.reason == in.reason);
    check_progress(out.progress, in.progress);
    CHECK(out.report_s == 2.25);
    CHECK(out.report_cpu_s == 1.5);
  }
  SUBCASE("Attach") { CHECK(round_trip(proto::Attach{424242}).job_id == 424242); }
  SUBCASE("CancelJob") {
    auto out = round_trip(proto::CancelJob{9, "user pressed Ctrl-C"});
    CHECK(out.job_id == 9);
    CHECK(out.reason == "user pressed Ctrl-C");
  }
  SUBCASE("DropJob") {
    auto out = round_trip(proto::DropJob{12, "error_threshold exceeded: 3 failed items > 2"});
    CHECK(out.job_id == 12);
    CHECK(out.reason == "error_threshold exceeded: 3 failed items > 2");
  }
}

TEST_CASE("protocol.codec.round_trips_defaults") {
  // Default-constructed messages (empty strings and vectors, zeros) survive too.
  for_each_message(AllMessages{}, [&]<typename M>() {
    CAPTURE(proto::type_name(static_cast<std::uint8_t>(M::kType)));
    const std::string frame = proto::encode(M{});
    auto out = proto::decode<M>(frame);
    REQUIRE(out.has_value());
    CHECK(proto::encode(*out) == frame);
  });
}

// ---------------------------------------------------------------- header rejections

TEST_CASE("protocol.codec.rejects_short_frames") {
  SUBCASE("empty") {
    auto h = proto::read_header("");
    REQUIRE_FALSE(h.has_value());
    CHECK(h.error().code == ErrorCode::Protocol);
    CHECK(contains(h.error().message, "header"));
    CHECK(contains(h.error().message, "found 0"));
    auto m = proto::decode<proto::Heartbeat>("");
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::Protocol);
  }
  SUBCASE("one byte") {
    const std::string frame(1, static_cast<char>(proto::kProtocolVersion));
    auto m = proto::decode<proto::Heartbeat>(frame);
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::Protocol);
    CHECK(contains(m.error().message, "at least 2"));
    CHECK(contains(m.error().message, "found 1"));
  }
  SUBCASE("header only, no body") {
    auto m = proto::decode<proto::Heartbeat>(header(MsgType::Heartbeat));
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::Protocol);
    CHECK(contains(m.error().message, "Heartbeat"));
  }
}

TEST_CASE("protocol.codec.rejects_wrong_version") {
  for (std::uint8_t v : {0, 2, 255}) {
    CAPTURE(int{v});
    std::string frame = proto::encode(proto::Register{"p", "n", 1, 0, "b", 1});
    frame[0] = static_cast<char>(v);
    auto h = proto::read_header(frame);
    REQUIRE_FALSE(h.has_value());
    CHECK(h.error().code == ErrorCode::Version);
    // Names both the version expected and the one found.
    CHECK(contains(h.error().message, "version 1"));
    CHECK(contains(h.error().message, "found " + std::to_string(v)));
    auto m = proto::decode<proto::Register>(frame);
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::Version);
  }
  // The version is checked before the type: a wrong version with an unknown type is a Version
  // error.
  auto h = proto::read_header(header(2, 200) + "\x90");
  REQUIRE_FALSE(h.has_value());
  CHECK(h.error().code == ErrorCode::Version);
}

TEST_CASE("protocol.codec.rejects_unknown_type") {
  for (std::uint8_t t : {0, 19, 200, 255}) {
    CAPTURE(int{t});
    const std::string frame = header(proto::kProtocolVersion, t) + "\x90";
    auto h = proto::read_header(frame);
    REQUIRE_FALSE(h.has_value());
    CHECK(h.error().code == ErrorCode::Protocol);
    CHECK(contains(h.error().message, "unknown message type " + std::to_string(t)));
    auto m = proto::decode<proto::Heartbeat>(frame);
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::Protocol);
  }
}

TEST_CASE("protocol.codec.rejects_type_mismatch") {
  const std::string frame = proto::encode(proto::Heartbeat{3});
  auto m = proto::decode<proto::TaskBatch>(frame);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().code == ErrorCode::Protocol);
  CHECK(contains(m.error().message, "expected TaskBatch"));
  CHECK(contains(m.error().message, "found Heartbeat"));
  // Every other type refuses it too; the right one accepts it.
  for_each_message(AllMessages{}, [&]<typename M>() {
    CAPTURE(proto::type_name(static_cast<std::uint8_t>(M::kType)));
    CHECK(proto::decode<M>(frame).has_value() == (M::kType == MsgType::Heartbeat));
  });
}

// ---------------------------------------------------------------- body rejections

TEST_CASE("protocol.codec.rejects_truncated_body") {
  const std::string frame = proto::encode(sample_task_batch());
  REQUIRE(proto::decode<proto::TaskBatch>(frame).has_value());
  for (std::size_t len = 0; len < frame.size(); ++len) {
    CAPTURE(len);
    const std::string_view prefix(frame.data(), len);
    bool ok = false;
    fanout::Error err;
    try {
      auto m = proto::decode<proto::TaskBatch>(prefix);
      ok = m.has_value();
      if (!ok) err = m.error();
    } catch (...) {
      FAIL("decode threw on a prefix of ", len, " bytes");
    }
    // The outer array declares its length up front, so no proper prefix is a whole message.
    REQUIRE_FALSE(ok);
    CHECK(err.code == ErrorCode::Protocol);
    CHECK_FALSE(err.message.empty());
    if (len > proto::kHeaderBytes) CHECK(contains(err.message, "TaskBatch"));
  }
}

TEST_CASE("protocol.codec.rejects_trailing_bytes") {
  const std::string frame = proto::encode(proto::SubmitEnd{1, 2}) + "\xc0\xc0";
  auto m = proto::decode<proto::SubmitEnd>(frame);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().code == ErrorCode::Protocol);
  CHECK(contains(m.error().message, "SubmitEnd"));
  CHECK(contains(m.error().message, "2 trailing bytes"));
}

TEST_CASE("protocol.codec.rejects_map_body") {
  // {"capacity": 3} instead of [3].
  const std::string frame = frame_with_body(MsgType::Heartbeat, [](auto& pk) {
    pk.pack_map(1);
    pk.pack(std::string("capacity"));
    pk.pack(3);
  });
  auto m = proto::decode<proto::Heartbeat>(frame);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().code == ErrorCode::Protocol);
  CHECK(contains(m.error().message, "Heartbeat"));
  CHECK(contains(m.error().message, "array"));
  CHECK(contains(m.error().message, "map"));
}

TEST_CASE("protocol.codec.rejects_wrong_field_type") {
  SUBCASE("string where an integer is expected") {
    // Register: [pool_name, node, workers, ...] with workers a string.
    const std::string frame = frame_with_body(MsgType::Register, [](auto& pk) {
      pk.pack_array(6);
      pk.pack(std::string("pool"));
      pk.pack(std::string("node"));
      pk.pack(std::string("sixteen"));
      pk.pack(4);
      pk.pack(std::string("build"));
      pk.pack(1);
    });
    auto m = proto::decode<proto::Register>(frame);
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::Protocol);
    CHECK(contains(m.error().message, "Register"));
    CHECK(contains(m.error().message, "field 2"));  // names the field: workers
    CHECK(contains(m.error().message, "str"));      // and what was found
  }
  SUBCASE("integer out of range") {
    // Heartbeat.capacity is a u32.
    const std::string frame = frame_with_body(MsgType::Heartbeat, [](auto& pk) {
      pk.pack_array(1);
      pk.pack(std::uint64_t{1} << 40);
    });
    auto m = proto::decode<proto::Heartbeat>(frame);
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::Protocol);
    CHECK(contains(m.error().message, "field 0"));
  }
  SUBCASE("negative where unsigned is expected") {
    const std::string frame = frame_with_body(MsgType::Attach, [](auto& pk) {
      pk.pack_array(1);
      pk.pack(-1);
    });
    auto m = proto::decode<proto::Attach>(frame);
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::Protocol);
    CHECK(contains(m.error().message, "Attach"));
  }
  SUBCASE("nil where a string is expected") {
    const std::string frame = frame_with_body(MsgType::Reject, [](auto& pk) {
      pk.pack_array(1);
      pk.pack_nil();
    });
    auto m = proto::decode<proto::Reject>(frame);
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::Protocol);
    CHECK(contains(m.error().message, "nil"));
  }
  SUBCASE("bad value inside a nested task") {
    // TaskBatch [[task_id, job_id, index, attempt, items, detail]] with items an integer.
    const std::string frame = frame_with_body(MsgType::TaskBatch, [](auto& pk) {
      pk.pack_array(1);
      pk.pack_array(1);
      pk.pack_array(6);
      pk.pack(1);
      pk.pack(2);
      pk.pack(3);
      pk.pack(1);
      pk.pack(99);
      pk.pack(std::string("{}"));
    });
    auto m = proto::decode<proto::TaskBatch>(frame);
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::Protocol);
    CHECK(contains(m.error().message, "TaskBatch"));
    CHECK(contains(m.error().message, "field 0"));
  }
  SUBCASE("not msgpack at all") {
    // 0xc1 is the one byte msgpack never uses.
    auto m = proto::decode<proto::Heartbeat>(header(MsgType::Heartbeat) + "\xc1");
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::Protocol);
    CHECK(contains(m.error().message, "Heartbeat"));
  }
}

TEST_CASE("protocol.codec.rejects_a_float_msgpack_cannot_reencode") {
  // Registered.now_unix equal to 2^64: msgpack-cxx would convert it to uint64 out of range when
  // the decoded message is encoded again (found by the codec fuzzer), so it is refused on decode.
  for (const bool as_float32 : {false, true}) {
    CAPTURE(as_float32);
    // Written as raw bytes: msgpack's own pack_double would hit the same fault on 2^64.
    const std::string raw = as_float32 ? std::string("\xca\x5f\x80\x00\x00", 5)
                                       : std::string("\xcb\x43\xf0\x00\x00\x00\x00\x00\x00", 9);
    const std::string frame = frame_with_body(MsgType::Registered,
                                              [&](auto& pk) {
                                                pk.pack_array(4);
                                                pk.pack(1);
                                                pk.pack(1000);
                                                pk.pack(3000);
                                              }) +
                              raw;
    auto m = proto::decode<proto::Registered>(frame);
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::Protocol);
    CHECK(contains(m.error().message, "Registered"));
    CHECK(contains(m.error().message, "2^64"));
  }
  // The largest double below 2^64 and very large floats still decode and re-encode.
  for (const double v : {18446744073709549568.0, 1e300, -1e300}) {
    CAPTURE(v);
    proto::Registered r;
    r.now_unix = v;
    auto m = proto::decode<proto::Registered>(proto::encode(r));
    REQUIRE(m.has_value());
    CHECK(m->now_unix == v);
  }
}

TEST_CASE("protocol.codec.rejects_huge_claimed_sizes_fast") {
  using namespace std::string_literals;
  struct Case {
    const char* name;
    std::string body;
  };
  const Case cases[] = {
      // TaskBatch [tasks] where tasks claims 2^32 - 1 elements (array32).
      {"array32 of 2^32-1", "\x91\xdd\xff\xff\xff\xff"s},
      // The outer array itself claims 2^32 - 1 elements.
      {"outer array32", "\xdd\xff\xff\xff\xff\x90"s},
      // A map claiming 2^32 - 1 pairs.
      {"map32", "\x91\xdf\xff\xff\xff\xff"s},
      // A string claiming 4 GiB.
      {"str32", "\x91\xdb\xff\xff\xff\xff"s},
      // bin32 claiming 4 GiB.
      {"bin32", "\x91\xc6\xff\xff\xff\xff"s},
      // Just over what the body could hold (7 bytes claiming 16 elements).
      {"array16 of 16", "\x91\xdc\x00\x10\xc0\xc0\xc0"s},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const std::string frame = header(MsgType::TaskBatch) + c.body;
    const auto t0 = std::chrono::steady_clock::now();
    auto m = proto::decode<proto::TaskBatch>(frame);
    const auto took = std::chrono::steady_clock::now() - t0;
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::Protocol);
    CHECK(contains(m.error().message, "TaskBatch"));
    // Refused by the unpack limits before any allocation, not by a failed allocation.
    CHECK_FALSE(contains(m.error().message, "too large to decode"));
    CHECK(took < std::chrono::milliseconds(100));
  }
}

TEST_CASE("protocol.codec.rejects_deep_nesting") {
  // 1000 nested arrays: refused by the depth limit, without exhausting the stack.
  std::string body(1000, '\x91');
  body.push_back('\xc0');
  auto m = proto::decode<proto::TaskBatch>(header(MsgType::TaskBatch) + body);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().code == ErrorCode::Protocol);
}

TEST_CASE("protocol.codec.element_limits_match_real_messages") {
  // Each element costs a 24-byte msgpack object whatever its bytes, so 100 MB
  // of nils took 2.4 GB. The elements a body declares are counted before anything is unpacked.
  auto all_nil = [](MsgType type, std::size_t n) {
    std::string body = header(type);
    body += "\x92\x01\xdd";  // [job_id, array32 of n]
    for (int shift = 24; shift >= 0; shift -= 8) body.push_back(static_cast<char>(n >> shift));
    body.append(n, '\xc0');
    return body;
  };
  SUBCASE("a SubmitTasks of nils beyond kMaxBatchElements is refused, fast") {
    const std::string frame = all_nil(MsgType::SubmitTasks, proto::kMaxBatchElements + 1);
    const auto t0 = std::chrono::steady_clock::now();
    auto m = proto::decode<proto::SubmitTasks>(frame);
    const auto took = std::chrono::steady_clock::now() - t0;
    REQUIRE_FALSE(m.has_value());
    CHECK(contains(m.error().message, "SubmitTasks: body: more than 8388608 elements"));
    CHECK(took < std::chrono::seconds(2));  // one scan, no allocation per element
  }
  SUBCASE("a control message holds a few thousand at most") {
    std::string frame = header(MsgType::Register);
    frame += "\x91\xdc\x27\x10";  // [array16 of 10000 nils]
    frame.append(10000, '\xc0');
    auto m = proto::decode<proto::Register>(frame);
    REQUIRE_FALSE(m.has_value());
    CHECK(contains(m.error().message, "Register: body: more than 4096 elements"));
  }
  SUBCASE("nested arrays count together") {
    // 20 arrays of 300 nils: each is small, together over the Register's 4096.
    std::string frame = header(MsgType::Register) + "\xdc" + std::string("\x00\x14", 2);
    for (int i = 0; i < 20; ++i) {
      frame += "\xdc" + std::string("\x01\x2c", 2);
      frame.append(300, '\xc0');
    }
    auto m = proto::decode<proto::Register>(frame);
    REQUIRE_FALSE(m.has_value());
    CHECK(contains(m.error().message, "more than 4096 elements"));
  }
  SUBCASE("real messages pass: a SubmitTasks of 100,000 items, many empty arrays") {
    proto::SubmitTasks st{7, {}};
    for (std::uint64_t i = 0; i < 100; ++i) {
      st.batches.push_back(proto::MiniBatch{i, std::vector<std::string>(1000, ""), ""});
    }
    for (std::uint64_t i = 100; i < 1100; ++i) st.batches.push_back(proto::MiniBatch{i, {}, ""});
    auto m = proto::decode<proto::SubmitTasks>(proto::encode(st));
    REQUIRE(m.has_value());
    CHECK(m->batches.size() == 1100);
    CHECK(m->batches[0].items.size() == 1000);
    proto::Heartbeat hb{9, true, std::vector<std::uint64_t>(1000, 5)};
    auto h = proto::decode<proto::Heartbeat>(proto::encode(hb));
    REQUIRE(h.has_value());
    CHECK(h->held.size() == 1000);
  }
}

// ---------------------------------------------------------------- forward compatibility

TEST_CASE("protocol.codec.ignores_extra_trailing_fields") {
  // A newer peer appended two fields to Register.
  const std::string frame = frame_with_body(MsgType::Register, [](auto& pk) {
    pk.pack_array(8);
    pk.pack(std::string("pool-a"));
    pk.pack(std::string("node-1"));
    pk.pack(8);
    pk.pack(2);
    pk.pack(std::string("fanout 0.2"));
    pk.pack(777);
    pk.pack(std::string("a future field"));
    pk.pack_map(0);
  });
  auto m = proto::decode<proto::Register>(frame);
  REQUIRE(m.has_value());
  CHECK(m->pool_name == "pool-a");
  CHECK(m->node == "node-1");
  CHECK(m->workers == 8);
  CHECK(m->prefetch == 2);
  CHECK(m->build == "fanout 0.2");
  CHECK(m->pid == 777);

  // Also inside a nested struct: a Task with a seventh field.
  const std::string batch = frame_with_body(MsgType::TaskBatch, [](auto& pk) {
    pk.pack_array(1);
    pk.pack_array(1);
    pk.pack_array(7);
    pk.pack(11);
    pk.pack(12);
    pk.pack(13);
    pk.pack(2);
    pk.pack_array(1);
    pk.pack(std::string("x.txt"));
    pk.pack(std::string("{}"));
    pk.pack(true);
  });
  auto b = proto::decode<proto::TaskBatch>(batch);
  REQUIRE(b.has_value());
  REQUIRE(b->tasks.size() == 1);
  CHECK(b->tasks[0].task_id == 11);
  CHECK(b->tasks[0].items == std::vector<std::string>{"x.txt"});
  CHECK(b->tasks[0].detail == "{}");
}

TEST_CASE("protocol.codec.missing_trailing_fields_keep_defaults") {
  // An older peer sent only the first three fields of JobSpec inside SubmitJob.
  const std::string frame = frame_with_body(MsgType::SubmitJob, [](auto& pk) {
    pk.pack_array(1);
    pk.pack_array(3);
    pk.pack(std::string("job"));
    pk.pack(std::string("/j.yaml"));
    pk.pack(std::string("command"));
  });
  auto m = proto::decode<proto::SubmitJob>(frame);
  REQUIRE(m.has_value());
  const proto::JobSpec defaults{};
  CHECK(m->spec.name == "job");
  CHECK(m->spec.spec_path == "/j.yaml");
  CHECK(m->spec.runtime == "command");
  CHECK(m->spec.code_dir.empty());
  CHECK(m->spec.max_tries == defaults.max_tries);
  CHECK(m->spec.error_threshold == defaults.error_threshold);
  CHECK(m->spec.mini_batch_error_threshold == defaults.mini_batch_error_threshold);
  CHECK(m->spec.allowed_failed_percent == defaults.allowed_failed_percent);

  // ResultBatch without its trailing capacity; a Task without attempt, items, detail.
  const std::string rb = frame_with_body(MsgType::ResultBatch, [](auto& pk) {
    pk.pack_array(1);
    pk.pack_array(0);
  });
  auto r = proto::decode<proto::ResultBatch>(rb);
  REQUIRE(r.has_value());
  CHECK(r->results.empty());
  CHECK(r->capacity == 0);

  const std::string tb = frame_with_body(MsgType::TaskBatch, [](auto& pk) {
    pk.pack_array(1);
    pk.pack_array(1);
    pk.pack_array(3);
    pk.pack(1);
    pk.pack(2);
    pk.pack(3);
  });
  auto t = proto::decode<proto::TaskBatch>(tb);
  REQUIRE(t.has_value());
  REQUIRE(t->tasks.size() == 1);
  CHECK(t->tasks[0].index == 3);
  CHECK(t->tasks[0].attempt == 1);  // its default
  CHECK(t->tasks[0].items.empty());
}

// ---------------------------------------------------------------- fuzz

TEST_CASE("protocol.codec.random_bodies_never_throw") {
  std::mt19937 rng(20240611);  // fixed seed: failures reproduce
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> type(1, 17);
  std::uniform_int_distribution<int> length(0, 64);
  int throws = 0;
  std::string first_throw;
  for (int i = 0; i < 10000; ++i) {
    std::string frame = header(proto::kProtocolVersion, static_cast<std::uint8_t>(type(rng)));
    const int n = length(rng);
    for (int k = 0; k < n; ++k) frame.push_back(static_cast<char>(byte(rng)));
    // Half the bodies start with a small array header, to get past the first check more often.
    if (n > 0 && i % 2 == 0) frame[proto::kHeaderBytes] = static_cast<char>(0x90 | (byte(rng) & 7));
    for_each_message(AllMessages{}, [&]<typename M>() {
      try {
        (void)proto::decode<M>(frame);  // a value or an Error; either is fine
      } catch (const std::exception& e) {
        if (throws++ == 0) first_throw = e.what();
      } catch (...) {
        if (throws++ == 0) first_throw = "non-std exception";
      }
    });
  }
  CHECK_MESSAGE(throws == 0, "first exception: ", first_throw);
}

TEST_CASE("protocol.codec.mutated_frames_never_throw") {
  // Single-byte mutations of valid frames reach deeper into the decoders than random bytes.
  proto::ResultBatch rb;
  rb.results.push_back(sample_result(1));
  const std::string frames[] = {proto::encode(sample_task_batch()), proto::encode(rb),
                                proto::encode(proto::JobInfo{1, sample_spec()}),
                                proto::encode(proto::JobEnded{1, "x", "y", sample_progress()})};
  std::mt19937 rng(7);
  int throws = 0;
  for (const auto& original : frames) {
    for (int i = 0; i < 2000; ++i) {
      std::string frame = original;
      const auto pos = proto::kHeaderBytes + rng() % (frame.size() - proto::kHeaderBytes);
      frame[pos] = static_cast<char>(rng() & 0xff);
      for_each_message(AllMessages{}, [&]<typename M>() {
        try {
          (void)proto::decode<M>(frame);
        } catch (...) {
          ++throws;
        }
      });
    }
  }
  CHECK(throws == 0);
}

// ---------------------------------------------------------------- ResourceSample

TEST_CASE("protocol.codec.resource_sample_round_trips") {
  static_assert(static_cast<int>(MsgType::ResourceSample) == 22);
  CHECK(proto::type_name(22) == "ResourceSample");
  proto::ResourceSample in;
  in.time = 1795000000.25;
  in.interval_s = 2.0;
  in.job_ids = {7, std::numeric_limits<std::uint64_t>::max()};
  in.node = proto::NodeUsage{37.5, 16000, 12000, 4000, 11, 22, 1.5, 2.5, 0.25, 0.75, 42, 3};
  in.processes = {proto::ProcessUsage{7, "process001", 4242, 99.5, 120.25, 5, 6, 0.5, 0.125},
                  proto::ProcessUsage{7, "process002", 4243, 0, 0, 0, 0, 0, 0}};
  in.disks = {proto::DiskUsage{"/", 100000, 40000, 60000, 40},
              proto::DiskUsage{"/data", 1, 0, 1, 0}};
  auto out = round_trip(in);
  CHECK(out.time == in.time);
  CHECK(out.interval_s == in.interval_s);
  CHECK(out.job_ids == in.job_ids);
  CHECK(out.node.cpu_percent == 37.5);
  CHECK(out.node.mem_total_mb == 16000);
  CHECK(out.node.mem_available_mb == 12000);
  CHECK(out.node.mem_used_mb == 4000);
  CHECK(out.node.disk_reads == 11);
  CHECK(out.node.disk_writes == 22);
  CHECK(out.node.disk_read_mb == 1.5);
  CHECK(out.node.disk_write_mb == 2.5);
  CHECK(out.node.net_sent_mb == 0.25);
  CHECK(out.node.net_recv_mb == 0.75);
  CHECK(out.node.tcp_connections == 42);
  CHECK(out.node.udp_connections == 3);
  REQUIRE(out.processes.size() == 2);
  CHECK(out.processes[0].job_id == 7);
  CHECK(out.processes[0].process == "process001");
  CHECK(out.processes[0].pid == 4242);
  CHECK(out.processes[0].cpu_percent == 99.5);
  CHECK(out.processes[0].rss_mb == 120.25);
  CHECK(out.processes[0].reads == 5);
  CHECK(out.processes[0].writes == 6);
  CHECK(out.processes[0].read_mb == 0.5);
  CHECK(out.processes[0].write_mb == 0.125);
  REQUIRE(out.disks.size() == 2);
  CHECK(out.disks[0].mount == "/");
  CHECK(out.disks[0].total_mb == 100000);
  CHECK(out.disks[0].used_mb == 40000);
  CHECK(out.disks[0].free_mb == 60000);
  CHECK(out.disks[0].used_percent == 40);
  CHECK(out.disks[1].mount == "/data");
  CHECK(out.gpus.empty());

  SUBCASE("gpus") {
    proto::ResourceSample g;
    g.gpus = {proto::GpuUsage{0, "GPU-aa", "NVIDIA H100", 31.5, 2048, 81559},
              proto::GpuUsage{3, "MIG-bb", "", 0, 0, 1}};
    auto o = round_trip(g);
    REQUIRE(o.gpus.size() == 2);
    CHECK(o.gpus[0].index == 0);
    CHECK(o.gpus[0].uuid == "GPU-aa");
    CHECK(o.gpus[0].name == "NVIDIA H100");
    CHECK(o.gpus[0].util_percent == 31.5);
    CHECK(o.gpus[0].mem_used_mb == 2048);
    CHECK(o.gpus[0].mem_total_mb == 81559);
    CHECK(o.gpus[1].index == 3);
    CHECK(o.gpus[1].uuid == "MIG-bb");
  }
  SUBCASE("defaults") {
    auto d = round_trip(proto::ResourceSample{});
    CHECK(d.job_ids.empty());
    CHECK(d.processes.empty());
    CHECK(d.gpus.empty());
  }
  SUBCASE("a wrong field type names the field") {
    const std::string frame = frame_with_body(MsgType::ResourceSample, [](auto& pk) {
      pk.pack_array(3);
      pk.pack(1.0);
      pk.pack(2.0);
      pk.pack(std::string("not a list"));
    });
    auto m = proto::decode<proto::ResourceSample>(frame);
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ErrorCode::Protocol);
    CHECK(contains(m.error().message, "ResourceSample"));
    CHECK(contains(m.error().message, "field 2"));
  }
}

// ---------------------------------------------------------------- PoolLeaving

TEST_CASE("protocol.codec.pool_leaving_round_trips") {
  static_assert(static_cast<int>(MsgType::PoolLeaving) == 23);
  auto out = round_trip(proto::PoolLeaving{"stopped by signal (SIGTERM)"});
  CHECK(out.reason == "stopped by signal (SIGTERM)");
  const std::string frame = proto::encode(proto::PoolLeaving{"x"});
  auto h = proto::read_header(frame);
  REQUIRE(h.has_value());
  CHECK(h->type == MsgType::PoolLeaving);
  // A body of the wrong shape is refused with the message's name.
  const std::string bad = frame_with_body(MsgType::PoolLeaving, [](auto& pk) { pk.pack(42); });
  auto m = proto::decode<proto::PoolLeaving>(bad);
  REQUIRE(!m.has_value());
  CHECK(contains(m.error().message, "PoolLeaving"));
}

// ---------------------------------------------------------------- MiniBatch.refused

TEST_CASE("protocol.codec.minibatch_refused_round_trips_and_an_older_client_sends_none") {
  proto::SubmitTasks in;
  in.job_id = 3;
  in.batches.push_back(proto::MiniBatch{0, {"/d/a"}, ""});
  proto::MiniBatch refused{1, {"/d/locked"}, "{}"};
  refused.refused = "/d/locked: opendir: Permission denied (EACCES)";
  in.batches.push_back(refused);
  auto out = round_trip(in);
  REQUIRE(out.batches.size() == 2);
  CHECK(out.batches[0].refused.empty());
  CHECK(out.batches[1].refused == refused.refused);
  CHECK(out.batches[1].items == refused.items);
  // Three fields, as a client before `refused` packs them: decoded, nothing refused.
  const std::string old = frame_with_body(MsgType::SubmitTasks, [](auto& pk) {
    pk.pack_array(2);
    pk.pack(std::uint64_t{3});
    pk.pack_array(1);
    pk.pack_array(3);
    pk.pack(std::uint64_t{0});
    pk.pack(std::vector<std::string>{"/d/a"});
    pk.pack(std::string("{}"));
  });
  auto m = proto::decode<proto::SubmitTasks>(old);
  REQUIRE(m.has_value());
  REQUIRE(m->batches.size() == 1);
  CHECK(m->batches[0].items == std::vector<std::string>{"/d/a"});
  CHECK(m->batches[0].refused.empty());
}

// ---------------------------------------------------------------- ReopenJob

TEST_CASE("protocol.codec.reopen_job_round_trips") {
  static_assert(static_cast<int>(MsgType::ReopenJob) == 24);
  auto out = round_trip(proto::ReopenJob{42});
  CHECK(out.job_id == 42);
  const std::string frame = proto::encode(proto::ReopenJob{7});
  auto h = proto::read_header(frame);
  REQUIRE(h.has_value());
  CHECK(h->type == MsgType::ReopenJob);
  // A body of the wrong shape is refused with the message's name.
  const std::string bad =
      frame_with_body(MsgType::ReopenJob, [](auto& pk) { pk.pack(std::string("x")); });
  auto m = proto::decode<proto::ReopenJob>(bad);
  REQUIRE(!m.has_value());
  CHECK(contains(m.error().message, "ReopenJob"));
  // Its refusal has a code of its own.
  CHECK(proto::reject_code(proto::make_reject(proto::RejectCode::ReopenRefused, "x")) ==
        proto::RejectCode::ReopenRefused);
}

TEST_CASE(
    "protocol.codec.reject_from_a_peer_before_the_code_field_reads_its_code_from_the_reason") {
  // Only the reason, as interchanges before the code field sent it.
  auto old_reject = [](const std::string& reason) {
    auto m = proto::decode<proto::Reject>(frame_with_body(MsgType::Reject, [&](auto& pk) {
      pk.pack_array(1);
      pk.pack(reason);
    }));
    REQUIRE(m.has_value());
    CHECK(m->code == 0);
    return proto::reject_code(*m);
  };
  CHECK(old_reject("SubmitJob: output_path: in use") == proto::RejectCode::JobRefused);
  CHECK(old_reject("Attach: job 7 is not known here") == proto::RejectCode::UnknownJob);
  CHECK(old_reject("SubmitTasks: job 7 is not running") == proto::RejectCode::JobNotRunning);
  CHECK(old_reject("Shutdown: deferred: jobs of other clients run here") ==
        proto::RejectCode::ShutdownDeferred);
  CHECK(old_reject("not registered: send Register") == proto::RejectCode::Unspecified);
}

TEST_CASE("protocol.codec.reject_code_steers_and_the_reason_text_does_not") {
  // A code wins over a reason that reads like another code's old prefix.
  CHECK(proto::reject_code(proto::make_reject(proto::RejectCode::UnknownJob, "SubmitJob: x")) ==
        proto::RejectCode::UnknownJob);
  // A code newer than this build is Unspecified, whatever the reason says.
  proto::Reject future{.reason = "Attach: job 1 is not known here", .code = 200};
  CHECK(proto::reject_code(future) == proto::RejectCode::Unspecified);
}

// ---------------------------------------------------------------- the direct decoders

namespace {

// decode() (the direct decoder where the type has one) and the generic path give the same M.
template <typename M>
void same_as_generic(const std::string& frame) {
  auto fast = proto::decode<M>(frame);
  auto generic = proto::detail::decode_generic<M>(std::string_view(frame).substr(2));
  REQUIRE(fast.has_value() == generic.has_value());
  if (fast) {
    CHECK(proto::encode(*fast) == proto::encode(*generic));
  } else {
    CHECK(fast.error().message == generic.error().message);
  }
}

}  // namespace

TEST_CASE("protocol.codec.direct_decoders_read_what_the_encoders_write") {
  // The hot messages, in every size class of their arrays and strings and at the ends of their
  // integer ranges, go through the direct decoder (no fallback), with the values the generic
  // path gives.
  proto::SubmitTasks st{std::numeric_limits<std::uint64_t>::max(), {}};
  for (std::uint64_t i = 0; i < 70000; i += (i < 20 ? 1 : 997)) {
    st.batches.push_back(proto::MiniBatch{i * 1000003, {"/data/a", std::string(40, 'p')}, ""});
  }
  st.batches.push_back(proto::MiniBatch{1, std::vector<std::string>(70000, "x"), "{}"});
  st.batches.push_back(
      proto::MiniBatch{2, {std::string(300, 'y'), std::string(70000, 'z')}, std::string(31, 'd')});
  st.batches.push_back(proto::MiniBatch{3, {}, std::string(32, 'd')});
  proto::TaskBatch tb;
  for (std::uint32_t i = 0; i < 17; ++i) {
    tb.tasks.push_back(proto::Task{i,
                                   2,
                                   i * 300,
                                   i == 0 ? std::numeric_limits<std::uint32_t>::max() : i,
                                   {std::string(i, 'q')},
                                   i % 2 ? "" : "{\"k\":1}"});
  }
  proto::ResultBatch rb;
  rb.capacity = 65536;
  for (std::int64_t pid :
       {std::int64_t{0}, std::int64_t{-1}, std::int64_t{-33}, std::int64_t{-200},
        std::int64_t{-70000}, std::int64_t{-5000000000}, std::numeric_limits<std::int64_t>::min(),
        std::int64_t{127}, std::int64_t{4000000000}, std::numeric_limits<std::int64_t>::max()}) {
    proto::TaskResult r;
    r.task_id = 1u << 31;
    r.job_id = 3;
    r.index = 255;
    r.attempt = 65535;
    r.status = 255;
    r.items = 65536;
    r.succeeded = 4294967295u;
    r.failed = 4294967296u;
    r.output = std::string(5000, 'o') + "\n";
    r.error_category = "UserError";
    r.error_message = "boom";
    r.node = "node-1";
    r.process = "process001";
    r.worker_pid = pid;
    r.start = 1.7e9 + 0.125;
    r.elapsed_s = -0.0;
    r.cpu_s = 1e-300;
    r.run_s = std::numeric_limits<double>::infinity();
    r.device = "0,1";
    r.cpus = "0-3";
    r.threads = 4;
    rb.results.push_back(r);
  }
  const std::string frames[] = {proto::encode(st), proto::encode(tb), proto::encode(rb)};
  const std::size_t limit = proto::kMaxBatchElements;
  proto::SubmitTasks st2;
  proto::TaskBatch tb2;
  proto::ResultBatch rb2;
  CHECK(proto::detail::fast_decode(std::string_view(frames[0]).substr(2), limit, st2));
  CHECK(proto::detail::fast_decode(std::string_view(frames[1]).substr(2), limit, tb2));
  CHECK(proto::detail::fast_decode(std::string_view(frames[2]).substr(2), limit, rb2));
  CHECK(proto::encode(st2) == frames[0]);
  CHECK(proto::encode(tb2) == frames[1]);
  CHECK(proto::encode(rb2) == frames[2]);
  same_as_generic<proto::SubmitTasks>(frames[0]);
  same_as_generic<proto::TaskBatch>(frames[1]);
  same_as_generic<proto::ResultBatch>(frames[2]);
  // Every prefix of a frame is refused, by both paths, with the same message.
  for (std::size_t n = 2; n < frames[1].size(); n += 7) {
    same_as_generic<proto::TaskBatch>(frames[1].substr(0, n));
  }
}

TEST_CASE("protocol.codec.shapes_the_direct_decoders_leave_to_the_generic_path") {
  using Pk = msgpack::packer<msgpack::sbuffer>;
  SUBCASE("a mini-batch of an older peer, without its detail") {
    const std::string f = frame_with_body(MsgType::SubmitTasks, [](Pk& pk) {
      pk.pack_array(2).pack(7).pack_array(1).pack_array(2).pack(5).pack_array(1).pack("/a");
    });
    proto::SubmitTasks direct;
    CHECK_FALSE(proto::detail::fast_decode(std::string_view(f).substr(2), 1000, direct));
    auto m = proto::decode<proto::SubmitTasks>(f);
    REQUIRE(m.has_value());
    REQUIRE(m->batches.size() == 1);
    CHECK(m->batches[0].index == 5);
    CHECK(m->batches[0].items == std::vector<std::string>{"/a"});
    CHECK(m->batches[0].detail.empty());
    same_as_generic<proto::SubmitTasks>(f);
  }
  SUBCASE("a field a newer peer appended") {
    const std::string f = frame_with_body(
        MsgType::TaskBatch, [](Pk& pk) { pk.pack_array(2).pack_array(0).pack("new"); });
    auto m = proto::decode<proto::TaskBatch>(f);
    REQUIRE(m.has_value());
    CHECK(m->tasks.empty());
    same_as_generic<proto::TaskBatch>(f);
  }
  SUBCASE("items as bin, an index as a signed integer") {
    const std::string f = frame_with_body(MsgType::SubmitTasks, [](Pk& pk) {
      pk.pack_array(2).pack(7).pack_array(1).pack_array(3);
      pk.pack_int8(9);  // non-negative in a signed encoding
      pk.pack_array(1).pack_bin(2).pack_bin_body("/b", 2);
      pk.pack("");
    });
    auto m = proto::decode<proto::SubmitTasks>(f);
    REQUIRE(m.has_value());
    CHECK(m->batches[0].index == 9);
    CHECK(m->batches[0].items == std::vector<std::string>{"/b"});
    same_as_generic<proto::SubmitTasks>(f);
  }
  SUBCASE("a status out of its u8 range: the generic path's error") {
    proto::ResultBatch rb;
    rb.results.resize(1);
    std::string f = proto::encode(rb);
    // The status (field 4 of the result) is the sixth byte of the body: 0x92 0x91 0xdc 0x00 0x16
    // starts the arrays, then task_id .. attempt, one byte each.
    REQUIRE(f.substr(2, 5) == std::string("\x92\x91\xdc\x00\x16", 5));
    REQUIRE(f[2 + 9] == '\x00');
    const std::string bad = f.substr(0, 2 + 9) + std::string("\xcd\x01\x00", 3) + f.substr(2 + 10);
    auto m = proto::decode<proto::ResultBatch>(bad);
    REQUIRE_FALSE(m.has_value());
    CHECK(contains(m.error().message, "ResultBatch: body:"));
    same_as_generic<proto::ResultBatch>(bad);
  }
  SUBCASE("a float equal to 2^64 is refused by both") {
    proto::ResultBatch rb;
    rb.results.resize(1);
    rb.results[0].start = 18446744073709551616.0;
    const std::string f = proto::encode(rb);
    auto m = proto::decode<proto::ResultBatch>(f);
    REQUIRE_FALSE(m.has_value());
    CHECK(contains(m.error().message, "2^64"));
    same_as_generic<proto::ResultBatch>(f);
  }
  SUBCASE("trailing bytes") {
    const std::string f = proto::encode(proto::TaskBatch{}) + "x";
    auto m = proto::decode<proto::TaskBatch>(f);
    REQUIRE_FALSE(m.has_value());
    CHECK(contains(m.error().message, "trailing bytes"));
    same_as_generic<proto::TaskBatch>(f);
  }
}
