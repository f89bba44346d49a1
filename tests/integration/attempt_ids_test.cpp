// attempts.id is the task id the pool saw (docs/architecture.md), for the attempts the
// interchange records itself too: a hand-made pool takes two tasks and restarts (registers again
// with another pid), and the POOL_LOST attempts carry the ids of the tasks it was sent. (A pool
// that leaves with PoolLeaving hands its tasks back without attempts: it_multihost.)
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fanout/protocol/codec.hpp"
#include "harness.hpp"
#include "raw_peer.hpp"

using namespace fanout::test;
namespace proto = fanout::proto;

namespace {

// The next frame of `type` from `peer`, or "" after 50 frames or 5 s of silence.
std::string next_of(RawDealer& peer, proto::MsgType type) {
  for (int k = 0; k < 50; ++k) {
    auto reply = peer.recv_within(5000);
    if (reply.empty()) return {};
    auto h = proto::read_header(reply);
    if (h && h->type == type) return reply;
  }
  return {};
}

}  // namespace

TEST_CASE("interchange.issue_15.lost_attempt_keeps_its_task_id") {
  TempDir dir("attempt-ids");
  const std::string db = dir / "fanout.db";
  Cluster cl;
  cl.start_interchange(dir.path(), db);

  RawDealer client(cl.client_ep);
  proto::JobSpec spec;
  spec.name = "attempt-ids";
  spec.runtime = "python";
  spec.code_dir = dir.path();
  client.send(proto::encode(proto::SubmitJob{spec}));
  auto acc = proto::decode<proto::JobAccepted>(next_of(client, proto::MsgType::JobAccepted));
  REQUIRE(acc.has_value());
  const auto job = acc->job_id;
  std::vector<proto::MiniBatch> batches{{0, {"a"}, ""}, {1, {"b"}, ""}};
  client.send(proto::encode(proto::SubmitTasks{job, batches}));
  client.send(proto::encode(proto::SubmitEnd{job, 2}));

  RawDealer pool(cl.pool_ep);
  proto::Register reg;
  reg.pool_name = "hand-made";
  reg.node = "here";
  reg.workers = 2;
  reg.pid = 4242;
  pool.send(proto::encode(reg));
  REQUIRE(proto::decode<proto::Registered>(next_of(pool, proto::MsgType::Registered)));
  std::vector<std::uint64_t> seen;
  while (seen.size() < 2) {
    auto batch = proto::decode<proto::TaskBatch>(next_of(pool, proto::MsgType::TaskBatch));
    REQUIRE(batch.has_value());
    for (const auto& t : batch->tasks) seen.push_back(t.task_id);
  }
  reg.pid = 4243;  // the same pool name from a new process: the old registration is lost
  pool.send(proto::encode(reg));

  REQUIRE(wait_until(
      [&] { return sql_int(db, "select count(*) from attempts where status='POOL_LOST'") == 2; },
      std::chrono::seconds(30)));
  auto lost = sql_column(db, "select id from attempts where status='POOL_LOST' order by id");
  std::vector<std::uint64_t> lost_ids;
  for (const auto& s : lost) lost_ids.push_back(std::stoull(s));
  std::sort(seen.begin(), seen.end());
  CHECK(lost_ids == seen);
  CHECK(!cl.interchange.poll().has_value());
}
