// Short tasks queue in a busy worker's pipe (pool/pool.cpp, Pool::pipeline_room()). A worker that
// dies with a task waiting in its pipe fails only its running attempt; the waiting task is run
// again elsewhere without using a try, and every mini-batch's rows appear exactly once.
#include <doctest/doctest.h>

#include "job_fixture.hpp"

using namespace fanout::test;

TEST_CASE("integration.worker_pipe_queue.worker_death_requeues_the_task_in_its_pipe") {
  TempDir dir("worker_pipe_queue");
  make_files(dir / "data", 400);
  // Mini-batches of one file; the worker that meets file00250 first dies (once).
  write_file(dir / "src/score.py", R"PY(
import os
def run(mini_batch):
    if "file00250" in mini_batch[0] and not os.path.exists("died"):
        open("died", "w").close()
        os._exit(9)
    return [os.path.basename(p) for p in mini_batch]
)PY");
  JobSpec job;
  job.name = "worker_pipe_queue";
  job.output_key = "rows";
  job.output = "./out/rows.txt";
  job.max_retries = 2;
  job.timeout_s = 60;
  write_file(dir / "job.yaml", job_yaml(job));
  const std::string db = dir / "fanout.db";
  auto r = fanout_run(dir, "job.yaml", db, {"--prefetch", "16"});
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 0);
  check_rows_once(dir / "out/rows.txt", 400);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 400);
  CHECK(sql_int(db, "select count(*) from attempts where status='WORKER_LOST'") == 1);
  // Only the mini-batch that was running failed a try; 401 attempts in all.
  CHECK(sql_int(db, "select count(*) from attempts") == 401);
  CHECK(sql_int(db, "select count(*) from minibatches where tries > 1") == 1);
}
