// The job ledger in SQLite (WAL). TaskStore is the only writer: a dedicated thread applies queued
// operations in batched transactions, and appends each succeeded mini-batch's rows to the job's
// append_row output file before the transaction that records the offset commits, so that the
// output can be restored to exactly the committed rows after a crash. Readers (fanout history,
// sqlite3) use their own connections and never block it. Schema: docs/store.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fanout/protocol/messages.hpp"
#include "fanout/util/expected.hpp"
#include "fanout/util/log.hpp"

namespace fanout::store {

// The current schema version; migrations bring any older store up to it.
inline constexpr int kSchemaVersion = 2;

// One attempt's outcome plus what it means for its mini-batch.
struct AttemptRecord {
  std::uint64_t pool_id = 0;
  std::string pool_name{};
  proto::TaskResult result{};  // result.task_id is attempts.id
  // State of the mini-batch after this attempt: "succeeded", "failed" (out of tries), or
  // "pending" (will be retried).
  std::string minibatch_state{};
  // True for the one accepted success of a mini-batch: result.output is appended to the job's
  // output file and its offset recorded. Never true twice for one mini-batch.
  bool write_output = false;
};

struct PoolRecord {
  std::uint64_t id = 0;
  std::string name{};
  std::string node{};
  std::uint32_t workers = 0;
  std::uint32_t prefetch = 0;
  std::int64_t pid = 0;
  std::string build{};
  std::string state{};  // "connected" | "lost" | "gone"
  double registered = 0;
  double last_seen = 0;
};

// One resource-monitor sample of a pool, recorded once for each job in `job_ids` (the jobs it
// is attributed to; the caller keeps only running jobs). Worker rows are recorded for their own
// job only, and only when that job is in `job_ids`.
struct ResourceRecord {
  std::uint64_t pool_id = 0;
  std::string pool_name{};
  std::string node{};
  std::vector<std::uint64_t> job_ids{};
  proto::ResourceSample sample{};
};

// A job the store holds as not finished, with what is left to run (for resume).
struct UnfinishedJob {
  std::uint64_t job_id = 0;
  proto::JobSpec spec{};
  bool submit_done = false;                      // the client sent SubmitEnd
  std::uint64_t total = 0;                       // mini-batches known
  std::vector<proto::MiniBatch> remaining{};     // state pending or running, by index
  std::vector<std::uint32_t> remaining_tries{};  // tries already used, parallel to remaining
  std::uint64_t succeeded = 0, failed = 0, items_succeeded = 0, items_failed = 0;
  std::uint64_t attempts_failed = 0;
};

// Owns the writer connection and thread. Methods that queue work are thread-safe and cheap: they
// move the argument into a queue. Errors on the writer thread (disk full, ...) are logged
// critical and make ok() false; the interchange then stops taking work.
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

  // ---- queued writes (any thread) ----
  void create_job(std::uint64_t job_id, const proto::JobSpec& spec, double created);
  void add_minibatches(std::uint64_t job_id, std::vector<proto::MiniBatch> batches);
  void set_submit_done(std::uint64_t job_id, std::uint64_t total);
  void mark_running(std::uint64_t job_id, std::uint64_t index, std::uint32_t tries);
  void record_attempt(AttemptRecord rec);
  void finish_job(std::uint64_t job_id, const std::string& state, const std::string& reason,
                  double ended);
  void upsert_pool(const PoolRecord& pool);
  void record_resources(ResourceRecord rec);

  // Blocks until everything queued before the call is committed (output data synced first).
  void flush();
  // False once the writer thread hit an error it could not recover from.
  [[nodiscard]] bool ok() const noexcept;
  [[nodiscard]] const std::string& path() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A job as `fanout history` / `fanout status` show it.
struct JobSummary {
  std::uint64_t id = 0;
  std::string name{};
  std::string state{};
  std::string reason{};
  double created = 0;
  double ended = 0;                         // 0 while running
  std::uint64_t total = 0;                  // mini-batches known
  std::uint64_t succeeded = 0, failed = 0;  // mini-batches
  std::uint64_t items_succeeded = 0, items_failed = 0;
  std::uint64_t attempts = 0;
  std::string output_path{};
  std::string log_dir{};
};

// Read-only queries on a store file. Throws Failure{NotFound} when the file does not exist,
// Failure{Version} when its schema version is not kSchemaVersion. Not thread-safe.
class StoreReader final {
 public:
  explicit StoreReader(const std::string& path);
  ~StoreReader();
  StoreReader(const StoreReader&) = delete;
  StoreReader& operator=(const StoreReader&) = delete;

  // Newest first, at most `limit` jobs (0: all); `state` empty means any. Throws
  // Failure{Database} when a query fails.
  [[nodiscard]] std::vector<JobSummary> history(std::size_t limit, const std::string& state = {});
  [[nodiscard]] std::optional<JobSummary> job(std::uint64_t id);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fanout::store
