// `fanout run --launcher ssh`: real sshd's in network-namespace hosts (tests/netns/bed.sh). The
// client runs in h0 with its interchange; h1..h3 each run an sshd of this test (its own host key,
// config and authorized_keys in the test's folder; the machine's own ssh setup is never read), and
// the launcher starts one pool on each over ssh, connecting back over TCP with Curve. Needs root,
// `ip netns`, sshd and ssh; the executable is reported SKIP (exit 77) otherwise.
#include <filesystem>
#include <sstream>

#include "../netns/multihost_bed.hpp"

using namespace fanout::test;
using namespace fanout::test::netns;

namespace {

constexpr const char* kSshd = "/usr/sbin/sshd";

void require_ssh_or_skip() {
  for (const char* p : {kSshd, "/usr/bin/ssh", "/usr/bin/ssh-keygen"}) {
    if (!std::filesystem::exists(p)) {
      std::fprintf(stderr, "SKIP: %s is missing (Debian: openssh-server, openssh-client)\n", p);
      std::exit(77);
    }
  }
}

// What a process of the job left in a namespace looks like: the pool and its workers (fanout-pool,
// fanout-worker, fanout_worker.py) and the remote script (its command line names fanout-pool).
std::vector<std::string> fanout_processes(const std::string& ns, const std::string& dir) {
  auto r = run_capture({"ip", "netns", "pids", ns}, dir);
  std::vector<std::string> found;
  std::istringstream in(r.out);
  for (std::string pid; in >> pid;) {
    std::string cmd = read_text("/proc/" + pid + "/cmdline");
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    // The test's own sshd names its folder, which holds "fanout" too.
    const bool ours = cmd.find("fanout-pool") != std::string::npos ||
                      cmd.find("fanout-worker") != std::string::npos ||
                      cmd.find("fanout_worker") != std::string::npos;
    if (ours) found.push_back(pid + ": " + cmd.substr(0, 160));
  }
  return found;
}

// Three sshd hosts (h1..h3) and h0 for the client; on destruction every process left in the
// namespaces is killed before the bed goes (ip netns del alone would leave them running).
struct SshHosts {
  const TempDir& dir;
  Bed bed;
  std::vector<fanout::ChildProcess> sshd;
  std::string prefix;

