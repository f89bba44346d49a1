// Constructed job histories for the report tests: a job's settings, pools and the attempts of
// its workers, written into a real store (the schema made by TaskStore, the rows by SQL).
// Header-only, used by tests/unit/report/ and tests/unit/store/report_queries_test.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fanout/store/db.hpp"
#include "fanout/store/task_store.hpp"
#include "fanout/util/log.hpp"

#include "scratch_dir.hpp"

namespace fanout::test {

// One worker's run: `n` tasks back to back from `t0`, each `run_s` in run(), `overhead_s` more
// in the attempt, `gap_s` idle before the next one, using `cpu_per_s` CPU seconds per second.
struct WorkerRun {
  std::uint64_t pool_id = 1;
  std::string process{};
  int n = 0;
  double t0 = 1000, run_s = 0.01, overhead_s = 0.0002, gap_s = 0.0001, cpu_per_s = 1.0;
};

// A job history: settings, pools and the attempts of its workers, all succeeded.
struct History {
  std::string settings{};
  int pools = 1;
  int workers_per_pool = 4;
  int prefetch = 0;
  std::vector<WorkerRun> runs{};
};

// Writes `h` as job 1 into a new store under `dir` and returns the store's path.
inline std::string write_store(const fanout::test::ScratchDir& dir, const History& h) {
  const std::string path = dir.path() + "/fanout.db";
  { fanout::store::TaskStore st(path, fanout::make_logger("tune-test", spdlog::level::off)); }
  fanout::store::Db db(path, fanout::store::Db::Mode::ReadWriteCreate);
  db.exec("BEGIN");
  int total = 0;
  for (const auto& r : h.runs) total += r.n;
  double end = 1000;
  fanout::store::Statement mb(
      db,
      "INSERT INTO minibatches (job_id, id, state, tries, items, succeeded) "
      "VALUES (1, ?1, 'succeeded', 1, 10, 10)");
  fanout::store::Statement at(
      db,
      "INSERT INTO attempts (job_id, minibatch_id, attempt, status, pool_id, pool, node, "
      "process, worker_pid, start, elapsed_s, cpu_s, run_s, items, succeeded, failed, "
      "rows) VALUES (1, ?1, 1, 'RUN_DONE', ?2, ?3, 'node-a', ?4, 100, ?5, ?6, ?7, ?8, "
      "10, 10, 0, 10)");
  int id = 0;
  for (const auto& r : h.runs) {
    double t = r.t0;
    for (int i = 0; i < r.n; ++i, ++id) {
      mb.bind(1, static_cast<std::int64_t>(id)).run();
      const double elapsed = r.run_s + r.overhead_s;
      const std::string pool = "pool" + std::to_string(r.pool_id);
      at.bind(1, static_cast<std::int64_t>(id))
          .bind(2, static_cast<std::int64_t>(r.pool_id))
          .bind(3, pool)
          .bind(4, r.process)
          .bind(5, t)
          .bind(6, elapsed)
          .bind(7, elapsed * r.cpu_per_s)
          .bind(8, r.run_s);
      at.run();
      t += elapsed + r.gap_s;
      end = std::max(end, t);
    }
  }
  fanout::store::Statement pool(
      db,
      "INSERT INTO pools (id, name, node, workers, prefetch, state) VALUES "
      "(?1, ?2, 'node-a', ?3, ?4, 'gone')");
  for (int p = 1; p <= h.pools; ++p) {
    const std::string name = "pool" + std::to_string(p);
    pool.bind(1, static_cast<std::int64_t>(p))
        .bind(2, name)
        .bind(3, static_cast<std::int64_t>(h.workers_per_pool))
        .bind(4, static_cast<std::int64_t>(h.prefetch));
    pool.run();
  }
  fanout::store::Statement job(
      db,
      "INSERT INTO jobs (id, name, state, settings, submit_done, total, created, "
      "started, ended, log_dir) VALUES (1, 'constructed', 'succeeded', ?1, 1, ?2, "
      "1000, 1000, ?3, '')");
  job.bind(1, h.settings).bind(2, static_cast<std::int64_t>(total)).bind(3, end);
  job.run();
  db.exec("COMMIT");
  return path;
}

// `workers` workers in one pool, each running `n` tasks shaped by `shape`.
inline History uniform(int workers, int n, const std::string& settings, WorkerRun shape) {
  History h;
  h.settings = settings;
  h.workers_per_pool = workers;
  for (int w = 0; w < workers; ++w) {
    WorkerRun r = shape;
    r.process = "process" + std::to_string(w);
    r.n = n;
    h.runs.push_back(r);
  }
  return h;
}

}  // namespace fanout::test
