// The many-host test bed for the integration tests: network-namespace hosts on a
// bridge (tests/netns/bed.sh), an interchange on h0 and pools on the others, every link over
// real TCP with Curve. Header-only, used by it_multihost, it_multihost_membership and
// it_multihost_clock. Needs root and `ip netns`; require_bed_or_skip() exits 77 (meson: SKIP)
// with the reason otherwise.
#pragma once

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "job_fixture.hpp"

namespace fanout::test::netns {

constexpr const char* kNet =
    "10.231.7";  // the bed's own /24; every address lives in its namespaces

inline std::string bed_script() {
  return env_or("FANOUT_SOURCE_ROOT", ".") + "/tests/netns/bed.sh";
}

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
inline void require_bed_or_skip() {
  TempDir dir("bedcheck");
  auto r = run_capture({bed_script(), "check"}, dir.path());
  if (r.status.code == 77) {
    std::fprintf(stderr, "SKIP: %s%s\n", r.out.c_str(), r.err.c_str());
    std::exit(77);
  }
  REQUIRE_MESSAGE(r.status.success(), std::string(r.out + r.err));
}

inline const std::vector<std::string> kBeats = {"--heartbeat-period-ms", "300",
                                                "--heartbeat-threshold-ms", "3000"};

// Each process's stdout and stderr go to one log.
inline fanout::ChildProcess spawn(const std::vector<std::string>& argv, const std::string& log) {
  return fanout::test::spawn(argv, log, log);
}

// The pool ports are fixed (each namespace has its own ports), so pools can be started before
// the interchange.
constexpr const char* kClientPort = "5600";
constexpr const char* kPoolPort = "5601";

// An interchange on h0 and a pool on each of h1..h(hosts-1), named host<i> (also its node), 2
// workers each. `start_all`: the interchange and every pool now; else nothing, the test starts
// them with start_interchange() and start_pool().
struct MultiHost {
  const TempDir& dir;
  unsigned hosts;
  Bed bed;
  std::string db;
  std::vector<std::string> beats;
  fanout::ChildProcess ix;
  std::string client_ep, pool_ep;
  std::map<unsigned, fanout::ChildProcess> pools;  // by host

  MultiHost(const TempDir& d, unsigned n, const std::vector<std::string>& hb = kBeats,
            bool start_all = true)
      : dir(d),
        hosts(n),
        bed(d, n),
        db(d / "fanout.db"),
        beats(hb),
        pool_ep("tcp://" + Bed::addr(0) + ":" + kPoolPort) {
    if (!start_all) return;
    start_interchange();
    for (unsigned i = 1; i < hosts; ++i) start_pool(i);
    REQUIRE_MESSAGE(
        wait_until([&] { return sql_int(db, "select count(*) from pools") >= hosts - 1; },
                   std::chrono::seconds(60)),
        logs());
  }

  void start_interchange() {
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
                                     "tcp://" + Bed::addr(0) + ":" + kClientPort,
                                     "--pool-endpoint",
                                     pool_ep,
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
  }

  // The pool of host i; `env`: NAME=value pairs set for it only; `extra`: more flags.
  fanout::ChildProcess& start_pool(unsigned i, const std::vector<std::string>& env = {},
                                   const std::vector<std::string>& extra = {}) {
    const std::string name = "host" + std::to_string(i);
    std::vector<std::string> p = {"env"};
    p.insert(p.end(), env.begin(), env.end());
    p.insert(p.end(), {pool_bin(), "--interchange", pool_ep, "--name", name, "--node", name,
                       "--workers", "2", "--log-file", dir / (name + ".log"), "--log-level",
                       "debug", "--keys", test_keys_dir()});
    p.insert(p.end(), beats.begin(), beats.end());
    p.insert(p.end(), extra.begin(), extra.end());
    auto [it, _] = pools.insert_or_assign(i, spawn(bed.on(i, p), dir / (name + ".stderr")));
    return it->second;
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
    for (unsigned i = 1; i < hosts; ++i) {
      const std::string name = "host" + std::to_string(i);
      s += "--- " + name + " ---\n" + tail(dir / (name + ".log")) + tail(dir / (name + ".stderr"));
    }
    return s + "--- client ---\n" + tail(dir / "client.log");
  }
};

inline void write_counting_job(const TempDir& dir, unsigned files, const std::string& nap) {
  make_counting_job(dir.path(), "multihost", files, nap);
}

}  // namespace fanout::test::netns
