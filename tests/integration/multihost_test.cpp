// Pools on separate hosts: the interchange, the client and the pools run in their own network
// namespaces joined by a bridge (tests/netns/bed.sh), and talk over real TCP between addresses
// of one private /24. A host is cut off mid-job by taking its switch port down: its processes
// keep running and come back when the port does. Issue 12. Every link is Curve-encrypted with the
// test key folder (test_keys_dir(), passed as --keys), as plaintext off loopback is refused.
// Needs root and `ip netns`; the whole executable is reported SKIP (exit 77) otherwise.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>

#include <doctest/doctest.h>

#include "harness.hpp"

using namespace fanout::test;

namespace {

constexpr const char* kNet =
    "10.231.7";  // the bed's own /24; every address lives in its namespaces

std::string bed_script() { return env_or("FANOUT_SOURCE_ROOT", ".") + "/tests/netns/bed.sh"; }

// Network-namespace hosts h0..h(n-1) on a bridge; removed at destruction, also on failure.
class Bed final {
 public:
  Bed(const TempDir& dir, unsigned hosts) : dir_(dir), prefix_("fo" + std::to_string(getpid())) {
    auto r = run_capture({bed_script(), "up", prefix_, std::to_string(hosts), kNet}, dir_.path());
    if (!r.status.success()) throw std::runtime_error("bed.sh up failed: " + r.err);
  }
  ~Bed() { (void)run_capture({bed_script(), "down", prefix_}, dir_.path()); }
  Bed(const Bed&) = delete;
  Bed& operator=(const Bed&) = delete;

  // argv run inside host i.
  [[nodiscard]] std::vector<std::string> on(unsigned i, std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {"ip", "netns", "exec", prefix_ + "-h" + std::to_string(i)});
    return argv;
  }
  [[nodiscard]] static std::string addr(unsigned i) {
    return std::string(kNet) + "." + std::to_string(i + 1);
  }
  void cut(unsigned i) const { port(i, "cut"); }
  void heal(unsigned i) const { port(i, "heal"); }

 private:
  void port(unsigned i, const char* what) const {
    auto r = run_capture({bed_script(), what, prefix_, std::to_string(i)}, dir_.path());
    REQUIRE_MESSAGE(r.status.success(), r.err);
  }
  const TempDir& dir_;
  std::string prefix_;
};

// Skips the whole executable (meson: SKIP) when no bed can be made here, saying why.
void require_bed_or_skip() {
  TempDir dir("bedcheck");
  auto r = run_capture({bed_script(), "check"}, dir.path());
  if (r.status.code == 77) {
    std::fprintf(stderr, "SKIP: %s%s\n", r.out.c_str(), r.err.c_str());
    std::exit(77);
  }
  REQUIRE_MESSAGE(r.status.success(), std::string(r.out + r.err));
}

const std::vector<std::string> kBeats = {"--heartbeat-period-ms", "300", "--heartbeat-threshold-ms",
                                         "3000"};

fanout::ChildProcess spawn(const std::vector<std::string>& argv, const std::string& log) {
  fanout::SpawnOptions so;
  so.argv = argv;
  so.stdin_file = "null";
  so.stdout_file = log;
  so.stderr_file = log;
  auto c = fanout::ChildProcess::spawn(so);
  REQUIRE_MESSAGE(c.has_value(), c.error().message);
  return std::move(*c);
}

// One interchange on h0 and a pool on each of h1..h(hosts-1), named host<i>, 2 workers each.
struct MultiHost {
  const TempDir& dir;
  Bed bed;
  std::string db;
  fanout::ChildProcess ix;
  std::string client_ep, pool_ep;
  std::vector<fanout::ChildProcess> pools;

