// Each job's counts in table job_tallies, kept by the store's writer in the transaction that
// changes the job's mini-batches and attempts. Private to the store. Schema: docs/store.md.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fanout/store/db.hpp"

namespace fanout::store::detail {

// Sets job `job_id`'s job_tallies row to a full count of its minibatches and attempts rows
// (creating the row). For the rare writers of those rows (recovery, resume --failed, an offline
// cancel) after their change, in their transaction. Throws Failure{Database}.
void recount_tallies(Db& db, std::uint64_t job_id);

// A minibatches row's state, as the writer tracks it (None: no row; Other: a state that is not
// counted, which the store never writes).
enum class RowState : std::uint8_t { None, Pending, Running, Succeeded, Failed, Other };
// The RowState of minibatches.state `s`.
[[nodiscard]] RowState row_state(std::string_view s);

// The writer's model of the minibatches rows it changes, and the changes of the job_tallies
// counts they make in the open transaction. Each call models one row's statement and must
// come just before that statement runs; apply() then writes each touched job's deltas with one
// UPDATE. A job's rows are known from its creation in this process, or read once (one query)
// when it is first touched. Where a delta cannot be known (a succeeded row overwritten, whose
// item counts are not kept), the job is counted in full by apply() instead. Borrows `db`.
// Not thread-safe: used by the Writer only.
class Tallies final {
 public:
  // Prepares the statements. Throws Failure{Database}.
  explicit Tallies(Db& db);

  // A job created in this transaction: no rows.
  void job_created(std::uint64_t job_id);
  // The job ended: its rows are forgotten (read again if it is touched later).
  void job_finished(std::uint64_t job_id) { jobs_.erase(job_id); }
  // Forgets every job's rows: another statement changed them (recovery, resume --failed).
  void forget_all() { jobs_.clear(); }

  // INSERT of a submitted row (`state` Pending or Running); on conflict a Running one sets the
  // row's state to running and any other keeps it (the writer's insert_minibatch_).
  void submitted(std::uint64_t job_id, std::uint64_t index, RowState state, std::uint64_t items);
  // A result's upsert: a new row with `items`, or the row's state, succeeded and failed set
  // (its items kept) (the writer's update_minibatch_).
  void result(std::uint64_t job_id, std::uint64_t index, RowState state, std::uint64_t items,
              std::uint64_t succeeded, std::uint64_t failed);
  // UPDATE to running of the row, if there is one.
  void running(std::uint64_t job_id, std::uint64_t index);
  // A row of this transaction put back to pending, or an attempts row deleted, by a statement
  // these calls do not model (a job's output failure): the job is counted in full.
  void reopened(std::uint64_t job_id, std::uint64_t index);
  // An attempts row inserted; `failed`: its status is not RUN_DONE.
  void attempt(std::uint64_t job_id, bool failed);

  // Before the commit: writes the deltas of this transaction (one UPDATE per touched job) and
  // the full counts of the jobs that need them. Throws Failure{Database}.
  void apply();
  // The transaction rolled back: its deltas are dropped and every job's rows forgotten.
  void discard();

 private:
  struct Delta {
    std::int64_t submitted = 0, pending = 0, running = 0, succeeded = 0, failed = 0;
    std::int64_t items_succeeded = 0, items_failed = 0, attempts = 0, attempts_failed = 0;
  };
  struct JobRows {
    std::vector<RowState> state{};
    std::vector<std::uint32_t> items{};
    bool untracked = false;  // indexes too sparse to keep: counted in full when touched
  };

  // The job's rows, read on first use; null when the job is untracked (then counted in full).
  JobRows* rows(std::uint64_t job_id, std::uint64_t index);
  // Adds (sign +1) or takes away (-1) a row's contribution, with `succeeded`/`failed` its item
  // counts when succeeded.
  static void count(Delta& d, int sign, RowState s, std::uint64_t items, std::uint64_t succeeded,
                    std::uint64_t failed);

  Db& db_;
  Statement load_;
  Statement add_;
  std::unordered_map<std::uint64_t, JobRows> jobs_;
  std::unordered_map<std::uint64_t, Delta> deltas_;  // this transaction's, by job
  std::unordered_set<std::uint64_t> recount_;        // this transaction's jobs counted in full
};

}  // namespace fanout::store::detail
