// Pools on separate hosts: the interchange, the client and the pools run in their own network
// namespaces joined by a bridge (tests/netns/bed.sh), and talk over real TCP between addresses
// of one private /24. A host is cut off mid-job by taking its switch port down: its processes
// keep running and come back when the port does. Every link is Curve-encrypted with the
// test key folder (test_keys_dir(), passed as --keys), as plaintext off loopback is refused.
// Needs root and `ip netns`; the whole executable is reported SKIP (exit 77) otherwise.
#include <regex>

#include "../netns/multihost_bed.hpp"

using namespace fanout::test;
using namespace fanout::test::netns;

namespace {

// The interchange's count of stale results (its stats line's `stale N`), the last one logged.
long long stale_results(const std::string& ix_log) {
  static const std::regex kStale(R"(, stale (\d+),)");
  long long n = -1;
  for (const auto& line : read_lines(ix_log)) {
    std::smatch m;
    if (std::regex_search(line, m, kStale)) n = std::stoll(m[1]);
  }
  return n;
}

}  // namespace

TEST_CASE("multihost.pool_host_cut_off_mid_job_rows_exactly_once") {
  require_bed_or_skip();
  TempDir dir("multihost-cut");
  // 1 s tasks: when the link goes, host1 is running two (its capacity), which end well inside
  // its 3 s heartbeat threshold, so their results are queued on its connection when it notices
  // and re-registers; they reach the interchange, stale, when the link comes back.
  write_counting_job(dir, 60, "1.0");
  MultiHost mh(dir, 4);
  auto client = mh.start_client();
  REQUIRE_MESSAGE(wait_until(
                      [&] {
                        return sql_int(mh.db,
                                       "select count(*) from attempts where pool='host1' and "
                                       "status='RUN_DONE'") >= 2;
                      },
                      std::chrono::seconds(90)),
                  mh.logs());
  mh.bed.cut(1);  // host1 keeps running what it holds, unheard

  auto st = client.wait_for(std::chrono::seconds(180));
  INFO(mh.logs());
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  check_rows_once(dir / "out.txt", 60);
  CHECK(succeeded(mh.db) == 60);
  CHECK(sql_int(mh.db, "select count(*) from attempts where status='RUN_DONE'") == 60);
  // What host1 held when it went silent was requeued as POOL_LOST attempts naming it.
  CHECK(sql_int(mh.db, "select count(*) from attempts where status='POOL_LOST'") >= 1);
  CHECK(sql_int(mh.db,
                "select count(*) from attempts where status='POOL_LOST' and "
                "error_message not like '%host1%'") == 0);
  CHECK(sql_int(mh.db, "select count(*) from pools where name='host1' and state='lost'") >= 1);

  // The link comes back: host1 registers again, and nothing it finished while cut off reaches
  // the output a second time.
  mh.bed.heal(1);
  CHECK_MESSAGE(
      wait_until([&] { return pool_connected(mh.db, "host1"); }, std::chrono::seconds(60)),
      mh.logs());
  check_rows_once(dir / "out.txt", 60);
  CHECK(sql_int(mh.db, "select count(*) from attempts where status='RUN_DONE'") == 60);
  // Those late results were refused as stale, counted and logged; or host1 dropped them with its
  // connection when its Register went unanswered while cut off (it then reconnects: the
  // interchange ignores a connection under a routing id its old one still holds, and no
  // ROUTER_HANDOVER lets one take an id over; docs/security.md).
  CHECK_MESSAGE(wait_until(
                    [&] {
                      return stale_results(dir / "ix.log") > 0 ||
                             read_text(dir / "host1.log").find("on a new connection") !=
                                 std::string::npos;
                    },
                    std::chrono::seconds(30)),
                mh.logs());
  if (stale_results(dir / "ix.log") > 0) {
    CHECK(read_text(dir / "ix.log").find("stale results from unregistered pool 'host1'") !=
          std::string::npos);
  }
  CHECK_FALSE(mh.ix.poll().has_value());
}

TEST_CASE("multihost.interchange_host_cut_off_shorter_than_the_threshold_loses_nothing") {
  require_bed_or_skip();
  TempDir dir("multihost-short");
  write_counting_job(dir, 60, "0.3");
  // A 1 s cut delays TCP's retransmissions (their timer doubles: 0.2, 0.4, 0.8, 1.6 s ...) and
  // the neighbour entries need a moment after the port comes back, so the first frame through
  // can arrive several seconds after the cut; the threshold is well above that, or the cut
  // would not be "shorter than the threshold" as the network sees it.
  MultiHost mh(dir, 4, {"--heartbeat-period-ms", "300", "--heartbeat-threshold-ms", "10000"});
  auto client = mh.start_client();
  REQUIRE_MESSAGE(wait_until([&] { return succeeded(mh.db) >= 6; }, std::chrono::seconds(90)),
                  mh.logs());
  mh.bed.cut(0);  // 1 s, well inside the 10 s threshold on both sides
  std::this_thread::sleep_for(std::chrono::seconds(1));
  mh.bed.heal(0);

  auto st = client.wait_for(std::chrono::seconds(180));
  INFO(mh.logs());
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  check_rows_once(dir / "out.txt", 60);
  // Nothing was lost or redone: one attempt per mini-batch, each file run once.
  CHECK(sql_int(mh.db, "select count(*) from attempts") == 60);
  CHECK(sql_int(mh.db, "select count(*) from pools where state='lost'") == 0);
  CHECK(read_lines(dir / "runs.txt").size() == 60);
}

TEST_CASE("multihost.interchange_host_cut_off_longer_than_the_threshold_pools_rejoin") {
  require_bed_or_skip();
  TempDir dir("multihost-long");
  write_counting_job(dir, 60, "0.3");
  MultiHost mh(dir, 4);
  auto client = mh.start_client();
  REQUIRE_MESSAGE(wait_until([&] { return succeeded(mh.db) >= 6; }, std::chrono::seconds(90)),
                  mh.logs());
  mh.bed.cut(0);
  // Past the threshold: the interchange declares every pool lost.
  REQUIRE_MESSAGE(
      wait_until(
          [&] { return sql_int(mh.db, "select count(*) from pools where state='lost'") >= 3; },
          std::chrono::seconds(60)),
      mh.logs());
  mh.bed.heal(0);

  auto st = client.wait_for(std::chrono::seconds(180));
  INFO(mh.logs());
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  check_rows_once(dir / "out.txt", 60);
  CHECK(sql_int(mh.db, "select count(*) from attempts where status='RUN_DONE'") == 60);
  CHECK(sql_int(mh.db, "select count(*) from attempts where status='POOL_LOST'") >= 1);
  // The pools backed off and came back on their own.
  CHECK(sql_int(mh.db, "select count(distinct name) from pools where state='connected'") == 3);
  CHECK_FALSE(mh.ix.poll().has_value());
}
