// Checks on a job's output made before anything starts, so that a long job does not fail at its
// end for a file it could never write: an append_row_to file that cannot be written is an error
// of the job file (exit 2, located), found before the interchange and the pools are started. No
// state; reads the file system only.
#pragma once

#include "fanout/config/job_spec.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::client {

// The append_row_to file can be opened for appending: it is not a folder, and it exists and is
// writable, or its nearest existing folder is writable (the interchange creates the folders
// between). Error{InvalidArgument}: "<job file>:<line>: task.append_row_to: <path>: <why>".
// Nothing is created. OK when the job has no append_row_to.
[[nodiscard]] Expected<void> check_output_writable(const config::JobConfig& cfg);

}  // namespace fanout::client
