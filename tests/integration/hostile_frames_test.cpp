// Garbage, truncated, wrong-type and wrong-version frames sent to both interchange ports: the
// interchange stays up, answers a wrong-version Register with Reject, and a real job submitted
// afterwards through `fanout run --interchange` completes.
#include <doctest/doctest.h>

#include <random>

#include "fanout/protocol/codec.hpp"
#include "harness.hpp"
#include "raw_peer.hpp"

using namespace fanout::test;
namespace proto = fanout::proto;

namespace {

std::string frame_of(std::uint8_t version, std::uint8_t type, const std::string& body) {
  std::string f;
  f.push_back(static_cast<char>(version));
  f.push_back(static_cast<char>(type));
  return f + body;
}

}  // namespace

TEST_CASE("integration.hostile_frames.interchange_survives_and_serves") {
  TempDir dir("hostile");
  const std::string db = dir / "fanout.db";
  Cluster cl;
  cl.start_interchange(dir.path(), db);

  std::mt19937 rng(42);
  for (const std::string& ep : {cl.client_ep, cl.pool_ep}) {
    CAPTURE(ep);
    RawDealer s(ep);
    std::vector<std::string> frames = {
        "",
        "x",
        frame_of(proto::kProtocolVersion, 0, ""),
        frame_of(proto::kProtocolVersion, 250, "abc"),
        frame_of(proto::kProtocolVersion, static_cast<std::uint8_t>(proto::MsgType::TaskBatch),
                 "\x91\xdd\xff\xff\xff\xff"),  // claims a 4G-element array
        frame_of(proto::kProtocolVersion, static_cast<std::uint8_t>(proto::MsgType::SubmitTasks),
                 "\x92\xa3"
                 "abc"),  // wrong type for job_id, truncated
        frame_of(proto::kProtocolVersion, static_cast<std::uint8_t>(proto::MsgType::ResultBatch),
                 "\xc1"),  // never-used msgpack byte
    };
    for (int i = 0; i < 300; ++i) {
      std::string f(rng() % 64, '\0');
      for (auto& c : f) c = static_cast<char>(rng());
      if (f.size() >= 2 && (i % 2) == 0) {
        f[0] = static_cast<char>(proto::kProtocolVersion);
        f[1] = static_cast<char>(1 + rng() % 17);
      }
      frames.push_back(f);
    }
    for (const auto& f : frames) s.send(f);
    // A multipart message is drained and dropped too.
    s.send_multipart({"part1", "part2"});

    // Wrong version on a Register (pool port) or SubmitJob (client port) gets a Reject.
    const auto type = ep == cl.pool_ep ? proto::MsgType::Register : proto::MsgType::Heartbeat;
    std::string wrong = proto::encode(proto::Register{"evil", "node", 1, 0, "x", 1});
    wrong[0] = static_cast<char>(proto::kProtocolVersion + 7);
    wrong[1] = static_cast<char>(type);
    s.send(wrong);
    if (ep == cl.pool_ep) {
      // Skip any replies to the garbage (an unregistered peer is told to register).
      bool got_version_reject = false;
      for (int k = 0; k < 400 && !got_version_reject; ++k) {
        auto reply = s.recv_within(5000);
        if (reply.empty()) break;
        auto rej = proto::decode<proto::Reject>(reply);
        if (rej && rej->reason.find("version") != std::string::npos) got_version_reject = true;
      }
      CHECK(got_version_reject);
    } else {
      // Frames on one connection arrive in order: once an Attach for an unknown job is answered,
      // the interchange has read (and survived) every garbage frame before it.
      // A Shutdown without the token, and a SubmitJob whose spec cannot run, are refused.
      s.send(proto::encode(proto::Shutdown{"stop", "not-the-token"}));
      proto::JobSpec evil;
      evil.name = "evil";
      evil.runtime = "python";
      evil.code_dir = "relative/dir";
      s.send(proto::encode(proto::SubmitJob{evil}));
      bool refused = false;
      for (int k = 0; k < 400 && !refused; ++k) {
        auto reply = s.recv_within(5000);
        if (reply.empty()) break;
        auto rej = proto::decode<proto::Reject>(reply);
        if (rej && rej->reason.find("SubmitJob: code_dir") != std::string::npos) refused = true;
      }
      CHECK(refused);
      s.send(proto::encode(proto::Attach{987654}));
      bool answered = false;
      for (int k = 0; k < 400 && !answered; ++k) {
        auto reply = s.recv_within(5000);
        if (reply.empty()) break;
        auto rej = proto::decode<proto::Reject>(reply);
        if (rej && rej->reason.find("987654") != std::string::npos) answered = true;
      }
      CHECK(answered);
    }
  }
  // Still alive.
  CHECK(!cl.interchange.poll().has_value());

  // A real pool and a real job still work.
  cl.start_pool(dir.path(), "pool-a", 2);
  make_files(dir / "data", 40);
  write_file(
      dir / "src/score.py",
      "import os\ndef run(mini_batch):\n    return [os.path.basename(p) for p in mini_batch]\n");
  write_file(dir / "job.yaml", R"(type: parallel
name: after-garbage
inputs:
  files: {type: uri_folder, path: ./data}
outputs:
  out: {type: uri_file, path: ./out.txt}
input_data: ${{inputs.files}}
mini_batch_size: "4"
task:
  type: run_function
  code: ./src
  entry_script: score.py
  append_row_to: ${{outputs.out}}
)");
  auto r = run_capture({fanout_bin(), "run", dir / "job.yaml", "--interchange", cl.client_ep,
                        "--python", python_bin(), "--quiet"},
                       dir.path(), {{"FANOUT_TEST", "1"}}, std::chrono::seconds(120));
  INFO("client stderr:\n" << r.err << cl.logs());
  REQUIRE(r.status.code == 0);
  CHECK(read_lines(dir / "out.txt").size() == 40);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 10);
  CHECK(!cl.interchange.poll().has_value());
  // The garbage was counted, not fatal: the interchange logged the first bad frame once.
  CHECK(read_text(cl.ix_log).find("dropped a bad frame") != std::string::npos);
}
