// What another local user can do to a run on the same machine (docs/security.md, "Local files
// and other local users"): reach `fanout perf`'s interchange, plant a store's owner file, plant
// symbolic links where fanout writes, read an ad-hoc run's files. Each attack is played by a
// second local user made for the test (useradd); the whole executable is reported SKIP (exit
// 77) unless it runs as root.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "fanout/protocol/codec.hpp"
#include "job_fixture.hpp"
#include "raw_peer.hpp"

using namespace fanout::test;
namespace proto = fanout::proto;
namespace fs = std::filesystem;

namespace {

constexpr const char* kUser = "fanout_atk_l";

// The second local user, made for the test and removed with its home folder at the end, also
// when a check fails. Exits 77 (SKIP) unless root.
class OtherUser final {
 public:
  OtherUser() {
    if (::geteuid() != 0) {
      std::fprintf(stderr,
                   "SKIP: needs root to create another local user (useradd) and switch to it\n");
      std::_Exit(77);
    }
    (void)std::system("userdel -r fanout_atk_l >/dev/null 2>&1");
    if (std::system("useradd --create-home --shell /usr/sbin/nologin fanout_atk_l >/dev/null") !=
        0) {
      std::fprintf(stderr, "SKIP: useradd %s failed\n", kUser);
      std::_Exit(77);
    }
    auto id_of = [](const char* flag) {
      auto r = run_capture({"id", flag, kUser}, "/tmp");
      return static_cast<unsigned>(std::stoul(r.out.empty() ? "0" : r.out));
    };
    uid_ = id_of("-u");
    gid_ = id_of("-g");
  }
  ~OtherUser() { (void)std::system("userdel -r fanout_atk_l >/dev/null 2>&1"); }
  OtherUser(const OtherUser&) = delete;
  OtherUser& operator=(const OtherUser&) = delete;

  [[nodiscard]] uid_t uid() const { return uid_; }

  // Makes this (forked) process this user, for good; exits 100 when it cannot.
  void become() const {
    if (::setgroups(0, nullptr) != 0 || ::setgid(gid_) != 0 || ::setuid(uid_) != 0) {
      std::_Exit(100);
    }
  }

