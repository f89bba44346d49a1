// `fanout cancel` on a store no interchange owns (it cannot start, or none runs): the job is
// marked cancelled in the store directly, under the store's owner lock (owner_lock.hpp), so that
// no interchange takes the store meanwhile. docs/store.md, section 1.
#pragma once

#include <cstdint>
#include <string>

#include "fanout/util/expected.hpp"

namespace fanout::store {

// Marks job `job_id` of the store at `db_path` cancelled with `reason` (its running mini-batches
// pending again, their last try given back, as recovery would), if it is pending or running.
// Returns true when it was cancelled, false when it had already ended. Error{State} naming the
// owner's pid when a live interchange owns the store (cancel through it instead);
// Error{NotFound} for an unknown job; Error{Database} or Error{Io} naming the file otherwise.
[[nodiscard]] Expected<bool> cancel_unowned(const std::string& db_path, std::uint64_t job_id,
                                            const std::string& reason);

}  // namespace fanout::store
