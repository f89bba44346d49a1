// Whether a job's interchange is alive, from its ready file (client/session/liveness.hpp): dead at
// once on its own host, unknown elsewhere, and a reused pid is not it.
#include "client/session/liveness.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

using fanout::client::interchange_liveness;
using fanout::client::InterchangeLiveness;
using fanout::client::runs_interchange;
using State = fanout::client::InterchangeLiveness::State;

namespace {
bool alive(pid_t) { return true; }
bool dead(pid_t) { return false; }
const char* kReady = "client=ipc:///tmp/x/client\npool=ipc:///tmp/x/pool\npid=4242\nhost=node7\n";
}  // namespace

TEST_CASE("on the interchange's host its process decides") {
  CHECK(interchange_liveness(kReady, "node7", alive).state == State::Alive);
  const auto l = interchange_liveness(kReady, "node7", dead);
  CHECK(l.state == State::Dead);
  CHECK(l.pid == 4242);
  CHECK(l.describe() == "the interchange (pid 4242 on node7) is not running");
}

TEST_CASE("from another host, or without a pid or host, nothing is known") {
  CHECK(interchange_liveness(kReady, "node8", dead).state == State::Unknown);
  CHECK(interchange_liveness("client=x\npid=4242\n", "node7", dead).state == State::Unknown);
  CHECK(interchange_liveness("client=x\nhost=node7\n", "node7", dead).state == State::Unknown);
  CHECK(interchange_liveness("client=x\npid=12ab\nhost=node7\n", "node7", dead).state ==
        State::Unknown);
  CHECK(interchange_liveness(kReady, "node8", dead).describe().empty());
}

TEST_CASE("a pid that runs another program is not the interchange") {
  CHECK_FALSE(runs_interchange(::getpid()));  // this test program
  CHECK_FALSE(runs_interchange(0));
}