  explicit SshHosts(const TempDir& d) : dir(d), bed(d, 4), prefix("fo" + std::to_string(getpid())) {
    for (const char* k : {"hostkey", "clientkey"}) {
      auto r =
          run_capture({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", dir / k}, dir.path());
      REQUIRE_MESSAGE(r.status.success(), r.err);
    }
    std::filesystem::copy_file(dir / "clientkey.pub", dir / "authorized_keys");
    // sshd's privilege separation folder, which Debian makes only when the service starts.
    std::filesystem::create_directories("/run/sshd");
    write_file(dir / "ssh_config", "Host *\n  User root\n  IdentityFile " + (dir / "clientkey") +
                                       "\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n"
                                       "  UserKnownHostsFile /dev/null\n"
                                       "  GlobalKnownHostsFile /dev/null\n");
    for (unsigned i = 1; i <= 3; ++i) {
      const std::string cfg = dir / ("sshd" + std::to_string(i) + ".conf");
      write_file(cfg, "ListenAddress " + Bed::addr(i) + "\nPort 22\nHostKey " + (dir / "hostkey") +
                          "\nAuthorizedKeysFile " + (dir / "authorized_keys") +
                          "\nPidFile none\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
                          "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
                          "PubkeyAuthentication yes\nLogLevel VERBOSE\n");
      sshd.push_back(spawn(
          bed.on(i, {kSshd, "-D", "-f", cfg, "-E", dir / ("sshd" + std::to_string(i) + ".log")}),
          dir / ("sshd" + std::to_string(i) + ".stderr")));
    }
    // Each sshd answers before the job starts.
    for (unsigned i = 1; i <= 3; ++i) {
      REQUIRE_MESSAGE(wait_until(
                          [&] {
                            auto r = run_capture(
                                bed.on(0, {"ssh", "-F", dir / "ssh_config", "-o", "BatchMode=yes",
                                           "-o", "ConnectTimeout=5", Bed::addr(i), "true"}),
                                dir.path(), {}, std::chrono::seconds(30));
                            return r.status.success();
                          },
                          std::chrono::seconds(60)),
                      tail(dir / ("sshd" + std::to_string(i) + ".log")));
    }
  }
  ~SshHosts() {
    for (auto& s : sshd) s.stop();
    for (unsigned i = 0; i < 4; ++i) {
      auto r = run_capture({"ip", "netns", "pids", prefix + "-h" + std::to_string(i)}, dir.path());
      std::istringstream in(r.out);
      for (pid_t pid; in >> pid;) ::kill(pid, SIGKILL);
    }
  }
  [[nodiscard]] std::string ns(unsigned i) const { return prefix + "-h" + std::to_string(i); }
};

}  // namespace

TEST_CASE("ssh.three_hosts_host_cut_mid_job_replaced_rows_exactly_once") {
  require_bed_or_skip();
  require_ssh_or_skip();
  TempDir dir("ssh-launch");
  constexpr unsigned kFiles = 160;
  // 1 s tasks, 2 workers per pool: the job outlasts the cut host's detection (its ssh gives up
  // after about 15 s of silence) by a wide margin, so its replacement still finds work.
  write_counting_job(dir, kFiles, "1.0");
  SshHosts hosts(dir);
  const std::string db = dir / "fanout.db";
  const std::string list = Bed::addr(1) + "," + Bed::addr(2) + "," + Bed::addr(3);
  auto client = spawn(hosts.bed.on(0, {fanout_bin(),
                                       "run",
                                       dir / "job.yaml",
                                       "--launcher",
                                       "ssh",
                                       "--hosts",
                                       list,
                                       "--ssh-option",
                                       "-F " + (dir / "ssh_config"),
                                       "--interchange-address",
                                       Bed::addr(0),
                                       "--max-nodes",
                                       "4",
                                       "--workers",
                                       "2",
                                       "--db",
                                       db,
                                       "--python",
                                       python_bin(),
                                       "--keys",
                                       test_keys_dir(),
                                       "--log-level",
                                       "debug"}),
                      dir / "client.log");
  auto logs = [&] {
    std::string s = "--- client ---\n" + tail(dir / "client.log", 40);
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
      const std::string f = e.path().string();
      if (f.ends_with(".log") || f.ends_with(".out")) s += "--- " + f + " ---\n" + tail(f, 15);
    }
    return s;
  };
  const std::string host1 = Bed::addr(1) + "-ssh1";
  // Every host's pool serves; then host 1 is cut off mid-job (its switch port down).
  REQUIRE_MESSAGE(wait_until(
                      [&] {
                        return sql_int_or(db,
                                          "select count(distinct pool) from attempts where "
                                          "status='RUN_DONE'") >= 3;
                      },
                      std::chrono::seconds(120)),
                  logs());
  hosts.bed.cut(1);

  auto st = client.wait_for(std::chrono::seconds(300));
  INFO(logs());
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  check_rows_once(dir / "out.txt", kFiles);
  CHECK(succeeded(db) == kFiles);
  // Host 1's pool was lost, and a fourth pool replaced it on another host of the list.
  CHECK(has(read_text(dir / "client.log"), "replacement ssh pool"));
  CHECK(sql_int(db, "select count(*) from pools where name='" + host1 + "' and state='lost'") >= 1);
  CHECK(sql_int(db, "select count(*) from pools where name like '%-ssh4' and name not like '" +
                        Bed::addr(1) + "-%'") == 1);
  CHECK(sql_int(db,
                "select count(*) from attempts where pool like '%-ssh4' and "
                "status='RUN_DONE'") >= 1);

  // Nothing of the job is left on any host: the reachable ones ended their pools at release,
  // and the cut one's pool left by itself when its interchange went silent.
  hosts.bed.heal(1);
  for (unsigned i = 1; i <= 3; ++i) {
    std::vector<std::string> left;
    CHECK_MESSAGE(wait_until(
                      [&] {
                        left = fanout_processes(hosts.ns(i), dir.path());
                        return left.empty();
                      },
                      std::chrono::seconds(90)),
                  "host " << i << ": " << (left.empty() ? "" : left.front()));
  }
}
