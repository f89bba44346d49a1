// Worker deaths, timeouts and exceptions through the real binaries: an entry script
// that SIGKILLs its own worker, calls os._exit(3), segfaults or hangs on the first try of chosen
// mini-batches, and raises on every try of another. Each failure costs only its attempt; the
// store records each with its status and the exit code or signal; the output holds every
// succeeded mini-batch's row exactly once.
#include <doctest/doctest.h>

#include <map>

#include "job_fixture.hpp"

using namespace fanout::test;

namespace {

// A marker file per mini-batch says whether this is its first try.
const std::string kScript = std::string(kFirstTryPy) + R"PY(
import ctypes, os, signal, time
def run(mini_batch):
    name = os.path.basename(mini_batch[0])
    with open(os.path.join(MARKERS, "runs.txt"), "a") as f:
        f.write(name + "\n")
    if name == "file00001.txt" and first_try(name):
        os.kill(os.getpid(), signal.SIGKILL)
    if name == "file00002.txt" and first_try(name):
        os._exit(3)
    if name == "file00003.txt" and first_try(name):
        ctypes.string_at(0)
    if name == "file00004.txt" and first_try(name):
        time.sleep(120)
    if name == "file00005.txt":
        raise ValueError("always broken: " + name)
    if name == "file00006.txt" and first_try(name):
        raise KeyError("first try only")
    return [name]
)PY";

}  // namespace

TEST_CASE("integration.worker_failures.kill_exit_segfault_hang_raise") {
  TempDir dir("workerfail");
  make_first_try_job(dir.path(), "worker-failures", 12, kScript, 2);
  const std::string db = dir / "fanout.db";
  auto r = fanout_run(dir, "job.yaml", db);
  INFO("client stderr:\n" << r.err);
  // Thresholds are -1 by default: one failed mini-batch does not fail the job; it ends partial.
  CHECK(r.status.code == 4);

  // Mini-batches: 11 succeeded, file00005's failed after 3 tries.
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 11);
  CHECK(sql_int(db, "select count(*) from minibatches where state='failed'") == 1);
  CHECK(sql_int(db, "select id from minibatches where state='failed'") == 5);
  CHECK(sql_int(db, "select tries from minibatches where id=5") == 3);
  CHECK(sql_int(db, "select tries from minibatches where id in (1,2,3,4,6) and tries=2") == 2);
  CHECK(sql_int(db, "select count(*) from minibatches where id in (1,2,3,4,6) and tries=2") == 5);
  CHECK(sql_int(db, "select count(*) from minibatches where tries=1") == 6);

  // Attempts, exactly, per status.
  std::map<std::string, long long> by_status;
  for (const auto& s : sql_column(db, "select status from attempts")) ++by_status[s];
  CHECK(by_status["RUN_DONE"] == 11);
  CHECK(by_status["WORKER_LOST"] == 3);
  CHECK(by_status["RUN_TIMEOUT"] == 1);
  CHECK(by_status["RUN_EXCEPTION"] == 4);  // 3 for file00005, 1 for file00006
  CHECK(sql_int(db, "select count(*) from attempts") == 19);

  // The signal or exit code of each death is in its attempt's message.
  auto msg_of = [&](int mb) {
    auto m = sql_column(db, "select error_message from attempts where minibatch_id=" +
                                std::to_string(mb) + " and status!='RUN_DONE'");
    return m.empty() ? std::string() : m[0];
  };
  CHECK(msg_of(1).find("signal 9") != std::string::npos);
  CHECK(msg_of(2).find("exit code 3") != std::string::npos);
  CHECK(msg_of(3).find("signal 11") != std::string::npos);
  CHECK(msg_of(4).find("timeout of 2 s") != std::string::npos);
  CHECK(sql_column(db, "select status from attempts where minibatch_id=4 and attempt=1")[0] ==
        "RUN_TIMEOUT");
  CHECK(msg_of(5).find("ValueError: always broken: file00005.txt") != std::string::npos);
  CHECK(sql_column(db,
                   "select error_category from attempts where minibatch_id=6 and "
                   "status='RUN_EXCEPTION'")[0] == "KeyError");

  // The output: every succeeded mini-batch's row exactly once, nothing of file00005.
  auto expected = file_names(12);
  expected.erase(expected.begin() + 5);
  check_rows_once(dir / "out.txt", expected);
  // run() was entered once per attempt that reached the worker.
  CHECK(read_lines(dir / "markers/runs.txt").size() == 19);
}
