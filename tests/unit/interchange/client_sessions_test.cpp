// Client sessions (interchange/client_sessions.hpp): attach in each stage of a job's life, the
// progress cadence and window credit, and who is told JobEnded.
#include "interchange/client_sessions.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <string>

using namespace fanout::ix;
using fanout::Clock;
using std::chrono::milliseconds;

namespace {

const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);

fanout::proto::JobEnded ended(std::uint64_t id) {
  fanout::proto::JobEnded e;
  e.job_id = id;
  e.state = "succeeded";
  return e;
}

}  // namespace

TEST_CASE("interchange.client_sessions.attach_follows_a_job_through_its_life") {
  ClientSessions s(100, milliseconds(250));
  CHECK(s.attach(1, "c1").what == ClientSessions::Attached::Unknown);
  s.open(1, t0);
  CHECK(s.attach(1, "c1").what == ClientSessions::Attached::Live);
  SUBCASE("ended with a report: attaching waits for it, then everyone is told") {
    CHECK_FALSE(s.close(ended(1), true).has_value());
    CHECK(s.reporting());
    CHECK(s.attach(1, "c2").what == ClientSessions::Attached::Reporting);
    auto d = s.report_written(1, 1.5, 0.5);
    REQUIRE(d.has_value());
    CHECK(d->clients == ClientSet{"c1", "c2"});
    CHECK(d->ended.report_s == 1.5);
    CHECK(d->ended.report_cpu_s == 0.5);
    CHECK_FALSE(s.reporting());
    s.delivered(d->ended);
  }
  SUBCASE("ended without a report: told at once") {
    auto d = s.close(ended(1), false);
    REQUIRE(d.has_value());
    CHECK(d->clients == ClientSet{"c1"});
    s.delivered(d->ended);
  }
  // A later attach gets the JobEnded again.
  auto r = s.attach(1, "c3");
  CHECK(r.what == ClientSessions::Attached::Ended);
  REQUIRE(r.ended != nullptr);
  CHECK(r.ended->job_id == 1);
}

TEST_CASE("interchange.client_sessions.joining_needs_a_live_job") {
  ClientSessions s(100, milliseconds(250));
  s.join(1, "c1");  // not live: ignored
  s.open(1, t0);
  CHECK(s.progress_due(1, 0, t0, true) == nullptr);  // no client
  s.join(1, "c1");
  const ClientSet* to = s.progress_due(1, 0, t0, true);
  REQUIRE(to != nullptr);
  CHECK(*to == ClientSet{"c1"});
}

TEST_CASE("interchange.client_sessions.progress_cadence") {
  ClientSessions s(100, milliseconds(250));  // credit every 25 finished
  s.open(1, t0);
  s.join(1, "c1");
  SUBCASE("nothing new: one every 5 s (elastic pool jobs read the idle pools from it)") {
    CHECK(s.progress_due(1, 0, t0 + milliseconds(4999), false) == nullptr);
    CHECK(s.progress_due(1, 0, t0 + std::chrono::seconds(5), false) != nullptr);
    CHECK(s.progress_due(1, 0, t0 + milliseconds(9999), false) == nullptr);
  }
  SUBCASE("something new: at most every progress_interval") {
    CHECK(s.progress_due(1, 3, t0 + milliseconds(249), false) == nullptr);
    CHECK(s.progress_due(1, 3, t0 + milliseconds(250), false) != nullptr);
    CHECK(s.progress_due(1, 4, t0 + milliseconds(400), false) == nullptr);
    CHECK(s.progress_due(1, 4, t0 + milliseconds(500), false) != nullptr);
  }
  SUBCASE("a quarter of the window finished: the credit goes out at once") {
    CHECK(s.progress_due(1, 24, t0 + milliseconds(1), false) == nullptr);
    CHECK(s.progress_due(1, 25, t0 + milliseconds(1), false) != nullptr);
    CHECK(s.progress_due(1, 49, t0 + milliseconds(2), false) == nullptr);
    CHECK(s.progress_due(1, 50, t0 + milliseconds(2), false) != nullptr);
  }
  SUBCASE("forced: at once") {
    CHECK(s.progress_due(1, 0, t0, true) != nullptr);
    CHECK(s.progress_due(1, 0, t0, true) != nullptr);
  }
}
