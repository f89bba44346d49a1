// One job's storage failure fails that job only: a standalone interchange runs job A, whose
// append_row output file lies on a 1 MiB tmpfs it fills, beside job B on a healthy disk. A ends
// failed with a reason naming the file and the errno, B succeeds with every row once, and the
// interchange keeps running; a restart with A unfinished in the store does not stop it; and
// `fanout cancel` works on a store no interchange owns. And a run whose logs folder is full says
// that its reports could not be written, and why; `fanout report` writes them later. Needs root
// (mount); SKIP otherwise.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>

#include "fanout/store/db.hpp"
#include "job_fixture.hpp"

using namespace fanout::test;
namespace fs = std::filesystem;

namespace {

// A small tmpfs mounted on a folder for the test's life, unmounted however the test ends.
class SmallTmpfs final {
 public:
  explicit SmallTmpfs(std::string dir) : dir_(std::move(dir)) {
    fs::create_directories(dir_);
    mounted_ = std::system(("mount -t tmpfs -o size=1m tmpfs '" + dir_ + "'").c_str()) == 0;
  }
  ~SmallTmpfs() {
    if (mounted_) (void)std::system(("umount -l '" + dir_ + "'").c_str());
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;
  [[nodiscard]] bool mounted() const noexcept { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

// Each mini-batch's row is 100 KB: twenty of them cannot fit a 1 MiB disk.
const char* kBigRows = R"PY(
import os
def run(mini_batch):
    return [os.path.basename(mini_batch[0]) + " " + "x" * 100000]
)PY";

// The counting job `name` over `data` with its code in `code`, rows into `out`, runs logged to
// `runs`, each run napping 0.05 s.
std::string job_yaml(const std::string& name, const std::string& data, const std::string& out,
                     const std::string& code, const std::string& runs) {
  JobSpec job = counting_job_spec(name, runs, "0.05");
  job.data = data;
  job.output = out;
  job.task = "  type: run_function\n  code: " + code + "\n  entry_script: score.py\n";
  return job_yaml(job);
}

// The job's counts as stored (its job_tallies row) and as a full count of its rows.
std::pair<std::string, std::string> stored_and_counted(const std::string& db,
                                                       const std::string& job) {
  const auto stored = sql_column(
      db,
      "select submitted || ',' || succeeded || ',' || failed || ',' || pending || ',' || running "
      "|| ',' || items_succeeded || ',' || items_failed || ',' || attempts || ',' || "
      "attempts_failed from job_tallies where job_id = " +
          job);
  const auto counted = sql_column(
      db,
      "select count(*) || ',' || coalesce(sum(state = 'succeeded'), 0) || ',' || "
      "coalesce(sum(state = 'failed'), 0) || ',' || coalesce(sum(state = 'pending'), 0) || ',' "
      "|| coalesce(sum(state = 'running'), 0) || ',' || coalesce(sum(CASE WHEN state = "
      "'succeeded' THEN succeeded ELSE 0 END), 0) || ',' || coalesce(sum(CASE state WHEN "
      "'succeeded' THEN failed WHEN 'failed' THEN items ELSE 0 END), 0) || ',' || (select "
      "count(*) from attempts where job_id = " +
          job + ") || ',' || (select count(*) from attempts where job_id = " + job +
          " and status != 'RUN_DONE') from minibatches where job_id = " + job);
  return {stored.empty() ? "" : stored[0], counted.empty() ? "" : counted[0]};
}

void set_running(const std::string& db, long long job) {
  fanout::store::Db conn(db, fanout::store::Db::Mode::ReadWriteCreate);
  conn.exec("PRAGMA busy_timeout=5000");
  conn.exec(
      ("UPDATE jobs SET state='running', reason='', ended=NULL WHERE id=" + std::to_string(job))
          .c_str());
}

}  // namespace

TEST_CASE("integration.storage_failure.a_full_output_disk_fails_its_job_not_the_interchange") {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "SKIP: needs root to mount a small tmpfs (mount -t tmpfs)\n");
    std::_Exit(77);
  }
  TempDir dir("storefail");
  SmallTmpfs disk(dir / "full");
  if (!disk.mounted()) {
    std::fprintf(stderr, "SKIP: cannot mount a tmpfs on %s\n", (dir / "full").c_str());
    std::_Exit(77);
  }
  const std::string db = dir / "fanout.db";
  make_files(dir / "data-a", 20);
  make_files(dir / "data-b", 30);
  write_file(dir / "src-a/score.py", kBigRows);
  write_file(dir / "src-b/score.py", kCountingScript);
  write_file(dir / "a.yaml", job_yaml("full-disk", dir / "data-a", dir / "full/out.txt",
                                      dir / "src-a", dir / "runs-a.txt"));
  write_file(dir / "b.yaml", job_yaml("healthy-disk", dir / "data-b", dir / "out-b.txt",
                                      dir / "src-b", dir / "runs-b.txt"));

  Cluster cl;
  cl.start_interchange(dir.path(), db);
  cl.start_pool(dir.path(), "pool-a", 2);
  auto a = start_run(dir / "a.yaml", db, cl.client_ep, dir / "a");
  auto b = start_run(dir / "b.yaml", db, cl.client_ep, dir / "b");

