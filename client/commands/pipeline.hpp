// fanout run on a pipeline file (type: pipeline): its jobs in dependency order, command jobs as
// local shell commands and parallel jobs through prepare()/run_job(). See
// docs/job-spec.md#pipelines.
#pragma once

#include <string>

#include "client/commands/client.hpp"
#include "fanout/util/log.hpp"

namespace fanout::client {

// Runs the pipeline at `path` to its end or to its first failed job. Prints a located error and
// returns 2 when the file is bad or a job that can already be checked is (nothing runs then);
// otherwise 0 when every job succeeded, 1 when one failed (later jobs are not run), 3 on an
// infrastructure failure.
int run_pipeline(const std::string& path, const RunOverrides& ov, Logger log);

}  // namespace fanout::client
