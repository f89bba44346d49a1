// What another local user can plant where fanout keeps a store (docs/security.md, "The store's
// files"): a WAL beside the victim's store holding the attacker's crashed job, a store of their
// own writable by all, a link at the store's path for a root interchange, a folder where
// `fanout explore` would put its runs. Each attack is played by a second local user made for the
// test (useradd); those cases exit 77 (SKIP) unless run as root. The first case needs no user.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "job_fixture.hpp"
#include "other_user.hpp"

using namespace fanout::test;
namespace fs = std::filesystem;

namespace {

constexpr const char* kUser = "fanout_atk_s";

// The attacker's tool: from a store of theirs holding a crashed job (`src`), a WAL file that
// holds every page of it (`wal_out`), and the store as one file in rollback-journal mode
// (`db_out`). SQLite takes a WAL beside a store as that store's newest pages.
constexpr const char* kForgeWal = R"PY(
import os, shutil, sqlite3, sys
src, wal_out, db_out = sys.argv[1:4]
s = sqlite3.connect(src)
page_size = s.execute("PRAGMA page_size").fetchone()[0]
f = sqlite3.connect(db_out)
s.backup(f)
f.execute("PRAGMA journal_mode=DELETE")
f.close()
d = sqlite3.connect(wal_out + ".src", isolation_level=None)
d.execute("PRAGMA page_size=%d" % page_size)
d.execute("PRAGMA journal_mode=WAL")
d.execute("PRAGMA wal_autocheckpoint=0")
s.backup(d)
shutil.copyfile(wal_out + ".src-wal", wal_out)
os._exit(0)  # no close: a close would checkpoint the WAL away
)PY";

// A store whose job crashed with every mini-batch pending: its pools never came, its interchange
// was killed. Resumed, its entry script (the counting script) appends to `folder`/runs.txt.
struct CrashedStore {
  std::string wal;   // its pages as a WAL
  std::string db;    // it as one file
  std::string runs;  // what its job's entry script appends to when it runs
};

CrashedStore crashed_store(const std::string& folder) {
  const std::string db = folder + "/crashed.db";
  make_counting_job(folder, "attacker", 4, "0");
  Cluster cl;
  cl.start_interchange(folder, db, fast_beats());
  auto client = start_run(folder + "/job.yaml", db, cl.client_ep, folder + "/client");
  REQUIRE(wait_until([&] { return sql_int_or(db, "select count(*) from minibatches") == 4; },
                     std::chrono::seconds(60)));
  cl.interchange.signal(SIGKILL);
  REQUIRE(cl.interchange.wait_for(std::chrono::seconds(30)).has_value());
  client.signal(SIGKILL);
  (void)client.wait_for(std::chrono::seconds(30));
  REQUIRE(sql_column(db, "select state from jobs") == std::vector<std::string>{"running"});
  CrashedStore out{folder + "/forged.wal", folder + "/forged.db", folder + "/runs.txt"};
  auto forged = run_capture({"/usr/bin/python3", "-c", kForgeWal, db, out.wal, out.db}, folder);
  INFO("forge: " << forged.err);
  REQUIRE(forged.status.code == 0);
  return out;
}

// `bytes` written as the other user at `path` with `mode` (whatever their umask).
void plant(const OtherUser& other, const std::string& path, const std::string& bytes, mode_t mode) {
  REQUIRE(other.run([&] {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, mode);
    if (fd < 0 || ::fchmod(fd, mode) != 0) return 1;
    const bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
    ::close(fd);
    return ok ? 0 : 2;
  }) == 0);
}

RunResult run_job(const std::string& folder, const std::string& db) {
  return run_capture(run_argv(folder + "/job.yaml", db, ""), folder);
}

}  // namespace

// `--metrics-listen A,B` listened on both addresses and logged a wrong URL.
TEST_CASE("integration.store_trust.a_list_of_metrics_addresses_is_refused") {
  TempDir dir("trust-metrics");
  (void)test_keys_dir();  // its tcp:// endpoints are Curve-encrypted
  auto r = run_capture({interchange_bin(), "--db", dir / "ix.db", "--metrics-listen",
                        "127.0.0.1:0,127.0.0.2:0", "--log-file", dir / "ix.log"},
                       dir.path(), {}, std::chrono::seconds(60));
  const std::string said = r.err + read_text(dir / "ix.log");
  INFO("interchange:\n" << said);
  CHECK(r.status.code == 1);
  CHECK(has(said, "--metrics-listen: expected one HOST:PORT (got '127.0.0.1:0,127.0.0.2:0')"));
  CHECK(!has(said, "/metrics"));
}

