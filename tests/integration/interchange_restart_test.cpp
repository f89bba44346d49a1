// Interchange crash and resume through the real binaries. A standalone interchange is
// SIGKILLed mid-job, after some mini-batches committed and while its client is still submitting
// (a small --window keeps the submission going), then started again on the same store and
// endpoints: the pools re-register (they are told "not registered"), the client reattaches and
// resubmits from the count the new interchange reports, and the job completes with every row
// exactly once and no succeeded mini-batch run twice; the same with mini-batches the interchange
// accepted but never committed, which the client must send again. Also: a job whose client is gone
// too still finishes, `fanout wait` reports it, `fanout resume` finishes a job on a private
// interchange, and `fanout cancel` stops a running job by id.
#include <doctest/doctest.h>
#include <signal.h>

#include <map>
#include <set>

#include "fanout/store/db.hpp"
#include "job_fixture.hpp"

using namespace fanout::test;

namespace {

const std::vector<std::string> kFastBeats = fast_beats();

std::vector<std::string> ix_args(const std::vector<std::string>& more) {
  std::vector<std::string> a = kFastBeats;
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

std::multiset<std::string> lines_of(const std::string& path) {
  auto v = read_lines(path);
  return {v.begin(), v.end()};
}

// Alive and not a zombie (an orphan is reaped by whoever adopted it, maybe late).
bool running(long long pid) {
  if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) != 0) return false;
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

std::string file_name(const std::string& mb_index) {
  char name[32];
  std::snprintf(name, sizeof name, "file%05d.txt", std::stoi(mb_index));
  return name;
}

// A counting job over `files` files (each run naps `nap` s) on a standalone interchange started
// with `ix_extra` and one pool, pool-a, of 2 workers. Returns the `fanout run` client.
fanout::ChildProcess start_counting_job(const TempDir& dir, const std::string& db, int files,
                                        const std::string& nap,
                                        const std::vector<std::string>& ix_extra, Cluster& cl) {
  make_counting_job(dir.path(), "ix-restart", static_cast<unsigned>(files), nap);
  cl.start_interchange(dir.path(), db, ix_extra);
  cl.start_pool(dir.path(), "pool-a", 2);
  return start_run(dir / "job.yaml", db, cl.client_ep, dir / "client");
}

// Job 1's counts as stored (its job_tallies row, which view job_counts reads) and as a full scan
// of its rows finds them; each "submitted,succeeded,failed,pending,running,attempts,failed".
std::pair<std::string, std::string> stored_and_scanned_counts(const std::string& db) {
  const auto stored = sql_column(
      db,
      "select submitted || ',' || succeeded || ',' || failed || ',' || pending || ',' || running "
      "|| ',' || attempts || ',' || attempts_failed from job_tallies where job_id = 1");
  const auto scanned = sql_column(
      db,
      "select count(*) || ',' || coalesce(sum(state = 'succeeded'), 0) || ',' || "
      "coalesce(sum(state = 'failed'), 0) || ',' || coalesce(sum(state = 'pending'), 0) || ',' "
      "|| coalesce(sum(state = 'running'), 0) || ',' || (select count(*) from attempts where "
      "job_id = 1) || ',' || (select count(*) from attempts where job_id = 1 and status != "
      "'RUN_DONE') from minibatches where job_id = 1");
  return {stored.empty() ? "" : stored[0], scanned.empty() ? "" : scanned[0]};
}

}  // namespace

