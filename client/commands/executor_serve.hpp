// `fanout executor-serve JOB_FILE`: the process behind the Python package's fanout.Executor
// (python/fanout/executor.py). It opens the job as `fanout run` does (the embedded default,
// --interchange with keys, the launchers) and, instead of listing an input, sends one mini-batch
// per line read from stdin, for as long as the Executor submits. See docs/python.md.
#pragma once

#include <string>

#include "client/launch/run_settings.hpp"
#include "fanout/util/log.hpp"

namespace fanout::client {

// Runs the job of `job_file` (its input is not listed) with mini-batches read from stdin:
//   "CALLS LINE"  one mini-batch of CALLS items: LINE, then CALLS - 1 empty items, so that the
//                 store counts the calls (indexes 0, 1, ... in order)
//   another line  one mini-batch of one item, the line itself
//   "=end"        no more: SubmitEnd, then the job is followed to its end
//   end of file   the Executor went away: the job is cancelled
// and writes JSON lines on stdout as the job goes:
//   {"event":"accepted","job":ID,"db":PATH,"log_dir":PATH}  first; none when the job is refused
//   {"event":"failed","index":N,"tries":T,"status":S,"error":TEXT}  a mini-batch out of tries:
//                 S its last attempt's status (RUN_TIMEOUT, WORKER_LOST, ...), TEXT "S: message"
//   {"event":"ended","state":STATE,"reason":TEXT}        last line; STATE "" when it did not end
// The rows of the mini-batches that succeed go to the job's append_row file as in any job.
// Returns the exit status of `fanout run`.
int serve_executor(const std::string& job_file, const RunOverrides& ov, const Logger& log);

}  // namespace fanout::client