// in a shared sticky folder (as /tmp), another user wrote `v.db-wal` beside
// the victim's own 0600 `v.db`: a WAL holding their crashed job. The victim's next run resumed
// that job and ran its entry script as the victim. The WAL is now refused, naming it, its owner
// and mode, by the run and by `fanout history`; nothing of the attacker's job runs.
TEST_CASE("integration.store_trust.a_wal_planted_beside_the_store_is_refused") {
  OtherUser other(kUser);
  TempDir dir("trust-wal");
  make_sticky_folder(dir / "shared", 0, 0);
  const std::string db = dir / "shared/v.db";
  JobSpec victim;
  victim.name = "victim";
  victim.output = dir / "victim/out.txt";
  make_echo_job(dir / "victim", 3, victim);
  auto first = run_job(dir / "victim", db);
  INFO("first run:\n" << first.err);
  REQUIRE(first.status.code == 0);
  REQUIRE(!fs::exists(db + "-wal"));  // the last close checkpointed it away

  const auto attacker = crashed_store(dir / "atk");
  plant(other, db + "-wal", read_text(attacker.wal), 0644);
  fs::remove(dir / "victim/out.txt");
  auto again = run_job(dir / "victim", db);
  INFO("second run:\n" << again.err);
  CHECK(again.status.code != 0);
  CHECK(has(again.err, db + "-wal"));
  CHECK(has(again.err, kUser));
  CHECK(has(again.err, "mode 0644"));
  CHECK(!has(again.err, "resuming"));
  CHECK(!fs::exists(attacker.runs));  // the attacker's entry script never ran
  // A reader refuses it too: it would show the attacker's jobs as the victim's.
  auto history = run_capture({fanout_bin(), "history", "--db", db}, dir.path());
  INFO("history:\n" << history.out << history.err);
  CHECK(history.status.code != 0);
  CHECK(has(history.err, db + "-wal"));
  CHECK(!has(history.out, "attacker"));
}

// a store another user made, writable by everyone (0666) and holding their
// crashed job, was opened by the victim's run, and a root interchange, and the job resumed.
TEST_CASE("integration.store_trust.a_store_of_another_user_is_refused") {
  OtherUser other(kUser);
  TempDir dir("trust-store");
  make_sticky_folder(dir / "shared", 0, 0);
  const std::string db = dir / "shared/w.db";
  const auto attacker = crashed_store(dir / "atk");
  plant(other, db, read_text(attacker.db), 0666);
  JobSpec victim;
  victim.name = "victim";
  victim.output = dir / "victim/out.txt";
  make_echo_job(dir / "victim", 3, victim);

  SUBCASE("fanout run") {
    auto r = run_job(dir / "victim", db);
    INFO("run:\n" << r.err);
    CHECK(r.status.code != 0);
    CHECK(has(r.err, db));
    CHECK(has(r.err, kUser));
    CHECK(has(r.err, "mode 0666"));
  }
  SUBCASE("a root fanout-interchange") {
    (void)test_keys_dir();  // its tcp:// endpoints are Curve-encrypted
    auto r = run_capture({interchange_bin(), "--db", db, "--log-file", dir / "ix.log"}, dir.path(),
                         {}, std::chrono::seconds(60));
    const std::string said = r.err + read_text(dir / "ix.log");
    INFO("interchange:\n" << said);
    CHECK(r.status.code != 0);
    CHECK(has(said, db));
    CHECK(has(said, "mode 0666"));
    CHECK(!has(said, "resuming"));
  }
  CHECK(!fs::exists(attacker.runs));
}

// a link another user planted at the store's path made a root interchange
// create the link's target (mode 0644): `stat` followed the link, and O_EXCL's EEXIST was taken
// for "another process made the store". The link is now refused and nothing is created.
TEST_CASE("integration.store_trust.a_link_at_the_store_path_is_refused") {
  OtherUser other(kUser);
  TempDir dir("trust-link");
  (void)test_keys_dir();  // its tcp:// endpoints are Curve-encrypted
  make_sticky_folder(dir / "shared", other.uid(), other.gid());
  const std::string db = dir / "shared/x.db";
  const std::string target = dir / "created_by_root.db";
  REQUIRE(other.run([&] { return ::symlink(target.c_str(), db.c_str()) == 0 ? 0 : 1; }) == 0);
  auto r = run_capture({interchange_bin(), "--db", db, "--log-file", dir / "ix.log"}, dir.path(),
                       {}, std::chrono::seconds(60));
  const std::string said = r.err + read_text(dir / "ix.log");
  INFO("interchange:\n" << said);
  CHECK(r.status.code != 0);
  CHECK(has(said, db));
  CHECK(has(said, "symbolic link"));
  CHECK(!fs::exists(target));
  CHECK(fs::is_symlink(db));
}

// `fanout explore` put its runs (job files, outputs, logs) in
// <store folder>/explore/<experiment id>, a predictable name, and used a folder another user had
// made there. Its scratch folder is now made by mkdtemp inside an explore/ folder of the victim's
// own; one of another user is refused before anything runs.
TEST_CASE("integration.store_trust.explore_refuses_a_scratch_folder_of_another_user") {
  OtherUser other(kUser);
  TempDir dir("trust-explore");
  make_sticky_folder(dir / "shared", 0, 0);
  REQUIRE(other.run([&] {
    const std::string f = dir / "shared/explore";
    return ::mkdir(f.c_str(), 0777) == 0 && ::chmod(f.c_str(), 0777) == 0 ? 0 : 1;
  }) == 0);
  JobSpec job;
  job.name = "explored";
  job.output = dir / "out.txt";
  // Enough items that explore's sample check passes and it gets as far as its scratch folder.
  make_echo_job(dir.path(), 32, job);
  auto r = run_capture(
      {fanout_bin(), "explore", dir / "job.yaml", "--db", dir / "shared/e.db", "--budget", "1s",
       "--factor", "mini_batch_size=1,2", "--sample", "100%", "--python", python_bin()},
      dir.path());
  INFO("explore:\n" << r.out << r.err);
  CHECK(r.status.code != 0);
  CHECK(has(r.err, dir / "shared/explore"));
  CHECK(has(r.err, kUser));
  CHECK(fs::is_empty(dir / "shared/explore"));
  CHECK(!fs::exists(dir / "out.txt"));
}
