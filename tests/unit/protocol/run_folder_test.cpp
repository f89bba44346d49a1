// Tests of the run folder's one name (src/fanout/protocol/run_folder.hpp).
#include "fanout/protocol/run_folder.hpp"

#include <doctest/doctest.h>

using fanout::proto::run_folder_name;

namespace {
constexpr std::time_t kNov25 = 1764114896;  // 2025-11-25 23:54:56 UTC
}

TEST_CASE("protocol.run_folder.is_job_then_utc_stamp_then_pid") {
  CHECK(run_folder_name("score", kNov25, 4242) == "score-20251125-235456-4242");
}

TEST_CASE("protocol.run_folder.appends_the_serial_when_one_process_makes_several") {
  CHECK(run_folder_name("score", kNov25, 4242, 3) == "score-20251125-235456-4242-3");
}

TEST_CASE("protocol.run_folder.sanitises_the_job_name_into_one_path_component") {
  CHECK(run_folder_name("a/b c..d", kNov25, 1) == "a_b_c__d-20251125-235456-1");
  CHECK(run_folder_name("../../etc", kNov25, 1) == "______etc-20251125-235456-1");
  CHECK(run_folder_name("ok-Name_9", kNov25, 1) == "ok-Name_9-20251125-235456-1");
}

TEST_CASE("protocol.run_folder.names_a_nameless_job_job") {
  CHECK(run_folder_name("", kNov25, 1) == "job-20251125-235456-1");
}
