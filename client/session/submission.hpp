// Sending a job's mini-batches to the interchange within its window: `fanout run` from the
// start (and again after an interchange restart), `fanout resume` from where a killed client
// stopped. The listing is deterministic, so the same job file gives the same mini-batches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "client/session/session.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::client {

// Streams the job's mini-batches to the interchange within its window, from mini-batch
// `skip_below` on (those before it are listed but not sent: the interchange has them). Returns
// the listing's error, if any; stops early when the session does not go on.
// `own`: the job's own paths, never listed as its inputs (stream_minibatches()).
[[nodiscard]] Expected<std::uint64_t> submit_input(const config::JobConfig& cfg, Session& session,
                                                   std::uint64_t skip_below,
                                                   const std::vector<std::string>& own = {});

}  // namespace fanout::client
