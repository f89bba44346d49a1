// The job ledger in SQLite (WAL). TaskStore is the only writer: a dedicated thread applies queued
// operations in batched transactions, and appends each succeeded mini-batch's rows to the job's
// append_row output file before the transaction that records the offset commits, so that the
// output can be restored to exactly the committed rows after a crash. Readers (reader.hpp,
// sqlite3) use their own connections and never block it. Schema: docs/store.md.
//
// The parts, all private to the store (detail/): the queue and its writer thread
// (write_queue.hpp), the writer's transactions (writer.hpp, with multi_row.hpp and
// output_file.hpp), the checkpoint thread (checkpointer.hpp) and recovery (recovery.hpp). The
// schema and its migrations are in schema.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fanout/protocol/messages.hpp"
#include "fanout/store/committed_attempt.hpp"
#include "fanout/store/records.hpp"
#include "fanout/store/schema.hpp"
#include "fanout/util/log.hpp"

namespace fanout::store {

// Owns the writer connection and thread. Methods that queue work are thread-safe and cheap: they
// move the argument into a queue. Errors of the database on the writer thread (disk full, ...)
// are logged critical and make ok() false; the interchange then stops taking work. An error of
// one job's output file fails that job only (take_failed_jobs()).
class TaskStore final {
 public:
  // Opens or creates the store at `path` (creating parent folders), sets WAL, applies
  // migrations. Throws Failure{Database} naming the path when SQLite refuses, Failure{Version}
  // naming the path and both versions when the store's schema is newer than kSchemaVersion,
  // Failure{Io} when a folder cannot be created.
  TaskStore(const std::string& path, Logger log);
  // Commits everything queued, then joins the thread.
  ~TaskStore();
  TaskStore(const TaskStore&) = delete;
  TaskStore& operator=(const TaskStore&) = delete;

  // ---- startup, before any queued write; run on the caller's thread ----
  // Largest jobs.id and attempts.id in use (0 when empty).
  [[nodiscard]] std::uint64_t max_job_id();
  [[nodiscard]] std::uint64_t max_attempt_id();
  [[nodiscard]] std::uint64_t max_pool_id();
  // Jobs in state pending or running, with their remaining mini-batches. Each job's output file
  // is truncated to the end of the last committed mini-batch's rows (created if missing). Pools
  // still `connected` (to the previous interchange process) are marked `lost`.
  [[nodiscard]] std::vector<UnfinishedJob> recover();
  // Jobs that ended without their reports written (the interchange stopped in between): id and
  // logs/ folder, oldest first.
  [[nodiscard]] std::vector<std::pair<std::uint64_t, std::string>> unreported_jobs();

  // Before recover(): `fanout resume --failed` (detail::reopen_failed). Returns the mini-batches
  // put back to pending; throws Failure{NotFound} for an unknown job.
  std::uint64_t reopen_failed(std::uint64_t job_id);

  // `fanout resume --failed` while this store's interchange runs (ReopenJob): commits what is
  // queued (flush()), then detail::reopen_job on the writer's connection; the job's output file
  // is writable again if it had failed. Blocks the caller for that commit. Throws as
  // detail::reopen_job (NotFound, State, Io); nothing changed then.
  [[nodiscard]] ReopenedJob reopen_job(std::uint64_t job_id);

  // The job's counts as committed (job_counts), read on the writer's connection (waits for a
  // transaction under way); nullopt for an unknown job. Throws Failure{Database}.
  [[nodiscard]] std::optional<JobCounts> job_counts(std::uint64_t job_id);

  // After each commit, `listener` gets the attempts it committed (on the writer thread, before
  // flush() returns for them). Null stops it; returns once no call is under way.
  void on_attempts_committed(AttemptListener listener);

  // ---- queued writes (any thread) ----
  void create_job(std::uint64_t job_id, const proto::JobSpec& spec, double created);
  void add_minibatches(std::uint64_t job_id, std::vector<proto::MiniBatch> batches);
  void set_submit_done(std::uint64_t job_id, std::uint64_t total);
  void mark_running(std::uint64_t job_id, std::uint64_t index, std::uint32_t tries);
  void record_attempt(AttemptRecord rec);
  void finish_job(std::uint64_t job_id, const std::string& state, const std::string& reason,
                  double ended);
  void upsert_pool(const PoolRecord& pool);
  // The connected pools' last heartbeats (pools.last_seen), in the next commit with the other
  // queued writes. Callers bound the rate (the interchange: every few seconds, all pools in one
  // call), so a heartbeat never costs a transaction of its own.
  void record_pools_seen(std::vector<PoolSeen> pools);
  // The job's reports are written (at unix time `when`).
  void mark_reported(std::uint64_t job_id, double when);
  void record_resources(ResourceRecord rec);

  // Blocks until everything queued before the call is committed (output data synced first).
  void flush();
  // flush() without blocking, for a caller that must keep serving: queues what flush() queues
  // and returns a ticket for everything queued before the call. committed(ticket) is true once
  // all of it is committed (output data synced first), as flush() would have returned; after
  // wake_when_committed(ticket), committed_fd() (an eventfd; read it to reset) becomes readable
  // once it is. Thread-safe.
  [[nodiscard]] std::uint64_t flush_async();
  [[nodiscard]] bool committed(std::uint64_t ticket);
  void wake_when_committed(std::uint64_t ticket);
  [[nodiscard]] int committed_fd() const noexcept;
  // False once the writer thread hit an error it could not recover from (the store database
  // itself failed).
  [[nodiscard]] bool ok() const noexcept;
  // Jobs the writer marked failed since the last call, because their append_row output file
  // could not be opened, written or synced, each with its reason (the file, the call and the
  // errno). The rest of the store goes on; the caller ends each job as failed. Thread-safe.
  [[nodiscard]] std::vector<std::pair<std::uint64_t, std::string>> take_failed_jobs();
  [[nodiscard]] const std::string& path() const noexcept;

  // The writer's figures, for the interchange's metrics. Thread-safe; takes the queue's lock.
  struct WriteStats {
    std::uint64_t queue_depth = 0;  // operations queued and not yet committed
    std::uint64_t commits = 0;      // write transactions committed
    double commit_seconds = 0;      // spent in them, in all
    double last_commit_seconds = 0;
  };
  [[nodiscard]] WriteStats write_stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fanout::store
