// Tests of the job state's one spelling (src/fanout/protocol/job_state.hpp).
#include "fanout/protocol/job_state.hpp"

#include <doctest/doctest.h>

using fanout::proto::JobState;

TEST_CASE("protocol.job_state.round_trips_every_state") {
  for (JobState s : {JobState::Running, JobState::Succeeded, JobState::Partial, JobState::Failed,
                     JobState::Cancelled}) {
    CHECK(fanout::proto::parse_job_state(fanout::proto::to_string(s)) == s);
  }
  CHECK(fanout::proto::to_string(JobState::Cancelled) == "cancelled");
  CHECK(fanout::proto::to_string(JobState::Partial) == "partial");
}

TEST_CASE("protocol.job_state.rejects_other_strings") {
  for (const char* s : {"", "Running", "succeeded ", "pending", "Partial"}) {
    CAPTURE(s);
    CHECK_FALSE(fanout::proto::parse_job_state(s).has_value());
  }
}

TEST_CASE("protocol.job_state.only_running_is_unended") {
  CHECK_FALSE(fanout::proto::is_ended(JobState::Running));
  CHECK(fanout::proto::is_ended(JobState::Succeeded));
  CHECK(fanout::proto::is_ended(JobState::Partial));
  CHECK(fanout::proto::is_ended(JobState::Failed));
  CHECK(fanout::proto::is_ended(JobState::Cancelled));
}
