// What TaskStore records and recovers: the rows the interchange hands to the store's queue, and
// what recover() hands back. Schema: docs/store.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fanout/protocol/messages.hpp"

namespace fanout::store {

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
  std::string key_fingerprint{};  // its Curve key (docs/security.md); empty: none (NULL)
};

// A connected pool was last heard from at `last_seen` (Unix seconds): its heartbeat, for
// pools.last_seen. `id` is the registration's id, as in PoolRecord.
struct PoolSeen {
  std::uint64_t id = 0;
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

// A job's counts as the store holds them (the job_counts view): what every reader shows.
struct JobCounts {
  std::uint64_t succeeded = 0, failed = 0, items_succeeded = 0, items_failed = 0;
  std::uint64_t attempts_failed = 0;
};

// A job reopened on a live store (TaskStore::reopen_job). An ended job comes back whole, as
// recover() would hand it back; a job that was still running has only its reopened
// mini-batches in `job.remaining` (the others are the interchange's already).
struct ReopenedJob {
  UnfinishedJob job{};
  bool was_ended = false;      // it had ended (failed, partial, cancelled): it runs again
  std::uint64_t reopened = 0;  // failed mini-batches put back to pending
};

}  // namespace fanout::store
