// Lifecycle log lines reach the log file before the next step, so a process killed with SIGKILL
// leaves its start, bind and register lines behind.
#include <csignal>

#include <doctest/doctest.h>

#include "harness.hpp"

using namespace fanout::test;

TEST_CASE("interchange.issue_18.lifecycle_lines_survive_sigkill") {
  TempDir dir("logging");
  const std::string db = dir / "store.db";
  Cluster cl;
  cl.start_interchange(dir.path(), db);
  cl.start_pool(dir.path(), "p1", 1);
  // The pool's row in the store comes after the interchange logged its registration.
  REQUIRE_MESSAGE(wait_until([&] { return sql_int(db, "SELECT count(*) FROM pools") >= 1; },
                             std::chrono::seconds(60)),
                  cl.logs());
  cl.interchange.signal(SIGKILL);
  REQUIRE(cl.interchange.wait_for(std::chrono::seconds(30)).has_value());
  const std::string log = read_text(cl.ix_log);
  CHECK_MESSAGE(log.find("listening") != std::string::npos, log);
  CHECK_MESSAGE(log.find("registered") != std::string::npos, log);
}
