// Recovery: what the store hands back when the interchange restarts, and the repairs that go
// with it. Private to the store. The rules: docs/store.md, section 5.
#pragma once

#include <vector>

#include "fanout/store/db.hpp"
#include "fanout/store/records.hpp"
#include "fanout/util/log.hpp"

namespace fanout::store::detail {

// In one transaction on `db` (a migrated store; no writer may run meanwhile): returns the jobs
// in state pending or running, with their remaining mini-batches by index; puts mini-batches
// that were running back to pending, giving back the try that was in flight; marks failed
// (logged at error) the jobs whose stored spec or items cannot be decoded; cuts each returned
// job's output file back to the end of its last committed rows (creating it if missing); marks
// pools still `connected` to the previous interchange process `lost`. Throws Failure{Database}
// or Failure{Io} naming the file; the transaction is then rolled back.
[[nodiscard]] std::vector<UnfinishedJob> recover(Db& db, const Logger& log);

// `fanout resume --failed`: in one transaction, puts job `job_id`'s failed mini-batches back to
// pending with a fresh budget of tries, and an ended job back to running (reason and end
// cleared), so that recover() resumes it with only the mini-batches that failed or never ran.
// Succeeded mini-batches, their output rows and every recorded attempt are kept. Returns how
// many mini-batches were reopened. Throws Failure{NotFound} for an unknown job.
std::uint64_t reopen_failed(Db& db, std::uint64_t job_id);

// reopen_failed() on a store whose interchange runs (ReopenJob, docs/protocol.md): in one
// transaction, the job's failed mini-batches back to pending with a fresh budget of tries; when
// the job had ended, also the job back to running, its mini-batches left running back to
// pending (the try given back) and its output file cut back to its committed rows. The caller
// must have committed everything queued first, and hold the writer's connection. Throws
// Failure{NotFound} for an unknown job, Failure{State} for a succeeded one (nothing to reopen),
// Failure{Io} naming the output file when it cannot be restored; the transaction is then rolled
// back and nothing changed.
[[nodiscard]] ReopenedJob reopen_job(Db& db, std::uint64_t job_id, const Logger& log);

}  // namespace fanout::store::detail
