// Garbage, truncated, wrong-type and wrong-version frames sent to both interchange ports: the
// interchange stays up, answers a wrong-version Register with Reject, and a real job submitted
// afterwards through `fanout run --interchange` completes.
#include <doctest/doctest.h>

#include <filesystem>
#include <optional>
#include <random>

#include "fanout/protocol/codec.hpp"
#include "job_fixture.hpp"
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
  JobSpec job;
  job.name = "after-garbage";
  job.mini_batch_size = "4";
  job.concurrency.reset();
  make_echo_job(dir.path(), 40, job);
  auto r = run_capture(run_argv(dir / "job.yaml", "", cl.client_ep), dir.path(),
                       {{"FANOUT_TEST", "1"}}, std::chrono::seconds(120));
  INFO("client stderr:\n" << r.err << cl.logs());
  REQUIRE(r.status.code == 0);
  CHECK(read_lines(dir / "out.txt").size() == 40);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 10);
  CHECK(!cl.interchange.poll().has_value());
  // The garbage was counted, not fatal: the interchange logged the first bad frame once.
  CHECK(read_text(cl.ix_log).find("dropped a bad frame") != std::string::npos);
}

// Hostile pools: after a real job, a hand-made pool registers twice and sends results
// for tasks it never held (a real succeeded task's id, with rows, and ids that never existed);
// another peer sends results without registering. Nothing is written, the output keeps each row
// once, the duplicate registration is answered with a fresh one, the unregistered peer is told to
// register, and the interchange serves on.
TEST_CASE("integration.hostile_frames.forged_results_and_duplicate_registrations") {
  TempDir dir("hostile-pool");
  const std::string db = dir / "fanout.db";
  Cluster cl;
  cl.start_interchange(dir.path(), db);
  cl.start_pool(dir.path(), "pool-a", 2);
  JobSpec job;
  job.name = "forged";
  job.mini_batch_size = "3";
  job.concurrency.reset();
  make_echo_job(dir.path(), 12, job);
  auto run_job = [&] {
    return run_capture(run_argv(dir / "job.yaml", db, cl.client_ep), dir.path(), {},
                       std::chrono::seconds(120));
  };
  auto r = run_job();
  INFO("client stderr:\n" << r.err << cl.logs());
  REQUIRE(r.status.code == 0);
  REQUIRE(read_lines(dir / "out.txt").size() == 12);
  const auto real_task = sql_int(db, "select min(id) from attempts where status='RUN_DONE'");

  auto forged = [&](std::uint64_t task_id, std::uint64_t job_id, std::uint64_t index) {
    proto::TaskResult t;
    t.task_id = task_id;
    t.job_id = job_id;
    t.index = index;
    t.status = static_cast<std::uint8_t>(proto::AttemptStatus::RunDone);
    t.items = 3;
    t.succeeded = 3;
    t.rows = 1;
    t.output = "EVIL ROW\n";
    return proto::encode(proto::ResultBatch{{t}, 1});
  };
  auto wait_for_type = [](RawDealer& s, proto::MsgType type) {
    for (int k = 0; k < 50; ++k) {
      auto reply = s.recv_within(5000);
      if (reply.empty()) return std::string();
      auto h = proto::read_header(reply);
      if (h && h->type == type) return reply;
    }
    return std::string();
  };

  RawDealer evil(cl.pool_ep);
  evil.send(proto::encode(proto::Register{"evil-pool", "nowhere", 1, 0, "x", 1}));
  auto first = proto::decode<proto::Registered>(wait_for_type(evil, proto::MsgType::Registered));
  REQUIRE(first.has_value());
  // Results for tasks it does not hold: a real finished one, unknown ids, an unknown job.
  evil.send(forged(static_cast<std::uint64_t>(real_task), 1, 0));
  evil.send(forged(987654321, 1, 2));
  evil.send(forged(987654322, 4242, 0));
  // The same Register again (as a pool queues while the interchange is away): the same answer.
  evil.send(proto::encode(proto::Register{"evil-pool", "nowhere", 1, 0, "x", 1}));
  auto same = proto::decode<proto::Registered>(wait_for_type(evil, proto::MsgType::Registered));
  REQUIRE(same.has_value());
  CHECK(same->pool_id == first->pool_id);
  // A registration from a restarted process (another pid): the old one is dropped, a new one
  // made.
  evil.send(proto::encode(proto::Register{"evil-pool", "nowhere", 1, 0, "x", 2}));
  auto second = proto::decode<proto::Registered>(wait_for_type(evil, proto::MsgType::Registered));
  REQUIRE(second.has_value());
  CHECK(second->pool_id != first->pool_id);

  // A peer that never registered is told to.
  RawDealer stranger(cl.pool_ep);
  stranger.send(forged(static_cast<std::uint64_t>(real_task), 1, 0));
  auto rej = proto::decode<proto::Reject>(wait_for_type(stranger, proto::MsgType::Reject));
  REQUIRE(rej.has_value());
  CHECK(rej->reason.find("not registered") != std::string::npos);
  // A client that submits to a job that is not running is refused.
  RawDealer client(cl.client_ep);
  client.send(proto::encode(proto::SubmitTasks{4242, {proto::MiniBatch{0, {"x"}, ""}}}));
  auto crej = proto::decode<proto::Reject>(wait_for_type(client, proto::MsgType::Reject));
  REQUIRE(crej.has_value());
  CHECK(crej->reason.find("job 4242") != std::string::npos);

  // Nothing forged was written.
  CHECK(!cl.interchange.poll().has_value());
  CHECK(read_lines(dir / "out.txt").size() == 12);
  CHECK(read_text(dir / "out.txt").find("EVIL") == std::string::npos);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 4);
  // The registrations reach the store with its next group commit (up to 20 ms later).
  CHECK(wait_until(
      [&] {
        return sql_int(db, "select count(*) from pools where name='evil-pool'") == 1 &&
               sql_int(db, "select registrations from pools where name='evil-pool'") == 2;
      },
      std::chrono::seconds(10)));

  // Still serving: the same job again, into a fresh output, on the real pool. The evil pool
  // would hold tasks without answering; a Register with no workers ends its registration (and
  // is refused). Were a task sent to it first, the pool's loss would requeue it: the rows are
  // checked, not the time.
  evil.send(proto::encode(proto::Register{"evil-pool", "nowhere", 0, 0, "x", 1}));
  auto refused = proto::decode<proto::Reject>(wait_for_type(evil, proto::MsgType::Reject));
  REQUIRE(refused.has_value());
  CHECK(refused->reason.find("workers") != std::string::npos);
  std::filesystem::remove(dir / "out.txt");
  r = run_job();
  INFO("second run:\n" << r.err);
  CHECK(r.status.code == 0);
  CHECK(read_lines(dir / "out.txt").size() == 12);
}