TEST_CASE("integration.interchange_restart.job_completes_rows_once_nothing_succeeded_reruns") {
  TempDir dir("ixrestart");
  const std::string db = dir / "fanout.db";
  Cluster cl;
  auto client = start_counting_job(dir, db, 40, "0.2", ix_args({"--window", "8"}), cl);
  const std::string client_ep = cl.client_ep;

  REQUIRE(wait_until(
      [&] { return sql_int(db, "select count(*) from minibatches where state='succeeded'") >= 8; },
      std::chrono::seconds(60)));
  cl.interchange.signal(SIGKILL);
  (void)cl.interchange.wait_for(std::chrono::seconds(10));
  const auto done_before = sql_column(db, "select id from minibatches where state='succeeded'");
  const auto known_before = sql_int(db, "select count(*) from minibatches");
  // The window keeps the client submitting: the store knows only part of the input.
  CHECK(known_before < 40);
  CHECK(sql_int(db, "select submit_done from jobs where id=1") == 0);
  // The counts stored as results committed equal a full count of what the killed one committed.
  {
    const auto [stored, scanned] = stored_and_scanned_counts(db);
    CHECK(stored == scanned);
  }

  // Same store, same endpoints.
  const std::string first_log = cl.ix_log;
  cl.restart_interchange(dir.path(), db, ix_args({"--window", "8"}));
  REQUIRE(cl.client_ep == client_ep);

  auto st = client.wait_for(std::chrono::seconds(180));
  INFO("client stderr:\n" << read_text(dir / "client.err") << cl.logs());
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  CHECK(read_text(dir / "client.err").find("reattached to job 1") != std::string::npos);
  check_rows_once(dir / "out.txt", 40);
  CHECK(sql_column(db, "select state from jobs where id=1") ==
        std::vector<std::string>{"succeeded"});
  CHECK(sql_int(db, "select total from jobs where id=1") == 40);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 40);
  // At most one RUN_DONE per mini-batch: exactly one each.
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 40);
  CHECK(sql_int(db,
                "select count(*) from (select minibatch_id from attempts where "
                "status='RUN_DONE' group by minibatch_id having count(*) > 1)") == 0);
  // No mini-batch that had succeeded before the crash ran again.
  auto runs = lines_of(dir / "runs.txt");
  REQUIRE(!done_before.empty());
  for (const auto& id : done_before) {
    CAPTURE(id);
    CHECK(runs.count(file_name(id)) == 1);
  }
  // The pool was told it was not registered, and registered again with the new interchange.
  CHECK(read_text(cl.pool_logs[0]).find("not registered") != std::string::npos);
  CHECK(sql_int(db, "select count(*) from pools where name='pool-a'") == 1);
  CHECK(sql_int(db, "select registrations from pools where name='pool-a'") >= 2);
  CHECK(!cl.pools[0].poll().has_value());
  // The stored counts still equal a full count after the restart's recovery and the rest.
  {
    const auto [stored, scanned] = stored_and_scanned_counts(db);
    CHECK(stored == scanned);
    CHECK(stored.rfind("40,40,0,0,0,", 0) == 0);
  }
  // INFO lines reach the log file when the interchange stops.
  cl.interchange.signal(SIGTERM);
  CHECK(cl.interchange.wait_for(std::chrono::seconds(30)).has_value());
  CHECK(read_text(cl.ix_log).find("resuming job 1") != std::string::npos);
}

