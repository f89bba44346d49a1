// Tests of the helpers beside the message catalogue (src/fanout/protocol/messages.hpp).
#include "fanout/protocol/messages.hpp"

#include <doctest/doctest.h>

namespace proto = fanout::proto;

TEST_CASE("protocol.messages.failed_result_fails_every_item_of_the_task") {
  proto::Task t{.task_id = 41, .job_id = 3, .index = 7, .attempt = 2, .items = {"a", "b", "c"}};
  const proto::TaskResult r =
      proto::failed_result(t, proto::AttemptStatus::WorkerLost, "WORKER_LOST", "killed by 9");
  CHECK(r.task_id == 41);
  CHECK(r.job_id == 3);
  CHECK(r.index == 7);
  CHECK(r.attempt == 2);
  CHECK(r.status == static_cast<std::uint8_t>(proto::AttemptStatus::WorkerLost));
  CHECK(r.items == 3);
  CHECK(r.failed == 3);
  CHECK(r.succeeded == 0);
  CHECK(r.rows == 0);
  CHECK(r.output.empty());
  CHECK(r.error_category == "WORKER_LOST");
  CHECK(r.error_message == "killed by 9");
}