  // Runs `fn` in a forked child as this user; returns its result (its exit code), or -1.
  [[nodiscard]] int run(const std::function<int()>& fn) const {
    const pid_t pid = ::fork();
    if (pid == 0) {
      become();
      std::_Exit(fn());
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // A folder the other user owns, open to everyone (mode 1777): a shared place such as /tmp,
  // where that user's links are followed by the kernel (fs.protected_symlinks allows links of
  // the folder's owner).
  void make_shared_folder(const std::string& dir) const {
    fs::create_directories(dir);
    REQUIRE(::chown(dir.c_str(), uid_, gid_) == 0);
    REQUIRE(::chmod(dir.c_str(), 01777) == 0);
  }

 private:
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

unsigned mode_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

// A job over ./data (`files` files), rows into `output`.
void write_job(const TempDir& dir, unsigned files, const std::string& output) {
  JobSpec job;
  job.name = "local-trust";
  job.output = output;
  make_echo_job(dir.path(), files, job);
}

// A TCP listener on 127.0.0.1 (any port); counts the connections it was offered.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0);
    REQUIRE(::listen(fd, 16) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
  int connections() const {
    int n = 0;
    for (int c; (c = ::accept(fd, nullptr, nullptr)) >= 0; ++n) ::close(c);
    return n;
  }
};

}  // namespace

// Item: `fanout perf` listened on plaintext TCP loopback (--insecure), where another user
// submitted a job that ran as the victim. Its interchange is now on ipc:// in a 0700 folder: the
// same request answered for its owner gets nothing from the other user.
TEST_CASE("integration.local_trust.perf_interchange_is_closed_to_other_users") {
  OtherUser other;
  TempDir dir("trust-perf");
  fanout::SpawnOptions so;
  so.argv = {fanout_bin(), "perf",   "--tasks", "4000",       "--sleep-ms",
             "5",          "--json", "--keep",  dir / "keep", "--no-ceiling"};
  so.stdin_file = "null";
  so.stdout_file = dir / "perf.out";
  so.stderr_file = dir / "perf.err";
  auto perf = fanout::ChildProcess::spawn(so);
  REQUIRE(perf.has_value());
  const std::string owner = dir / "keep/run/perf.db.owner";
  std::string ep;
  REQUIRE(wait_until(
      [&] {
        ep = read_ready_file(owner)["client"];
        return !ep.empty();
      },
      std::chrono::seconds(60)));
  INFO("endpoint: " << ep << "\nperf:\n" << read_text(dir / "perf.err"));
  REQUIRE(ep.rfind("ipc://", 0) == 0);
  const std::string folder = fs::path(ep.substr(6)).parent_path().string();
  CHECK(mode_of(folder) == 0700);
  auto attach = [&] {
    RawDealer peer(ep, "");
    peer.send(proto::encode(proto::Attach{1}));
    return peer.recv_within(3000).empty() ? 1 : 0;
  };
  CHECK(attach() == 0);  // its owner is answered: the check below is not vacuous
  CHECK(other.run(attach) == 1);
  auto st = perf->wait_for(std::chrono::seconds(240));
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  CHECK(has(read_text(dir / "perf.out"), "\"link\":\"ipc\""));
  CHECK(!fs::exists(folder));
}

// Item: another user planted `<db>.owner` (mode 0666, its lock held, naming a fake plaintext
// interchange) beside the store in a shared folder; the victim's run attached there, sent its
// job and started its pools --insecure towards it. The file is now refused, with an error naming
// it, its owner and mode, and nothing connects to the fake endpoint.
TEST_CASE("integration.local_trust.planted_owner_file_is_refused") {
  OtherUser other;
  TempDir dir("trust-owner");
  other.make_shared_folder(dir / "shared");
  const std::string db = dir / "shared/x.db";
  const std::string owner = db + ".owner";
  Listener fake;
  const std::string ep = "tcp://127.0.0.1:" + std::to_string(fake.port);
  // The other user's process: plants the file, holds its lock, and waits to be killed.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t attacker = ::fork();
  if (attacker == 0) {
    ::close(ready[0]);
    other.become();
    std::_Exit([&] {
      const int fd = ::open(owner.c_str(), O_RDWR | O_CREAT, 0666);
      if (fd < 0 || ::fchmod(fd, 0666) != 0) return 1;
      struct flock fl {};
      fl.l_type = F_WRLCK;
      fl.l_whence = SEEK_SET;
      if (::fcntl(fd, F_SETLK, &fl) != 0) return 2;
      const std::string text = "client=" + ep + "\npool=" + ep +
                               "\npid=" + std::to_string(::getpid()) +
                               "\nsecurity=insecure\nkeys=\n";
      if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) return 3;
      if (::write(ready[1], "x", 1) != 1) return 4;
      ::pause();
      return 0;
    }());
  }
  ::close(ready[1]);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);
  write_job(dir, 4, dir / "out.txt");
  auto r = fanout_run(dir, "job.yaml", db);
  ::kill(attacker, SIGKILL);
  ::waitpid(attacker, nullptr, 0);
  INFO("run stderr:\n" << r.err);
  CHECK(r.status.code != 0);
  CHECK(has(r.err, owner));
  CHECK(has(r.err, "fanout_atk_l"));
  CHECK(has(r.err, "mode 0666"));
  CHECK(fake.connections() == 0);  // nothing of the job reached it
  CHECK(!fs::exists(dir / "out.txt"));
}

// Item: links another user planted where fanout creates files are never followed: the store's
// owner file, the ready file's temporary file, and an append_row output path (dangling).
TEST_CASE("integration.local_trust.planted_symlinks_are_not_followed") {
  OtherUser other;
  TempDir dir("trust-links");
  other.make_shared_folder(dir / "shared");
  const std::string victim = dir / "victim.txt";  // a file of the victim's (root's)
  write_file(victim, "precious\n");
  auto plant = [&](const std::string& target, const std::string& link) {
    REQUIRE(other.run([&] { return ::symlink(target.c_str(), link.c_str()) == 0 ? 0 : 1; }) == 0);
  };
  write_job(dir, 3, dir / "out.txt");

  SUBCASE("the store's owner file") {
    const std::string db = dir / "shared/y.db";
    plant(victim, db + ".owner");
    auto r = fanout_run(dir, "job.yaml", db);
    INFO("run stderr:\n" << r.err);
    CHECK(r.status.code != 0);
    CHECK(has(r.err, db + ".owner"));
    CHECK(has(r.err, "symbolic link"));
    CHECK(read_text(victim) == "precious\n");
  }
  SUBCASE("the ready file's temporary file") {
    const std::string ready = dir / "shared/ix.ready";
    plant(victim, ready + ".tmp");
    (void)test_keys_dir();  // its tcp:// endpoints are Curve-encrypted
    fanout::SpawnOptions so;
    so.argv = {interchange_bin(), "--db",        dir / "ix.db", "--ready-file", ready,
               "--log-file",      dir / "ix.log"};
    so.stdin_file = "null";
    so.stderr_file = dir / "ix.err";
    auto ix = fanout::ChildProcess::spawn(so);
    REQUIRE(ix.has_value());
    INFO("interchange:\n" << read_text(dir / "ix.log") << read_text(dir / "ix.err"));
    REQUIRE(wait_until([&] { return !read_ready_file(ready)["client"].empty(); },
                       std::chrono::seconds(60)));
    CHECK(!fs::is_symlink(ready));
    CHECK(read_text(victim) == "precious\n");
    ix->stop();
  }
  SUBCASE("a dangling output path") {
    const std::string target = dir / "created_by_fanout.txt";
    plant(target, dir / "shared/out.txt");
    write_job(dir, 3, dir / "shared/out.txt");
    auto r = fanout_run(dir, "job.yaml", dir / "store/fanout.db");
    INFO("run stderr:\n" << r.err);
    CHECK(r.status.code != 0);
    CHECK(has(r.err, dir / "shared/out.txt"));
    CHECK(has(r.err, "symbolic link"));
    CHECK(!fs::exists(target));
  }
}

// Item: an ad-hoc run's folder was 0755 and its files 0644, so the job file (with the --env
// values), the saved item list and the rows were readable by every local user.
TEST_CASE("integration.local_trust.adhoc_files_are_private") {
  OtherUser other;
  TempDir dir("trust-adhoc");
  const std::string db = dir / "store/fanout.db";
  auto r = run_capture({"/bin/sh", "-c",
                        "printf 'a\\nb\\n' | \"$0\" run -c 'echo {}' --input - --env "
                        "TOKEN=s3cret --db \"$1\" --quiet",
                        fanout_bin(), db},
                       dir.path());
  INFO("run stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  CHECK((r.out == "a\nb\n" || r.out == "b\na\n"));
  const std::string adhoc = dir / "store/adhoc";
  CHECK(mode_of(adhoc) == 0700);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(adhoc)) files.push_back(e.path().string());
  REQUIRE(files.size() == 4);  // the job file, the item list, the rows and the commands' stderr
  for (const auto& f : files) {
    CAPTURE(f);
    CHECK(mode_of(f) == 0600);
    CHECK(other.run([&] { return ::open(f.c_str(), O_RDONLY) < 0 ? 0 : 1; }) == 0);
  }
  // Even were the folder opened again, the files are closed.
  REQUIRE(::chmod(adhoc.c_str(), 0755) == 0);
  for (const auto& f : files) {
    CAPTURE(f);
    CHECK(other.run([&] { return ::open(f.c_str(), O_RDONLY) < 0 ? 0 : 1; }) == 0);
  }
}
