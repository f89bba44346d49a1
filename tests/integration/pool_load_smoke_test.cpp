// fanout-pool-load with a small N against a real fanout-interchange: the job's rows only, never
// speed (docs/scaling.md).
#include <doctest/doctest.h>

#include "job_fixture.hpp"

using namespace fanout::test;

TEST_CASE("integration.pool_load.twenty_pools_every_minibatch_once") {
  TempDir dir("pool-load");
  // A threshold well above the period: a loaded machine that delays a heartbeat must not make
  // the interchange lose a pool holding tasks (which would show as extra attempts below).
  auto r = run_capture(
      {env_or("FANOUT_POOL_LOAD_BIN", "fanout-pool-load"), "--pools", "20", "--minibatches", "3000",
       "--heartbeat-period-ms", "500", "--heartbeat-threshold-ms", "4000", "--idle-seconds", "1",
       "--json", "--interchange-bin", interchange_bin(), "--dir", dir / "runs"},
      dir.path());
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.status.code == 0);
  CHECK(has(r.out, "\"pools\":20,\"processes\":1,\"registered\":20,"));
  CHECK(has(r.out, "\"minibatches\":3000,"));
  CHECK(has(r.out, "\"attempts\":3000,"));
  CHECK(has(r.out, "\"ok\":true"));

  // The store the tool's interchange wrote: every mini-batch succeeded, once, on its first try.
  const std::string db = dir / "runs/n20/store.db";
  // Its interchange listened with Curve (keys made for the run), as it published.
  CHECK(read_text(db + ".owner").find("security=curve\n") != std::string::npos);
  INFO("interchange log:\n" << tail(dir / "runs/n20/interchange.log"));
  CHECK(sql_int(db, "select count(*) from jobs") == 1);
  CHECK(sql_int(db, "select count(*) from jobs where state = 'succeeded' and total = 3000") == 1);
  CHECK(sql_int(db, "select count(*) from minibatches") == 3000);
  CHECK(sql_int(db,
                "select count(*) from minibatches where state = 'succeeded' and tries = 1 "
                "and succeeded = 1 and rows = 1") == 3000);
  CHECK(sql_int(db, "select count(*) from attempts") == 3000);
  CHECK(sql_int(db,
                "select count(distinct minibatch_id) from attempts where status = 'RUN_DONE' "
                "and attempt = 1") == 3000);
  // Twenty simulated pools registered; the one that went silent was declared lost.
  CHECK(sql_int(db, "select count(*) from pools") == 20);
  CHECK(sql_int(db, "select count(*) from pools where state = 'lost' and name = 'load-000019'") ==
        1);
}
