// --task_overhead_timeout through the real binaries: the pool stops a worker whose
// mini-batch spends too long outside run() (loading it, or building its rows) and the retry
// succeeds; a slow run() is not cut by it, and a job without it keeps its old bounds.
// The slow phases come from the entry script's init(), which wraps two functions of the shim
// (it runs as __main__): the context it builds before run(), and the row builder it calls after
// run() for a result that is not a list or tuple. Sleeps are far longer than the bounds.
#include <doctest/doctest.h>

#include <map>

#include "job_fixture.hpp"

using namespace fanout::test;

namespace {

// SLOW_LOAD / SLOW_ROWS / SLOW_RUN: comma-separated mini-batch indices slow before run(), after
// run() and inside run(); a marker file makes the first two slow on the first try only.
const std::string kScript = std::string(kFirstTryPy) + R"PY(
import collections, os, sys, time
def indices(name):
    return {int(x) for x in os.environ.get(name, "").split(",") if x}
SLOW_LOAD, SLOW_ROWS, SLOW_RUN = indices("SLOW_LOAD"), indices("SLOW_ROWS"), indices("SLOW_RUN")
SLEEP = float(os.environ.get("SLEEP", "60"))
current = [None]
def init():
    shim = sys.modules["__main__"]
    context = shim.MiniBatchContext
    class SlowContext(context):
        def __init__(self, partition_key_value, minibatch_index, *rest):
            if minibatch_index in SLOW_LOAD and first_try("load%d" % minibatch_index):
                time.sleep(SLEEP)
            context.__init__(self, partition_key_value, minibatch_index, *rest)
    shim.MiniBatchContext = SlowContext
    classify = shim._classify
    def slow_classify(result, cfg):
        if current[0] in SLOW_ROWS and first_try("rows%d" % current[0]):
            time.sleep(SLEEP)
        return classify(result, cfg)
    shim._classify = slow_classify
def run(mini_batch, context):
    current[0] = context.minibatch_index
    with open(os.path.join(MARKERS, "runs.txt"), "a") as f:
        f.write("%d\n" % context.minibatch_index)
    if context.minibatch_index in SLOW_RUN:
        time.sleep(SLEEP)
    # Not a list: the shim builds these rows in _classify, after run() returned.
    return collections.deque(os.path.basename(p) for p in mini_batch)
)PY";

// A job `name` over ./data on `workers` workers, rows into ./<name>.txt, markers in
// ./<name>-markers, with `env` added to its environment.
std::string job_yaml(const TempDir& dir, const std::string& name, const std::string& args,
                     unsigned workers, const EnvList& env) {
  JobSpec job;
  job.name = name;
  // prefetch lets the pool hold more mini-batches than workers, so that it can queue the next
  // one in a busy worker's pipe (tasks this short are pipelined).
  job.top = "fanout:\n  prefetch: 4\n";
  job.output = "./" + name + ".txt";
  job.concurrency = static_cast<int>(workers);
  job.max_retries = 2;
  job.timeout_s = 60;
  job.env = {{"MARKERS", dir / (name + "-markers")}};
  job.env.insert(job.env.end(), env.begin(), env.end());
  job.program_arguments = args;
  return job_yaml(job);
}

}  // namespace

