// Turning a job's input into mini-batch descriptors, streamed: each mini-batch is handed on as
// soon as it is cut, so submission starts long before a large folder has been listed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fanout/config/job_spec.hpp"
#include "fanout/protocol/messages.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::client {

// Calls `emit` for each mini-batch of the job's input (`input_data`), in input order with
// indexes from 0. `emit` returns false to stop early. Returns the number of mini-batches
// emitted, or an error naming the input and what was wrong.
//
// A uri_folder's every entry is accounted for: a file is an input; an entry the listing cannot
// use (a folder it cannot open, a path past PATH_MAX, a FIFO, a link to nothing) is a mini-batch
// of its own after the inputs' ones, its one item the path and `refused` saying why (the
// interchange fails it as INPUT_UNREADABLE), and a warning on stderr. `own`: the job's own
// files and folders (own_paths()), which are never its inputs even when a link brings them
// under its input folder; the job's append_row file is one of them whatever `own` holds.
[[nodiscard]] Expected<std::uint64_t> stream_minibatches(
    const config::JobConfig& cfg, const std::function<bool(proto::MiniBatch&&)>& emit,
    const std::vector<std::string>& own = {});

// The job's own paths for stream_minibatches(): its store `db` (with its -wal, -shm, -journal and
// .owner files) and its run folder `run_dir` (logs, ready files); empty ones are left out.
[[nodiscard]] std::vector<std::string> own_paths(const std::string& db, const std::string& run_dir);

}  // namespace fanout::client
