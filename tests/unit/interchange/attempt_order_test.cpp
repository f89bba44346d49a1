// Tests for AttemptOrder (interchange/attempt_order.hpp), read as its specification: the order
// in which the report thread hands committed attempts on to the reports it builds while their
// jobs run.
#include "interchange/attempt_order.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

using fanout::ix::AttemptOrder;
using fanout::store::CommittedAttempt;

namespace {

CommittedAttempt row(std::uint64_t id, std::uint64_t job, const char* message = "") {
  CommittedAttempt a;
  a.id = id;
  a.job_id = job;
  a.status = "RUN_DONE";
  a.error_message = message;
  return a;
}

std::vector<std::uint64_t> released(AttemptOrder& o) {
  std::vector<std::uint64_t> ids;
  o.release([&](const CommittedAttempt& a) { ids.push_back(a.id); });
  return ids;
}

}  // namespace

TEST_CASE("interchange.attempt_order.hands_rows_on_in_id_order_up_to_the_first_hole") {
  AttemptOrder o(10);
  o.arrive(row(11, 1), true);
  o.arrive(row(13, 1), true);
  CHECK(released(o).empty());  // 10 is not committed yet
  CHECK(o.held() == 2);
  o.arrive(row(10, 1), true);
  CHECK(released(o) == std::vector<std::uint64_t>{10, 11});
  CHECK(o.next() == 12);
  o.arrive(row(12, 1), true);
  CHECK(released(o) == std::vector<std::uint64_t>{12, 13});
  CHECK(o.held() == 0);
}

TEST_CASE("interchange.attempt_order.ignores_ids_seen_and_before_the_start") {
  AttemptOrder o(5);
  o.arrive(row(4, 1), true);  // an earlier run's attempt
  o.arrive(row(5, 1), true);
  o.arrive(row(5, 1), true);  // seen again
  CHECK(released(o) == std::vector<std::uint64_t>{5});
  o.arrive(row(5, 1), true);  // already handed on
  CHECK(released(o).empty());
}

TEST_CASE("interchange.attempt_order.other_jobs_rows_keep_the_order_but_are_not_handed_on") {
  AttemptOrder o(1);
  o.arrive(row(1, 1), true);
  o.arrive(row(2, 2), false);
  o.arrive(row(3, 1), true);
  CHECK(released(o) == std::vector<std::uint64_t>{1, 3});
  CHECK(o.next() == 4);
}

TEST_CASE("interchange.attempt_order.skipped_ids_are_not_holes") {
  // Task ids taken but never handed out (a send that would block) get no attempt.
  AttemptOrder o(1);
  o.arrive(row(1, 1), true);
  o.arrive(row(4, 1), true);
  o.skip(2);
  o.skip(3);
  CHECK(released(o) == std::vector<std::uint64_t>{1, 4});
}

TEST_CASE("interchange.attempt_order.an_ended_job_takes_its_rows_past_other_jobs_holes") {
  AttemptOrder o(1);
  o.arrive(row(2, 1), true);
  o.arrive(row(3, 2), true);
  o.arrive(row(4, 1), true);
  // Id 1 belongs to a job still running; job 1 has ended, so all its rows are in.
  std::vector<std::uint64_t> ids;
  o.release_job(1, [&](const CommittedAttempt& a) { ids.push_back(a.id); });
  CHECK(ids == std::vector<std::uint64_t>{2, 4});
  CHECK(released(o).empty());
  o.arrive(row(1, 2), true);
  // Job 1's rows are not handed on twice; job 2's come in order.
  CHECK(released(o) == std::vector<std::uint64_t>{1, 3});
}

TEST_CASE("interchange.attempt_order.a_held_attempt_keeps_its_text") {
  AttemptOrder o(1);
  o.arrive(row(2, 1, "ValueError: a message long enough not to fit a small string"), true);
  o.arrive(row(1, 1), true);
  std::vector<std::string> messages;
  o.release([&](const CommittedAttempt& a) { messages.emplace_back(a.error_message); });
  REQUIRE(messages.size() == 2);
  CHECK(messages[1] == "ValueError: a message long enough not to fit a small string");
}

TEST_CASE("interchange.attempt_order.arrive_and_release_hands_on_as_arrive_then_release_does") {
  // The next id goes on at once; others wait for their hole; repeats are ignored.
  AttemptOrder o(1);
  std::vector<std::uint64_t> ids;
  auto fn = [&](const CommittedAttempt& a) { ids.push_back(a.id); };
  auto a3 = row(3, 1);
  o.arrive_and_release(a3, true, fn);
  CHECK(ids.empty());
  auto a1 = row(1, 1);
  o.arrive_and_release(a1, true, fn);
  CHECK(ids == std::vector<std::uint64_t>{1});
  auto again = row(3, 1);
  o.arrive_and_release(again, true, fn);  // held already
  auto other = row(2, 2);
  o.arrive_and_release(other, false, fn);  // another job's: keeps the order only
  CHECK(ids == std::vector<std::uint64_t>{1, 3});
  CHECK(o.next() == 4);
  CHECK(o.held() == 0);
  o.skip(5);
  auto a4 = row(4, 1);
  o.arrive_and_release(a4, true, fn);
  CHECK(ids == std::vector<std::uint64_t>{1, 3, 4});
  CHECK(o.next() == 6);
  auto a1again = row(1, 1);
  o.arrive_and_release(a1again, true, fn);  // already handed on
  CHECK(ids.size() == 3);
}
