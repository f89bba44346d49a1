// The rows of `fanout explore`'s experiments in the store: `experiments` and `experiment_runs`
// (docs/store.md), and each run's measures from its job's attempts. See docs/explore.md.
#pragma once

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "client/commands/explore_factors.hpp"
#include "fanout/report/explore.hpp"
#include "fanout/store/db.hpp"
#include "fanout/store/schema.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/log.hpp"

namespace fanout::client {

// An experiment as the store holds it.
struct Experiment {
  std::string id{}, job_file{}, sample{};
  double budget_s = 0;
  std::vector<report::ExploreFactor> factors{};
  std::vector<report::ExploreRun> runs{};
};

// The experiment's rows in the store (the runs in order).
class ExperimentStore {
 public:
  ExperimentStore(const std::string& path, const Logger& log)
      : db_(path, store::Db::Mode::ReadWriteCreate) {
    store::apply_migrations(db_, log);
  }

  void create(const Experiment& e) {
    store::Statement s(db_,
                       "INSERT INTO experiments (id, created, job_file, budget_s, sample, factors, "
                       "state) VALUES (?, ?, ?, ?, ?, ?, 'running')");
    s.bind(1, e.id).bind(2, unix_now()).bind(3, e.job_file).bind(4, e.budget_s);
    const std::string factors = factors_text(e.factors);  // bound, not copied: must outlive run()
    s.bind(5, e.sample).bind(6, factors);
    s.run();
  }

  // The experiment `id` and its runs; false when there is none.
  bool load(const std::string& id, Experiment& e) {
    store::Statement s(db_,
                       "SELECT job_file, budget_s, sample, factors FROM experiments WHERE id = ?");
    s.bind(1, id);
    if (!s.step()) return false;
    e = {.id = id,
         .job_file = std::string(s.column_text(0)),
         .sample = std::string(s.column_text(2)),
         .budget_s = s.column_double(1),
         .factors = parse_factors(std::string(s.column_text(3))),
         .runs = {}};
    store::Statement r(db_,
                       "SELECT treatment, coalesce(seconds_per_item, 0), wall_s, "
                       "coalesce(job_id, 0), ok FROM experiment_runs WHERE experiment = ? "
                       "ORDER BY seq");
    r.bind(1, id);
    while (r.step()) {
      report::ExploreRun run{.treatment = {},
                             .seconds_per_item = r.column_double(1),
                             .wall_s = r.column_double(2),
                             .job_id = r.column_uint64(3),
                             .ok = r.column_int64(4) != 0};
      std::stringstream in{std::string(r.column_text(0))};
      for (std::size_t l; in >> l;) run.treatment.push_back(l);
      e.runs.push_back(std::move(run));
    }
    for (auto& run : e.runs) add_measures(run);
    return true;
  }

  // The measures of a run beyond time per item, from its job's attempts (computed when needed
  // rather than stored: the job's rows are the record, and no schema change is needed).
  void add_measures(report::ExploreRun& run) {
    if (run.job_id == 0) return;
    store::Statement a(db_,
                       "SELECT status, elapsed_s, run_s FROM attempts WHERE job_id = ? "
                       "ORDER BY id");
    a.bind(1, run.job_id);
    std::vector<double> overheads;
    double run_s = 0;
    run.attempts = run.attempts_failed = 0;
    while (a.step()) {
      ++run.attempts;
      if (a.column_text(0) != "RUN_DONE") {
        ++run.attempts_failed;
        continue;
      }
      run_s += a.column_double(2);
      overheads.push_back(std::max(0.0, a.column_double(1) - a.column_double(2)));
    }
    if (!overheads.empty()) {
      auto mid = overheads.begin() + static_cast<std::ptrdiff_t>(overheads.size() / 2);
      std::nth_element(overheads.begin(), mid, overheads.end());
      run.overhead_s = *mid;
    }
    const std::uint64_t workers = job_workers(run.job_id);
    if (workers > 0 && run.wall_s > 0) {
      run.utilisation = run_s / (static_cast<double>(workers) * run.wall_s);
    }
  }

  void add_run(const std::string& id, std::size_t seq, const report::ExploreRun& r) {
    store::Statement s(db_,
                       "INSERT INTO experiment_runs (experiment, seq, job_id, treatment, "
                       "seconds_per_item, wall_s, ok) VALUES (?, ?, ?, ?, ?, ?, ?)");
    s.bind(1, id).bind(2, static_cast<std::int64_t>(seq)).bind(3, r.job_id);
    const std::string treatment = treatment_key(r.treatment);  // bound, not copied
    s.bind(4, treatment).bind(5, r.seconds_per_item).bind(6, r.wall_s);
    s.bind(7, static_cast<std::int64_t>(r.ok ? 1 : 0));
    s.run();
  }

  // The factors again, once the walk added levels.
  void set_factors(const std::string& id, const std::vector<report::ExploreFactor>& factors) {
    store::Statement s(db_, "UPDATE experiments SET factors = ? WHERE id = ?");
    const std::string text = factors_text(factors);  // bound, not copied: must outlive run()
    s.bind(1, text).bind(2, id);
    s.run();
  }

  void set_state(const std::string& id, const std::string& state) {
    store::Statement s(db_, "UPDATE experiments SET state = ? WHERE id = ?");
    s.bind(1, state).bind(2, id);
    s.run();
  }

 private:
  // The workers of the pools that ran the job's attempts; without their count, the worker
  // processes seen in its attempts.
  std::uint64_t job_workers(std::uint64_t job_id) {
    store::Statement p(db_,
                       "SELECT coalesce(sum(workers), 0) FROM pools WHERE id IN "
                       "(SELECT DISTINCT pool_id FROM attempts WHERE job_id = ?)");
    p.bind(1, job_id);
    if (p.step() && p.column_uint64(0) > 0) return p.column_uint64(0);
    store::Statement w(db_,
                       "SELECT count(DISTINCT coalesce(pool_id, 0) || '/' || coalesce(process, "
                       "worker_pid)) FROM attempts WHERE job_id = ?");
    w.bind(1, job_id);
    return w.step() ? w.column_uint64(0) : 0;
  }

  store::Db db_;
};

}  // namespace fanout::client
