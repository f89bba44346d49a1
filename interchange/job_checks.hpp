// Checks of a submitted JobSpec that need nothing but the spec: the interchange rejects a job
// that fails them before it exists. Preparing its folders and output file is a separate step
// of the wiring (interchange.cpp). See docs/protocol.md (SubmitJob).
#pragma once

#include "fanout/protocol/messages.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::ix {

// Returns Error{InvalidArgument, "SubmitJob: <field>: <what was expected> (got ...)"} for the
// first field that is wrong: name (non-empty), runtime (python, command or native), max_tries
// (>= 1), code_dir (absolute), log_dir (absolute when set), output_path (an absolute file path
// when set).
[[nodiscard]] Expected<void> check_job_spec(const proto::JobSpec& spec);

}  // namespace fanout::ix