  MultiHost(const TempDir& d, unsigned hosts, const std::vector<std::string>& beats = kBeats)
      : dir(d), bed(d, hosts), db(d / "fanout.db") {
    const std::string ready = dir / "ix.ready";
    std::vector<std::string> argv = {interchange_bin(),
                                     "--db",
                                     db,
                                     "--ready-file",
                                     ready,
                                     "--log-file",
                                     dir / "ix.log",
                                     "--stats-interval-ms",
                                     "500",
                                     "--client-endpoint",
                                     "tcp://" + Bed::addr(0) + ":*",
                                     "--pool-endpoint",
                                     "tcp://" + Bed::addr(0) + ":*",
                                     "--keys",
                                     test_keys_dir()};
    argv.insert(argv.end(), beats.begin(), beats.end());
    ix = spawn(bed.on(0, argv), dir / "ix.stderr");
    REQUIRE_MESSAGE(wait_until([&] { return !read_text(ready).empty(); }, std::chrono::seconds(30)),
                    tail(dir / "ix.stderr"));
    REQUIRE(wait_until([&] { return read_ready_file(ready).count("pool") == 1; },
                       std::chrono::seconds(5)));
    auto kv = read_ready_file(ready);
    client_ep = kv["client"];
    pool_ep = kv["pool"];
    for (unsigned i = 1; i < hosts; ++i) {
      const std::string name = "host" + std::to_string(i);
      std::vector<std::string> p = {pool_bin(),
                                    "--interchange",
                                    pool_ep,
                                    "--name",
                                    name,
                                    "--workers",
                                    "2",
                                    "--log-file",
                                    dir / (name + ".log"),
                                    "--log-level",
                                    "debug",
                                    "--keys",
                                    test_keys_dir()};
      p.insert(p.end(), beats.begin(), beats.end());
      pools.push_back(spawn(bed.on(i, p), dir / (name + ".stderr")));
    }
    REQUIRE_MESSAGE(
        wait_until([&] { return sql_int(db, "select count(*) from pools") >= hosts - 1; },
                   std::chrono::seconds(60)),
        logs());
  }

  // The client, on h0, runs ./job.yaml against the interchange.
  fanout::ChildProcess start_client() const {
    return spawn(
        bed.on(0, {fanout_bin(), "run", dir / "job.yaml", "--interchange", client_ep, "--db", db,
                   "--python", python_bin(), "--quiet", "--keys", test_keys_dir()}),
        dir / "client.log");
  }

  std::string logs() const {
    std::string s = "--- ix ---\n" + tail(dir / "ix.log") + tail(dir / "ix.stderr");
    for (unsigned i = 1; i <= pools.size(); ++i) {
      s += "--- host" + std::to_string(i) + " ---\n" +
           tail(dir / ("host" + std::to_string(i) + ".log"));
    }
    return s + "--- client ---\n" + tail(dir / "client.log");
  }
};

void write_counting_job(const TempDir& dir, unsigned files, const std::string& nap) {
  make_files(dir / "data", files);
  write_file(dir / "src/score.py", kCountingScript);
  write_file(dir / "job.yaml", counting_job_yaml("multihost", dir / "runs.txt", nap));
}

void check_rows_once(const std::string& out, unsigned n) {
  auto lines = read_lines(out);
  CHECK(lines.size() == n);
  CHECK(std::set<std::string>(lines.begin(), lines.end()).size() == n);
}

long long succeeded(const std::string& db) {
  return sql_int(db, "select count(*) from minibatches where state='succeeded'");
}

}  // namespace

TEST_CASE("multihost.pool_host_cut_off_mid_job_rows_exactly_once") {
  require_bed_or_skip();
  TempDir dir("multihost-cut");
  write_counting_job(dir, 60, "0.3");
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
  CHECK_MESSAGE(wait_until(
                    [&] {
                      return sql_int(mh.db,
                                     "select count(*) from pools where name='host1' and "
                                     "state='connected'") == 1;
                    },
                    std::chrono::seconds(60)),
                mh.logs());
  check_rows_once(dir / "out.txt", 60);
  CHECK(sql_int(mh.db, "select count(*) from attempts where status='RUN_DONE'") == 60);
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
