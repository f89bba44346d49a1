// Tests for store::read_job_status (src/fanout/store/job_status.hpp): counts, pools, last
// errors, and the errors it returns.
#include "fanout/store/job_status.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fanout/util/error.hpp"

#include "report_fixtures.hpp"
#include "scratch_dir.hpp"

using fanout::ErrorCode;
using fanout::test::make_report_store;
using fanout::test::ScratchDir;
namespace store = fanout::store;

TEST_CASE("store.job_status.reads_pools_and_last_errors") {
  ScratchDir dir;
  const std::string db = dir.file("fanout.db");
  make_report_store(db);
  auto s = store::read_job_status(db, 1);
  REQUIRE(s.has_value());
  CHECK(s->state == "succeeded");
  CHECK(s->total == 3);
  CHECK(s->succeeded == 3);
  CHECK(s->attempts == 4);
  CHECK(s->attempts_failed == 1);
  CHECK(s->processes == 3);
  CHECK(s->pools.size() == 2);
  REQUIRE(s->last_errors.size() == 1);
  CHECK(s->last_errors[0].minibatch == 1);
  CHECK(s->last_errors[0].message == "ValueError: bad \"row\", really");
  CHECK(s->eta_s == -1);
}

TEST_CASE("store.job_status.unknown_job_is_not_found") {
  ScratchDir dir;
  auto missing = store::read_job_status(dir.file("nope.db"), 1);
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == ErrorCode::NotFound);
  CHECK(missing.error().message.find("nope.db") != std::string::npos);
  const std::string db = dir.file("fanout.db");
  make_report_store(db);
  auto status = store::read_job_status(db, 42);
  REQUIRE_FALSE(status.has_value());
  CHECK(status.error().code == ErrorCode::NotFound);
}

TEST_CASE("store.job_status.real_errors_before_cancellations") {
  // A job's end records its running attempts CANCELLED, after the error that ended it: status
  // shows the real error first, and first_error is never a cancellation.
  ScratchDir dir;
  const std::string db = dir.file("fanout.db");
  {
    fanout::store::TaskStore st(db, fanout::make_logger("status-test", spdlog::level::off));
    fanout::proto::JobSpec spec;
    spec.name = "cancelled-late";
    st.create_job(1, spec, 1700000000.0);
    st.add_minibatches(
        1, {fanout::proto::MiniBatch{0, {"a"}, {}}, fanout::proto::MiniBatch{1, {"b"}, {}}});
    using S = fanout::proto::AttemptStatus;
    st.record_attempt(fanout::test::report_attempt(1, 0, 1, S::RunException, "failed", "pool-a",
                                                   "process001", 1700000001));
    auto stopped = fanout::test::report_attempt(2, 1, 1, S::Cancelled, "pending", "pool-a",
                                                "process002", 1700000002);
    stopped.result.error_category = "CANCELLED";
    stopped.result.error_message = "stopped: the job failed: mini_batch_error_threshold exceeded";
    st.record_attempt(std::move(stopped));
    st.finish_job(1, "failed", "mini_batch_error_threshold exceeded", 1700000003.0);
  }
  auto s = store::read_job_status(db, 1);
  REQUIRE(s.has_value());
  CHECK(s->attempts == 2);
  CHECK(s->attempts_failed == 2);  // the one count: every attempt that is not RUN_DONE
  REQUIRE(s->last_errors.size() == 2);
  CHECK(s->last_errors[0].status == "RUN_EXCEPTION");  // newer CANCELLED comes after it
  CHECK(s->last_errors[1].status == "CANCELLED");
  REQUIRE(s->first_error.has_value());
  CHECK(s->first_error->status == "RUN_EXCEPTION");
  CHECK(s->first_error->minibatch == 0);
}