TEST_CASE("integration.issue_4.task_overhead_timeout_stops_slow_loading_and_rows") {
  TempDir dir("overhead");
  make_files(dir / "data", 10);
  write_file(dir / "src/score.py", kScript);
  write_file(dir / "slow-markers/.keep", "");
  write_file(dir / "slow.yaml", job_yaml(dir, "slow", "--task_overhead_timeout 2", 2,
                                         {{"SLOW_LOAD", "2,5"}, {"SLOW_ROWS", "7"}}));
  const std::string db = dir / "fanout.db";
  auto r = fanout_run(dir, "slow.yaml", db);
  INFO("client stderr:\n" << r.err);
  CHECK(r.status.code == 0);

  CHECK(sql_int(db, "select count(*) from minibatches") == 10);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 10);
  std::map<std::string, long long> by_status;
  for (const auto& s : sql_column(db, "select status from attempts")) ++by_status[s];
  CHECK(by_status["RUN_DONE"] == 10);
  CHECK(by_status["RUN_TIMEOUT"] == 3);
  CHECK(sql_int(db, "select count(*) from attempts") == 13);

  for (int mb : {2, 5, 7}) {
    CAPTURE(mb);
    const std::string first =
        " from attempts where minibatch_id=" + std::to_string(mb) + " and attempt=1";
    const std::string second =
        " from attempts where minibatch_id=" + std::to_string(mb) + " and attempt=2";
    REQUIRE(sql_column(db, "select status" + first) == std::vector<std::string>{"RUN_TIMEOUT"});
    CHECK(sql_column(db, "select error_category" + first)[0] == "TaskOverheadTimeout");
    const std::string msg = sql_column(db, "select error_message" + first)[0];
    CHECK(msg.find("--task_overhead_timeout 2 s") != std::string::npos);
    CHECK(msg.find(mb == 7 ? "after run() returned" : "before run() was called") !=
          std::string::npos);
    CHECK(sql_column(db, "select status" + second) == std::vector<std::string>{"RUN_DONE"});
    // The stopped worker was replaced: its pid ran nothing after the attempt it overran.
    const std::string pid = sql_column(db, "select worker_pid" + first)[0];
    CHECK(sql_column(db, "select worker_pid" + second)[0] != pid);
    CHECK(sql_int(db, "select count(*) from attempts where worker_pid=" + pid +
                          " and start > (select start" + first + ")") == 0);
  }
  // run() was never entered by the attempts stopped while loading; mini-batch 7's first try ran.
  std::map<std::string, int> runs;
  for (const auto& l : read_lines(dir / "slow-markers/runs.txt")) ++runs[l];
  CHECK(runs.size() == 10);
  CHECK(runs["2"] == 1);
  CHECK(runs["5"] == 1);
  CHECK(runs["7"] == 2);
  check_rows_once(dir / "slow.txt", file_names(10));

  const std::string log_dir = sql_column(db, "select log_dir from jobs where id=1")[0];
  const std::string result = read_text(log_dir + "/job_result.txt");
  CHECK(result.find("state: succeeded") != std::string::npos);
  CHECK(result.find("RUN_TIMEOUT: the mini-batch's overhead outside run() exceeded "
                    "--task_overhead_timeout 2 s") != std::string::npos);
}

TEST_CASE("integration.issue_4.task_overhead_timeout_does_not_cut_run_or_unset_jobs") {
  TempDir dir("overhead_not_cut");
  make_files(dir / "data", 24);
  write_file(dir / "src/score.py", kScript);
  write_file(dir / "run-markers/.keep", "");
  write_file(dir / "unset-markers/.keep", "");
  const std::string db = dir / "fanout.db";

  // Set, with one worker: run() of mini-batch 12 takes 6 s against a 2 s overhead bound. The fast
  // mini-batches before it make the pool queue mini-batch 13 in that worker's pipe, where it
  // waits those 6 s without its overhead clock running.
  write_file(dir / "run.yaml", job_yaml(dir, "run", "--task_overhead_timeout 2", 1,
                                        {{"SLOW_RUN", "12"}, {"SLEEP", "6"}}));
  // Not set: a 6 s loading phase is the run timeout's business only (60 s here).
  write_file(dir / "unset.yaml",
             job_yaml(dir, "unset", "", 2, {{"SLOW_LOAD", "3"}, {"SLEEP", "6"}}));
  long long job = 0;
  for (const std::string name : {"run", "unset"}) {
    CAPTURE(name);
    ++job;
    auto r = fanout_run(dir, name + ".yaml", db);
    INFO("client stderr:\n" << r.err);
    CHECK(r.status.code == 0);
    const std::string of_job = " from attempts where job_id=" + std::to_string(job);
    CHECK(sql_int(db, "select count(*)" + of_job) == 24);
    CHECK(sql_int(db, "select count(*)" + of_job + " and status='RUN_DONE'") == 24);
    check_rows_once(dir / (name + ".txt"), file_names(24));
  }
  // The slow phases really were slow: 6 s inside run(), and 6 s outside it.
  CHECK(sql_int(db,
                "select count(*) from attempts where job_id=1 and minibatch_id=12 and "
                "run_s >= 5.5") == 1);
  CHECK(sql_int(db,
                "select count(*) from attempts where job_id=2 and minibatch_id=3 and "
                "elapsed_s - run_s >= 5.5") == 1);
}
