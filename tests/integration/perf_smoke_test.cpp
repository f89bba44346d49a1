// A short run of `fanout perf` and its probes: counts only, never speed (docs/performance.md).
#include <doctest/doctest.h>

#include "job_fixture.hpp"

using namespace fanout::test;

TEST_CASE("integration.perf.noop_every_attempt_committed") {
  TempDir dir("perf-noop");
  // Encrypted, as every real tcp:// link (plaintext is it_security's subject).
  auto r = run_capture({fanout_bin(), "perf", "--tasks", "2000", "--runtime", "noop", "--json",
                        "--no-ceiling", "--encrypted", "--keep", dir / "keep"},
                       dir.path());
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.status.code == 0);
  CHECK(has(r.out, "\"tasks\":2000,"));
  CHECK(has(r.out, "\"attempts_committed\":2000,"));
  CHECK(has(r.out, "\"succeeded\":2000,"));
  CHECK(has(r.out, "\"ok\":true"));
  // The store it kept agrees.
  const std::string db = dir / "keep/run/perf.db";
  // The interchange published how it listened (store/owner_lock.hpp): Curve.
  CHECK(read_text(db + ".owner").find("security=curve\n") != std::string::npos);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 2000);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 2000);
}

TEST_CASE("integration.perf.python_items_and_sleep") {
  TempDir dir("perf-python");
  auto r = run_capture({fanout_bin(), "perf", "--tasks", "300", "--runtime", "python", "--python",
                        python_bin(), "--items-per-batch", "3", "--sleep-ms", "1", "--json",
                        "--no-ceiling", "--no-baseline", "--encrypted"},
                       dir.path());
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.status.code == 0);
  CHECK(has(r.out, "\"attempts_committed\":300,"));
  CHECK(has(r.out, "\"items_per_batch\":3,"));
  CHECK(has(r.out, "\"ok\":true"));
}

TEST_CASE("integration.perf.probes_and_bad_options") {
  TempDir dir("perf-probes");
  auto relay = run_capture({env_or("FANOUT_ZMQ_RELAY_BIN", ""), "--tasks", "1000"}, dir.path());
  INFO("relay:\n" << relay.out << relay.err);
  CHECK(relay.status.code == 0);
  CHECK(has(relay.out, "tasks=1000 "));
  CHECK(has(relay.out, "rate="));
  auto mp = run_capture({python_bin(), env_or("FANOUT_TOOLS_DIR", "") + "/mp_baseline.py",
                         "--tasks", "200", "--workers", "2"},
                        dir.path());
  INFO("mp:\n" << mp.out << mp.err);
  CHECK(mp.status.code == 0);
  CHECK(has(mp.out, "tasks=200 "));
  auto bad = run_capture({fanout_bin(), "perf", "--runtime", "java"}, dir.path());
  CHECK(bad.status.code == 2);
  CHECK(has(bad.err, "--runtime"));
  CHECK(has(bad.err, "java"));
}
