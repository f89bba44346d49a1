// Shared by the store's unit tests: a quiet logger, raw SQL on a store file, and builders for
// the job specs, mini-batches and attempts they record. Header-only.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "fanout/protocol/messages.hpp"
#include "fanout/store/db.hpp"
#include "fanout/store/records.hpp"
#include "fanout/util/log.hpp"

namespace fanout::test {

using store::AttemptRecord;
using store::Db;
using store::Statement;

inline fanout::Logger quiet_logger() {
  return fanout::make_logger("store-test", spdlog::level::off);
}

inline void append(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << bytes;
}

// Raw SQL on a store file, as a user's sqlite3 session would run it.
inline std::int64_t sql_int(const std::string& db_path, const std::string& sql) {
  Db db(db_path, Db::Mode::ReadOnly);
  Statement st(db, sql);
  REQUIRE_MESSAGE(st.step(), sql);
  return st.column_int64(0);
}

inline std::string sql_text(const std::string& db_path, const std::string& sql) {
  Db db(db_path, Db::Mode::ReadOnly);
  Statement st(db, sql);
  REQUIRE_MESSAGE(st.step(), sql);
  return std::string(st.column_text(0));
}

inline proto::JobSpec make_spec(const std::string& output_path) {
  proto::JobSpec spec;
  spec.name = "demo";
  spec.spec_path = "/jobs/demo.yaml";
  spec.runtime = "python";
  spec.entry_script = "score.py";
  spec.output_path = output_path;
  spec.log_dir = "/jobs/logs";
  spec.max_tries = 3;
  spec.settings_json = R"({"mini_batch_size": "2"})";
  spec.args = {"--model", "m.pkl"};
  return spec;
}

inline proto::MiniBatch make_batch(std::uint64_t index, std::vector<std::string> items,
                                   std::string detail = {}) {
  return proto::MiniBatch{index, std::move(items), std::move(detail)};
}

inline AttemptRecord make_attempt(std::uint64_t task_id, std::uint64_t job_id, std::uint64_t index,
                                  std::uint32_t attempt, proto::AttemptStatus status,
                                  std::string minibatch_state, std::string output = {},
                                  bool write_output = false) {
  AttemptRecord rec;
  rec.pool_id = 7;
  rec.pool_name = "pool-a";
  rec.minibatch_state = std::move(minibatch_state);
  rec.write_output = write_output;
  auto& r = rec.result;
  r.task_id = task_id;
  r.job_id = job_id;
  r.index = index;
  r.attempt = attempt;
  r.status = static_cast<std::uint8_t>(status);
  r.items = 2;
  const bool ok = status == proto::AttemptStatus::RunDone;
  r.succeeded = ok ? 2 : 0;
  r.failed = ok ? 0 : 2;
  r.rows = static_cast<std::uint64_t>(std::count(output.begin(), output.end(), '\n'));
  r.output = std::move(output);
  r.node = "node1";
  r.process = "process001";
  r.worker_pid = 4242;
  r.start = 1700000000.5;
  r.elapsed_s = 0.25;
  r.cpu_s = 0.125;
  r.run_s = 0.2;
  if (!ok) {
    r.error_category = "RUN_EXCEPTION";
    r.error_message = "ValueError: bad \"row\"";
  }
  return rec;
}

// Polls `pred` until true, for up to 20 s.
inline bool wait_for(const std::function<bool()>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Polls `sql` (one integer) on the store file until it returns `want`, for up to 20 s.
inline bool wait_for_int(const std::string& path, const std::string& sql, std::int64_t want) {
  return wait_for([&] { return sql_int(path, sql) == want; });
}

// One snapshot of what a crash would leave: 1 when the job's minibatches rows are exactly the
// indexes 0 .. count-1 and each has its minibatch_inputs row.
inline constexpr const char* kCommittedIsPrefix =
    "SELECT count(*) = coalesce(max(id) + 1, 0) AND "
    "count(*) = (SELECT count(*) FROM minibatch_inputs WHERE job_id = 1) "
    "FROM minibatches WHERE job_id = 1";

}  // namespace fanout::test