  auto sa = a.wait_for(std::chrono::seconds(180));
  auto sb = b.wait_for(std::chrono::seconds(180));
  INFO("A stderr:\n"
       << read_text(dir / "a.err") << "\nB stderr:\n"
       << read_text(dir / "b.err") << cl.logs());
  REQUIRE(sa.has_value());
  REQUIRE(sb.has_value());
  const std::string a_id = "(select id from jobs where name='full-disk')";
  const std::string b_id = "(select id from jobs where name='healthy-disk')";

  // A failed, saying which file and why.
  CHECK(sa->code == 1);
  CHECK(sql_column(db, "select state from jobs where id=" + a_id) ==
        std::vector<std::string>{"failed"});
  const auto reason = sql_column(db, "select reason from jobs where id=" + a_id).at(0);
  CHECK(reason.find(dir / "full/out.txt") != std::string::npos);
  CHECK(reason.find("ENOSPC") != std::string::npos);
  // What the store records of A is exactly what its file holds.
  CHECK(sql_int(db, "select coalesce(sum(output_bytes), 0) from minibatches where job_id=" +
                        a_id) == static_cast<long long>(fs::file_size(dir / "full/out.txt")));
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded' and job_id=" +
                        a_id) == static_cast<long long>(read_lines(dir / "full/out.txt").size()));
  // Its counts too: the results taken back were counted out.
  {
    const auto [stored, counted] = stored_and_counted(db, a_id);
    CHECK(stored == counted);
  }

  // B succeeded, every row exactly once, and the interchange still runs.
  CHECK(sb->code == 0);
  check_rows_once(dir / "out-b.txt", 30);
  CHECK(!cl.interchange.poll().has_value());

  // A restart with A unfinished in the store (as an interchange that died on the failure left
  // it): the interchange resumes A, fails it again on its first write, and keeps running.
  cl.interchange.signal(SIGTERM);
  REQUIRE(cl.interchange.wait_for(std::chrono::seconds(30)).has_value());
  set_running(db, sql_int(db, "select id from jobs where name='full-disk'"));
  cl.restart_interchange(dir.path(), db);
  cl.start_pool(dir.path(), "pool-b", 2);  // the stopped interchange sent pool-a away
  CHECK(wait_until(
      [&] { return sql_column(db, "select state from jobs where id=" + a_id).at(0) == "failed"; },
      std::chrono::seconds(60)));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  CHECK(!cl.interchange.poll().has_value());

  // No interchange owns the store: `fanout cancel` marks the job cancelled there.
  cl.interchange.signal(SIGTERM);
  REQUIRE(cl.interchange.wait_for(std::chrono::seconds(30)).has_value());
  for (auto& p : cl.pools) p.signal(SIGTERM);
  set_running(db, sql_int(db, "select id from jobs where name='full-disk'"));
  auto c = run_capture(
      {fanout_bin(), "cancel",
       std::to_string(sql_int(db, "select id from jobs where name='full-disk'")), "--db", db},
      dir.path(), {}, std::chrono::seconds(60));
  INFO("cancel stderr:\n" << c.err);
  CHECK(c.status.code == 0);
  CHECK(sql_column(db, "select state from jobs where id=" + a_id) ==
        std::vector<std::string>{"cancelled"});
  for (const auto& job : {a_id, b_id}) {
    const auto [stored, counted] = stored_and_counted(db, job);
    CHECK(stored == counted);
  }
}

TEST_CASE("integration.storage_failure.a_full_logs_folder_is_said_and_report_writes_it_later") {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "SKIP: needs root to mount a small tmpfs (mount -t tmpfs)\n");
    std::_Exit(77);
  }
  TempDir dir("fulllogs");
  const std::string run_dir = dir / "run";
  fs::create_directories(run_dir);
  if (std::system(("mount -t tmpfs -o size=512k tmpfs '" + run_dir + "'").c_str()) != 0) {
    std::fprintf(stderr, "SKIP: cannot mount a tmpfs on %s\n", run_dir.c_str());
    std::_Exit(77);
  }
  struct Unmount {
    std::string dir;
    ~Unmount() { (void)std::system(("umount -l '" + dir + "'").c_str()); }
  } unmount{run_dir};
  // Nearly full before the job starts: its logs begin, its reports do not fit.
  (void)std::system(
      ("dd if=/dev/zero of='" + run_dir + "/filler' bs=1k count=440 status=none 2>/dev/null")
          .c_str());
  const std::string db = dir / "fanout.db";
  make_counting_job(dir.path(), "full-logs", 8, "0.05");
  auto r = fanout_run(dir, "job.yaml", db, {"--run-dir", run_dir});
  INFO("client stderr:\n" << r.err);
  CHECK(read_lines(dir / "out.txt").size() == 8);
  CHECK(r.err.find("reports could not be written") != std::string::npos);
  CHECK(r.err.find("fanout report") != std::string::npos);
  const long long job = sql_int(db, "select max(id) from jobs");
  const std::string logs =
      sql_column(db, "select log_dir from jobs where id=" + std::to_string(job)).at(0);

  // With room again, `fanout report` writes them.
  fs::remove(run_dir + "/filler");
  auto rep = run_capture({fanout_bin(), "report", std::to_string(job), "--db", db}, dir.path());
  INFO("report stderr:\n" << rep.err);
  CHECK(rep.status.code == 0);
  CHECK(read_text(logs + "/job_result.txt").find("succeeded") != std::string::npos);
}
