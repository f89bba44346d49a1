// Thresholds and job timeouts through the real binaries: each of error_threshold,
// mini_batch_error_threshold, --allowed_failed_count and allowed_failed_percent crossed in a small
// job, and --progress_update_timeout / --first_task_creation_timeout expiring. The job ends
// `failed` with the threshold named in jobs.reason and logs/job_result.txt, the client exits 1,
// and the attempt still running is stopped: recorded CANCELLED, its worker killed by its pool
// (DropJob), while the pool lives on and serves the next job.
#include <doctest/doctest.h>
#include <signal.h>

#include <cerrno>

#include "job_fixture.hpp"

using namespace fanout::test;

namespace {

// file00000 sleeps (writing its pid first); every other mini-batch raises, once file00000 is
// running, so that a threshold is never crossed before there is a running attempt to stop.
const char* kScript = R"PY(
import os, time
def run(mini_batch):
    name = os.path.basename(mini_batch[0])
    pidfile = os.environ["PIDFILE"]
    if name == "file00000.txt":
        with open(pidfile + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(pidfile + ".tmp", pidfile)
        time.sleep(600)
    for _ in range(6000):
        if os.path.exists(pidfile):
            break
        time.sleep(0.01)
    raise RuntimeError("broken " + name)
)PY";

// A job `name` over ./data, rows into ./<name>.txt, no retries, with the top-level `keys` and
// the program arguments `args`.
std::string job_yaml(const std::string& name, const std::string& pidfile, const std::string& keys,
                     const std::string& args) {
  JobSpec job;
  job.name = name;
  job.output = "./" + name + ".txt";
  job.concurrency.reset();
  job.max_retries = 0;
  job.timeout_s = 900;
  job.top = keys.empty() ? std::string() : keys + "\n";
  job.env = {{"PIDFILE", pidfile}};
  job.program_arguments = args;
  return job_yaml(job);
}

bool process_alive(long long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0); }

}  // namespace

