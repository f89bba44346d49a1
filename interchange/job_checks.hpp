// Checks of a submitted JobSpec that need nothing but the spec: the interchange rejects a job
// that fails them before it exists. Preparing its folders and output file is a separate step
// of the wiring (interchange.cpp). See docs/protocol.md (SubmitJob).
#pragma once

#include "fanout/protocol/messages.hpp"
#include "fanout/util/expected.hpp"
#include "interchange/job_ledger.hpp"

namespace fanout::ix {

// Returns Error{InvalidArgument, "SubmitJob: <field>: <what was expected> (got ...)"} for the
// first field that is wrong: name (non-empty), runtime (python, command or native), max_tries
// (>= 1), code_dir (absolute), log_dir (absolute when set), output_path (an absolute file path
// when set).
[[nodiscard]] Expected<void> check_job_spec(const proto::JobSpec& spec);

// A second job may never append to a file a live job appends to (each keeps its own end offset,
// so their rows would overwrite each other): Error{InvalidArgument, "SubmitJob: output_path:
// <path> is the append_row output of running job <id> (<name>); ..."} when one of `jobs` has the
// same output_path (compared lexically normalised). Jobs without an output file never conflict.
[[nodiscard]] Expected<void> check_output_free(const proto::JobSpec& spec,
                                               const JobLedger::Jobs& jobs);

// A new job writes a fresh append_row file, on every route (the embedded interchange and a shared
// one alike): Error{InvalidArgument, "SubmitJob: output_path: <path> holds N bytes of an earlier
// job's rows; ..."} when spec.output_path exists and is not empty. The client removes it first
// when run with --overwrite; `fanout resume` continues its own file and never submits.
[[nodiscard]] Expected<void> check_output_fresh(const proto::JobSpec& spec);

}  // namespace fanout::ix
