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
