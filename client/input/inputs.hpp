// Turning a job's input into mini-batch descriptors, streamed: each mini-batch is handed on as
// soon as it is cut, so submission starts long before a large folder has been listed.
#pragma once

#include <cstdint>
#include <functional>

#include "fanout/config/job_spec.hpp"
#include "fanout/protocol/messages.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::client {

// Calls `emit` for each mini-batch of the job's input (`input_data`), in input order with
// indexes from 0. `emit` returns false to stop early. Returns the number of mini-batches
// emitted, or an error naming the input and what was wrong.
[[nodiscard]] Expected<std::uint64_t> stream_minibatches(
    const config::JobConfig& cfg, const std::function<bool(proto::MiniBatch&&)>& emit);

}  // namespace fanout::client