// What a client resubmitting after an interchange restart relies on: mini-batches are
// accepted in input order only, so duplicates and gaps are dropped, never recorded twice, and a
// SubmitEnd whose total disagrees is refused with the count the interchange has.
TEST_CASE("integration.hostile_frames.resubmitted_and_out_of_order_minibatches") {
  TempDir dir("resubmit");
  const std::string db = dir / "fanout.db";
  Cluster cl;
  cl.start_interchange(dir.path(), db);
  RawDealer client(cl.client_ep);
  auto next_of = [&](proto::MsgType type) {
    for (int k = 0; k < 50; ++k) {
      auto reply = client.recv_within(5000);
      if (reply.empty()) return std::string();
      auto h = proto::read_header(reply);
      if (h && h->type == type) return reply;
    }
    return std::string();
  };
  proto::JobSpec spec;
  spec.name = "resubmit";
  spec.runtime = "python";
  spec.code_dir = dir.path();  // a spec the interchange accepts (it checks the folder exists)
  client.send(proto::encode(proto::SubmitJob{spec}));
  auto acc = proto::decode<proto::JobAccepted>(next_of(proto::MsgType::JobAccepted));
  REQUIRE(acc.has_value());
  const auto job = acc->job_id;
  auto batches = [](std::uint64_t from, std::uint64_t to) {
    std::vector<proto::MiniBatch> v;
    for (auto i = from; i < to; ++i)
      v.push_back(proto::MiniBatch{i, {"f" + std::to_string(i)}, ""});
    return v;
  };
  client.send(proto::encode(proto::SubmitTasks{job, batches(0, 3)}));
  client.send(proto::encode(proto::SubmitTasks{job, batches(5, 7)}));  // a gap: dropped
  client.send(proto::encode(proto::SubmitTasks{job, batches(1, 5)}));  // 1, 2 again: dropped
  client.send(proto::encode(proto::SubmitEnd{job, 7}));                // 5 known: refused
  client.send(proto::encode(proto::Attach{job}));
  std::optional<proto::JobProgress> p;
  // The refused SubmitEnd and the Attach are each answered with a JobProgress.
  for (int k = 0; k < 10 && (!p || p->submitted != 5); ++k) {
    auto m = proto::decode<proto::JobProgress>(next_of(proto::MsgType::JobProgress));
    if (!m) break;
    p = *m;
  }
  REQUIRE(p.has_value());
  CHECK(p->submitted == 5);
  CHECK(p->total == 0);  // SubmitEnd was not taken
  CHECK(p->instance != 0);
  // The client resends from 5 and ends again.
  client.send(proto::encode(proto::SubmitTasks{job, batches(5, 7)}));
  client.send(proto::encode(proto::SubmitEnd{job, 7}));
  CHECK(wait_until(
      [&] { return sql_int(db, "select total from jobs where id=" + std::to_string(job)) == 7; },
      std::chrono::seconds(30)));
  CHECK(sql_int(db, "select count(*) from minibatches") == 7);
  CHECK(sql_int(db, "select count(distinct id) from minibatches") == 7);
  CHECK(sql_int(db, "select max(id) from minibatches") == 6);
  CHECK(!cl.interchange.poll().has_value());
}