// The client's own resubmission path: the interchange dies while the client is held back by a
// window of 4 with most of a 150-file input still to list, and after it had accepted mini-batches
// it never committed. A write lock the test holds on the store (as a user's sqlite3 session
// could) keeps the interchange's writer waiting meanwhile; the interchange keeps dispatching from
// memory, so results free the window and the client submits more. The same client process must
// notice the restart, learn how many mini-batches the new interchange recorded, list the input
// again from there and finish submitting.
TEST_CASE("integration.issue_4.client_blocked_on_window_resubmits_after_interchange_restart") {
  TempDir dir("ixresubmit");
  const std::string db = dir / "fanout.db";
  constexpr int kFiles = 150;
  Cluster cl;
  auto client = start_counting_job(dir, db, kFiles, "0.05", ix_args({"--window", "4"}), cl);
  const std::string client_ep = cl.client_ep;

  REQUIRE(wait_until(
      [&] { return sql_int(db, "select count(*) from minibatches where state='succeeded'") >= 10; },
      std::chrono::seconds(60)));
  {
    // The interchange's writer waits up to 5 s for this lock (busy_timeout) before it gives up:
    // the kill comes well before that.
    fanout::store::Db lock_conn(db, fanout::store::Db::Mode::ReadWriteCreate);
    lock_conn.exec("PRAGMA busy_timeout=5000");
    fanout::store::Transaction lock(lock_conn);
    const auto runs_at_lock = read_lines(dir / "runs.txt").size();
    REQUIRE(wait_until([&] { return read_lines(dir / "runs.txt").size() >= runs_at_lock + 8; },
                       std::chrono::milliseconds(2500)));
    cl.interchange.signal(SIGKILL);
    (void)cl.interchange.wait_for(std::chrono::seconds(10));
  }
  REQUIRE(!client.poll().has_value());
  const auto done_before = sql_column(db, "select id from minibatches where state='succeeded'");
  const auto known_before = sql_int(db, "select count(*) from minibatches");
  // Committed before the kill: some mini-batches, a prefix of the input; the window held the
  // rest back in the client, which had not finished submitting.
  CHECK(done_before.size() >= 10);
  CHECK(known_before < kFiles / 2);
  CHECK(sql_int(db, "select max(id) + 1 from minibatches") == known_before);
  CHECK(sql_int(db, "select submit_done from jobs where id=1") == 0);

  cl.restart_interchange(dir.path(), db, ix_args({"--window", "4"}));
  REQUIRE(cl.client_ep == client_ep);

  auto st = client.wait_for(std::chrono::seconds(180));
  const std::string client_err = read_text(dir / "client.err");
  INFO("client stderr:\n" << client_err << cl.logs());
  REQUIRE(st.has_value());
  CHECK(st->code == 0);
  CHECK(client_err.find("reattached to job 1") != std::string::npos);
  // It had sent more than the new interchange knows, and sent those again.
  CHECK(client_err.find("the interchange knows " + std::to_string(known_before) + " of ") !=
        std::string::npos);
  CHECK(client_err.find("resubmitting from there") != std::string::npos);

  // The input, once: every mini-batch recorded, the submission ended, every row written once.
  CHECK(sql_column(db, "select state from jobs where id=1") ==
        std::vector<std::string>{"succeeded"});
  CHECK(sql_int(db, "select submit_done from jobs where id=1") == 1);
  CHECK(sql_int(db, "select total from jobs where id=1") == kFiles);
  CHECK(sql_int(db, "select count(*) from minibatches") == kFiles);
  CHECK(sql_int(db, "select max(id) + 1 from minibatches") == kFiles);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == kFiles);
  check_rows_once(dir / "out.txt", kFiles);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == kFiles);
  CHECK(sql_int(db,
                "select count(*) from (select minibatch_id from attempts where "
                "status='RUN_DONE' group by minibatch_id having count(*) > 1)") == 0);
  auto runs = lines_of(dir / "runs.txt");
  for (const auto& id : done_before) {
    CAPTURE(id);
    CHECK(runs.count(file_name(id)) == 1);
  }
}

TEST_CASE("integration.interchange_restart.job_without_client_finishes_and_wait_reports_it") {
  TempDir dir("ixorphan");
  const std::string db = dir / "fanout.db";
  Cluster cl;
  auto client = start_counting_job(dir, db, 24, "0.2", kFastBeats, cl);
  REQUIRE(wait_until([&] { return submitted_and_done(db, 4); }, std::chrono::seconds(60)));
  // Both the client and the interchange die; the interchange comes back alone.
  kill_all({&client, &cl.interchange});
  const auto done_before = sql_column(db, "select id from minibatches where state='succeeded'");
  cl.restart_interchange(dir.path(), db, kFastBeats);
  INFO(cl.logs());
  REQUIRE(wait_until(
      [&] { return sql_column(db, "select state from jobs where id=1")[0] != "running"; },
      std::chrono::seconds(120)));
  CHECK(sql_column(db, "select state from jobs where id=1") ==
        std::vector<std::string>{"succeeded"});
  check_rows_once(dir / "out.txt", 24);
  auto runs = lines_of(dir / "runs.txt");
  for (const auto& id : done_before) CHECK(runs.count(file_name(id)) == 1);

  // fanout wait on the ended job reports it from the store.
  auto w = run_capture({fanout_bin(), "wait", "1", "--db", db}, dir.path(), {},
                       std::chrono::seconds(60));
  CHECK(w.status.code == 0);
  CHECK(w.err.find("job 1 succeeded") != std::string::npos);
}