TEST_CASE("integration.thresholds.each_threshold_fails_the_job_and_stops_running_attempts") {
  TempDir dir("thresholds");
  const std::string db = dir / "fanout.db";
  make_files(dir / "data", 10);
  write_file(dir / "src/score.py", kScript);
  Cluster cl;
  cl.start_interchange(dir.path(), db);
  cl.start_pool(dir.path(), "pool-t", 3, {"--kill-grace-ms", "1000"});

  struct Case {
    std::string name, keys, args, reason;
  };
  const std::vector<Case> cases = {
      {"errthr", "error_threshold: 2", "", "error_threshold exceeded: 3 failed items > 2"},
      {"mbthr", "mini_batch_error_threshold: 1", "",
       "mini_batch_error_threshold exceeded: 2 failed mini-batches > 1"},
      {"failcount", "", "--allowed_failed_count 1",
       "mini_batch_error_threshold exceeded: 2 failed mini-batches > 1"},
      {"failpct", "allowed_failed_percent: 10", "", "allowed_failed_percent exceeded: "},
  };
  long long job = 0;
  for (const auto& c : cases) {
    CAPTURE(c.name);
    ++job;
    const std::string pidfile = dir / (c.name + ".pid");
    write_file(dir / (c.name + ".yaml"), job_yaml(c.name, pidfile, c.keys, c.args));
    auto r = run_capture(run_argv(dir / (c.name + ".yaml"), db, cl.client_ep), dir.path(), {},
                         std::chrono::seconds(180));
    INFO("client stderr:\n" << r.err << cl.logs());
    CHECK(r.status.code == 1);
    CHECK(r.err.find(c.reason) != std::string::npos);
    const std::string where = "from jobs where id=" + std::to_string(job);
    REQUIRE(sql_column(db, "select state " + where) == std::vector<std::string>{"failed"});
    const std::string reason = sql_column(db, "select reason " + where)[0];
    CHECK(reason.find(c.reason) != std::string::npos);
    const std::string log_dir = sql_column(db, "select log_dir " + where)[0];
    const std::string result = read_text(log_dir + "/job_result.txt");
    CHECK(result.find("state: failed") != std::string::npos);
    CHECK(result.find(c.reason) != std::string::npos);

    // The sleeping attempt of mini-batch 0 was stopped: CANCELLED in the store, and its worker
    // killed by the pool, which keeps running.
    const std::string a = " from attempts where job_id=" + std::to_string(job);
    CHECK(sql_column(db, "select status" + a + " and minibatch_id=0") ==
          std::vector<std::string>{"CANCELLED"});
    CHECK(sql_int(db, "select count(*)" + a + " and status='RUN_DONE'") == 0);
    CHECK(sql_int(db, "select count(*)" + a +
                          " and status not in "
                          "('RUN_EXCEPTION','CANCELLED')") == 0);
    REQUIRE(wait_until([&] { return !read_text(pidfile).empty(); }, std::chrono::seconds(30)));
    const long long pid = std::stoll(read_text(pidfile));
    CHECK(wait_until([&] { return !process_alive(pid); }, std::chrono::seconds(60)));
    CHECK(!cl.pools[0].poll().has_value());
  }
  // The failed mini-batches match each reason exactly: the first to cross ends the job.
  CHECK(sql_int(db, "select count(*) from minibatches where job_id=1 and state='failed'") == 3);
  CHECK(sql_int(db, "select count(*) from minibatches where job_id=2 and state='failed'") == 2);
  CHECK(sql_int(db, "select count(*) from minibatches where job_id=3 and state='failed'") == 2);
  // allowed_failed_percent is checked once all 10 are submitted: 2 failures (20%) or more if
  // they came back before the client's SubmitEnd.
  CHECK(sql_int(db, "select count(*) from minibatches where job_id=4 and state='failed'") >= 2);
  CHECK(!cl.interchange.poll().has_value());
}

TEST_CASE("integration.thresholds.progress_and_first_task_timeouts_end_the_job") {
  TempDir dir("timeouts");
  const std::string db = dir / "fanout.db";
  make_files(dir / "data", 4);
  write_file(dir / "src/score.py", kScript);
  Cluster cl;
  cl.start_interchange(dir.path(), db);

  // No pool at all: no mini-batch can start.
  write_file(dir / "first.yaml",
             job_yaml("first", dir / "first.pid", "", "--first_task_creation_timeout 2"));
  auto r = run_capture(run_argv(dir / "first.yaml", db, cl.client_ep), dir.path(), {},
                       std::chrono::seconds(120));
  INFO("client stderr:\n" << r.err << cl.logs());
  CHECK(r.status.code == 1);
  CHECK(sql_column(db, "select reason from jobs where id=1")[0].find(
            "first_task_creation_timeout exceeded") != std::string::npos);

  // A pool whose only worker hangs in mini-batch 0 (no run timeout to save it).
  cl.start_pool(dir.path(), "pool-p", 1);
  write_file(dir / "progress.yaml",
             job_yaml("progress", dir / "progress.pid", "", "--progress_update_timeout 3"));
  r = run_capture(run_argv(dir / "progress.yaml", db, cl.client_ep), dir.path(), {},
                  std::chrono::seconds(120));
  INFO("client stderr:\n" << r.err << cl.logs());
  CHECK(r.status.code == 1);
  const std::string reason = sql_column(db, "select reason from jobs where id=2")[0];
  CHECK(reason.find("progress_update_timeout exceeded") != std::string::npos);
  CHECK(sql_column(db, "select status from attempts where job_id=2 and minibatch_id=0") ==
        std::vector<std::string>{"CANCELLED"});
  CHECK(read_text(sql_column(db, "select log_dir from jobs where id=2")[0] + "/job_result.txt")
            .find("progress_update_timeout") != std::string::npos);
}
