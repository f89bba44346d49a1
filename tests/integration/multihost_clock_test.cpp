// Clock skew between hosts: one pool's wall clock 10 minutes ahead, another's
// 10 minutes behind (FANOUT_TEST_CLOCK_OFFSET_S, test only: a namespace cannot change the clock).
// Durations come from the steady clock where the task ran, and the start times a pool reports
// are corrected by the offset it measured at registration, so the store and the reports hold
// sane durations and times on the interchange's clock, and no timeout fires. Namespace hosts as
// in it_multihost (tests/netns/multihost_bed.hpp); SKIP without root.
#include "../netns/multihost_bed.hpp"
#include "csv_parse.hpp"
#include "test_hooks_skip.hpp"

using namespace fanout::test;
using namespace fanout::test::netns;

TEST_CASE("multihost.pool_clocks_ten_minutes_off_keep_durations_and_reports_right") {
  require_test_hooks_or_skip();
  require_bed_or_skip();
  TempDir dir("multihost-clock");
  constexpr unsigned kFiles = 40;
  write_counting_job(dir, kFiles, "0.3");
  MultiHost mh(dir, 3, kBeats, /*start_all=*/false);
  mh.start_interchange();
  mh.start_pool(1, {"FANOUT_TEST_CLOCK_OFFSET_S=600"});
  mh.start_pool(2, {"FANOUT_TEST_CLOCK_OFFSET_S=-600"});
  REQUIRE_MESSAGE(wait_until([&] { return sql_int(mh.db, "select count(*) from pools") == 2; },
                             std::chrono::seconds(60)),
                  mh.logs());
  auto client = mh.start_client();
  auto st = client.wait_for(std::chrono::seconds(180));
  INFO(mh.logs());
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  check_rows_once(dir / "out.txt", kFiles);

  // Each pool measured its offset at registration.
  CHECK(read_text(dir / "host1.log").find("our clock is +600") != std::string::npos);
  CHECK(read_text(dir / "host2.log").find("our clock is -600") != std::string::npos);
  // No spurious timeouts or failures: one successful attempt per mini-batch, on both pools.
  CHECK(sql_int(mh.db, "select count(*) from attempts") == kFiles);
  CHECK(sql_int(mh.db, "select count(*) from attempts where status<>'RUN_DONE'") == 0);
  CHECK(sql_int(mh.db, "select count(distinct pool) from attempts") == 2);
  // Durations are sane: no negative ones, none near the 600 s skew.
  CHECK(sql_int(mh.db, "select count(*) from attempts where elapsed_s < 0 or elapsed_s > 60") == 0);
  // Start times are on the interchange's clock: inside the job's life, give or take a second.
  CHECK(sql_int(mh.db,
                "select count(*) from attempts a join jobs j on j.id = a.job_id where "
                "a.start < j.created - 1 or a.start + a.elapsed_s > j.ended + 1") == 0);

  // The report: per node, first start and last end inside the job's life (ISO times sort as
  // text), and the attempts of both nodes interleave in time rather than 20 minutes apart.
  const std::string logs = sql_column(mh.db, "select log_dir from jobs")[0];
  const auto iso = [&](const char* col) {
    return sql_column(mh.db, std::string("select strftime('%Y-%m-%dT%H:%M:%fZ', ") + col +
                                 " - 1, 'unixepoch') from jobs")[0];
  };
  const std::string from = iso("created"), to = iso("ended + 2");
  const auto ns = parse_csv(read_text(logs + "/sys/job_report/node_summary.csv"));
  REQUIRE(ns.size() == 3);  // header + host1 + host2
  const auto col = [&](const std::string& name) {
    for (std::size_t i = 0; i < ns[0].size(); ++i) {
      if (ns[0][i] == name) return i;
    }
    FAIL("no column " << name);
    return std::size_t{0};
  };
  const auto first = col("First Start Time"), last = col("Last End Time");
  for (std::size_t r = 1; r < ns.size(); ++r) {
    INFO(ns[r][0] << ": " << ns[r][first] << " .. " << ns[r][last] << " in " << from << " .. "
                  << to);
    CHECK(ns[r][first] >= from);
    CHECK(ns[r][first] <= ns[r][last]);
    CHECK(ns[r][last] <= to);
  }
  CHECK_FALSE(mh.ix.poll().has_value());
}