TEST_CASE("integration.interchange_restart.resume_finishes_and_cancel_stops_by_id") {
  TempDir dir("ixresume");
  const std::string db = dir / "fanout.db";
  Cluster cl;
  auto client = start_counting_job(dir, db, 24, "0.2", kFastBeats, cl);
  REQUIRE(wait_until([&] { return submitted_and_done(db, 4); }, std::chrono::seconds(60)));
  // Everything dies; `fanout resume` finishes the job on a private interchange and pool.
  kill_all({&client, &cl.interchange, &cl.pools[0]});
  const auto done_before = sql_column(db, "select id from minibatches where state='succeeded'");
  auto r =
      run_capture({fanout_bin(), "resume", "1", "--db", db, "--python", python_bin(), "--quiet"},
                  dir.path(), {}, std::chrono::seconds(180));
  INFO("resume stderr:\n" << r.err);
  CHECK(r.status.code == 0);
  CHECK(r.err.find("job 1 succeeded") != std::string::npos);
  CHECK(sql_column(db, "select state from jobs where id=1") ==
        std::vector<std::string>{"succeeded"});
  check_rows_once(dir / "out.txt", 24);
  auto runs = lines_of(dir / "runs.txt");
  for (const auto& id : done_before) CHECK(runs.count(file_name(id)) == 1);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 24);

  // A second job on a fresh interchange, cancelled by id from another process.
  Cluster c2;
  c2.start_interchange(dir.path(), db, kFastBeats);
  c2.start_pool(dir.path(), "pool-c", 1);
  write_file(dir / "slow.yaml", counting_job_yaml("ix-restart", dir / "slow-runs.txt", "30"));
  // It shares the first job's out.txt, which a new job may replace only with --overwrite.
  auto slow = start_run(dir / "slow.yaml", db, c2.client_ep, dir / "slow", {"--overwrite"});
  REQUIRE(wait_until([&] { return !read_text(dir / "slow-runs.txt").empty(); },
                     std::chrono::seconds(60)));
  const auto job = sql_int(db, "select max(id) from jobs");
  auto c = run_capture({fanout_bin(), "cancel", std::to_string(job), "--db", db}, dir.path(), {},
                       std::chrono::seconds(60));
  INFO("cancel stderr:\n" << c.err << c2.logs());
  // cancel's exit statuses (README): 0 it cancelled the job ...
  CHECK(c.status.code == 0);
  CHECK(c.err.find("cancelled") != std::string::npos);
  auto st = slow.wait_for(std::chrono::seconds(60));
  REQUIRE(st.has_value());
  CHECK(st->code == 1);
  CHECK(sql_column(db, "select state from jobs where id=" + std::to_string(job)) ==
        std::vector<std::string>{"cancelled"});
  CHECK(sql_int(db, "select count(*) from attempts where status='CANCELLED' and job_id=" +
                        std::to_string(job)) == 1);
  // ... 1 the job had already ended: nothing cancelled; 2 no such job.
  auto again = run_capture({fanout_bin(), "cancel", std::to_string(job), "--db", db}, dir.path());
  INFO("second cancel stderr:\n" << again.err);
  CHECK(again.status.code == 1);
  CHECK(again.err.find("had already ended; nothing cancelled") != std::string::npos);
  CHECK(run_capture({fanout_bin(), "cancel", "999", "--db", db}, dir.path()).status.code == 2);
}

TEST_CASE("integration.interchange_restart.embedded_job_outlives_its_client_and_wait_follows") {
  TempDir dir("clientgone");
  const std::string db = dir / "fanout.db";
  make_counting_job(dir.path(), "ix-restart", 16, "0.4");
  // The embedded default: a private interchange and pool, children of the client.
  auto client = start_run(dir / "job.yaml", db, "", dir / "client");
  // The store exists once the private interchange has started (until then a query throws).
  REQUIRE(wait_until(
      [&] {
        return sql_int_or(db, "select count(*) from minibatches where state='succeeded'") >= 2;
      },
      std::chrono::seconds(60)));
  client.signal(SIGKILL);
  (void)client.wait_for(std::chrono::seconds(10));
  // `fanout wait` finds the private interchange through the run folder and follows the job.
  auto w = run_capture({fanout_bin(), "wait", "1", "--db", db}, dir.path(), {},
                       std::chrono::seconds(120));
  INFO("wait stderr:\n" << w.err);
  CHECK(w.status.code == 0);
  CHECK(w.err.find("job 1 succeeded") != std::string::npos);
  CHECK(sql_column(db, "select state from jobs where id=1") ==
        std::vector<std::string>{"succeeded"});
  check_rows_once(dir / "out.txt", 16);
  // The orphaned interchange exits once idle and stops its pool.
  const auto ix_pid = std::stoll(read_ready_file(
      sql_column(db, "select log_dir from jobs where id=1")[0] + "/../interchange.ready")["pid"]);
  CHECK(wait_until([&] { return !running(ix_pid); }, std::chrono::seconds(60)));
}
