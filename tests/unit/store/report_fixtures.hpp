// A store holding one finished job with attempts on two pools and resource samples, for the
// tests of the report views (store) and of the report files (report/). Header-only.
#pragma once

#include <string>
#include <vector>

#include "fanout/protocol/messages.hpp"
#include "fanout/store/db.hpp"
#include "fanout/store/task_store.hpp"
#include "fanout/util/log.hpp"

namespace fanout::test {

namespace proto = fanout::proto;

inline std::vector<std::string> column(const std::string& db_path, const std::string& sql) {
  fanout::store::Db db(db_path, fanout::store::Db::Mode::ReadOnly);
  fanout::store::Statement st(db, sql);
  std::vector<std::string> out;
  while (st.step()) out.emplace_back(st.column_text(0));
  return out;
}

inline fanout::store::AttemptRecord report_attempt(
    std::uint64_t task_id, std::uint64_t index, std::uint32_t try_no, proto::AttemptStatus status,
    const std::string& state, const std::string& pool, const std::string& process, double start) {
  fanout::store::AttemptRecord rec;
  rec.pool_id = pool == "pool-b" ? 2 : 1;
  rec.pool_name = pool;
  rec.minibatch_state = state;
  auto& r = rec.result;
  r.task_id = task_id;
  r.job_id = 1;
  r.index = index;
  r.attempt = try_no;
  r.status = static_cast<std::uint8_t>(status);
  r.items = 2;
  const bool ok = status == proto::AttemptStatus::RunDone;
  r.succeeded = ok ? 2 : 0;
  r.failed = ok ? 0 : 2;
  r.node = "node1";
  r.process = process;
  r.worker_pid = pool == "pool-b" ? 200 : 100;
  r.start = start;
  r.elapsed_s = 0.5;
  r.cpu_s = 0.25;
  r.run_s = 0.375;
  if (!ok) {
    r.error_category = "ValueError";
    r.error_message = "ValueError: bad \"row\", really\nTraceback (most recent call last):\n  ...";
  }
  return rec;
}

// A finished job 1 with three mini-batches, one failing once, two pools, and samples.
inline void make_report_store(const std::string& db) {
  fanout::store::TaskStore st(db, fanout::make_logger("report-test", spdlog::level::off));
  proto::JobSpec spec;
  spec.name = "report-demo";
  spec.spec_path = "/jobs/demo.yaml";
  spec.log_dir = "/jobs/logs";
  spec.settings_json = R"({"mini_batch_size":"2","prefetch":3,"timeout_s":1.5})";
  st.create_job(1, spec, 1700000000.0);
  st.add_minibatches(1, {proto::MiniBatch{0, {"a", "b"}, {}}, proto::MiniBatch{1, {"c", "d"}, {}},
                         proto::MiniBatch{2, {"e,1", "f"}, {}}});
  st.set_submit_done(1, 3);
  using S = proto::AttemptStatus;
  st.record_attempt(
      report_attempt(1, 0, 1, S::RunDone, "succeeded", "pool-a", "process001", 1700000001));
  st.record_attempt(
      report_attempt(2, 1, 1, S::RunException, "pending", "pool-b", "process001", 1700000001.5));
  st.record_attempt(
      report_attempt(3, 2, 1, S::RunDone, "succeeded", "pool-a", "process002", 1700000002));
  st.record_attempt(
      report_attempt(4, 1, 2, S::RunDone, "succeeded", "pool-b", "process001", 1700000003));
  for (int i = 0; i < 4; ++i) {
    fanout::store::ResourceRecord rr;
    rr.pool_id = 1;
    rr.pool_name = "pool-a";
    rr.node = "node1";
    rr.job_ids = {1};
    rr.sample.time = 1700000001.0 + i;
    rr.sample.interval_s = 1.0;
    rr.sample.node.cpu_percent = 10.0 * i;
    rr.sample.node.mem_total_mb = 1000;
    rr.sample.processes = {proto::ProcessUsage{1, "process001", 100, 50, 20, 3, 4, 0, 0},
                           proto::ProcessUsage{9, "process002", 101, 50, 20, 3, 4, 0, 0}};
    rr.sample.disks = {proto::DiskUsage{"/", 100, 40, 60, 40}};
    st.record_resources(rr);
  }
  st.finish_job(1, "succeeded", "all mini-batches succeeded", 1700000004.0);
  st.flush();
}

}  // namespace fanout::test
