// Checks of a submitted JobSpec that need nothing but the spec: the interchange rejects a job
// that fails them before it exists. Preparing its folders and output file is a separate step
// of the wiring (interchange.cpp). See docs/protocol.md (SubmitJob).
#pragma once

#include <string>
#include <vector>

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
// same output file: compared by device and inode when both exist, else by where they resolve
// with their links followed (resolve_for_write), never by spelling alone, so a link to another
// user's folder does not make its file a new output. Jobs without an output file never conflict.
[[nodiscard]] Expected<void> check_output_free(const proto::JobSpec& spec,
                                               const JobLedger::Jobs& jobs);

// Where a path to be created would land, as the kernel resolves it: from `/`, each existing
// component's symbolic links are followed (dangling ones too: creating through one creates its
// target) and `..` then steps up from the folder reached; from the first missing component on,
// the rest is joined as it is written (`..` included: the interchange makes those folders
// itself, so they are real folders). Error{InvalidArgument} naming `path` when it is not
// absolute or has more than 40 links on its way (a loop). Reads the file system, writes nothing.
[[nodiscard]] Expected<std::string> resolve_for_write(const std::string& path);

// Whether `path` is `root` or lies beneath it, comparing whole components (so `/root2` is not
// beneath `/root`). Both must be resolved already (resolve_for_write); lexical only.
[[nodiscard]] bool is_within(const std::string& path, const std::string& root);

// The folders outside which a client may not make the interchange write (fanout-interchange
// --write-root), each resolved with resolve_for_write(). A SubmitJob's output_path and its
// log_dir, unless the interchange chose it itself (`log_dir_is_clients` false), must resolve
// within one of `roots`: else Error{InvalidArgument, "SubmitJob: output_path: PATH (resolves to
// REAL) is outside the folders this interchange writes for clients: ROOT, ... (fanout-interchange
// --write-root); nothing was created"}. Fields that are empty are not checked. Call after
// check_job_spec() (the paths are absolute) and before anything is created.
[[nodiscard]] Expected<void> check_write_roots(const proto::JobSpec& spec,
                                               const std::vector<std::string>& roots,
                                               bool log_dir_is_clients);

// A new job writes a fresh append_row file, on every route (the embedded interchange and a shared
// one alike): Error{InvalidArgument, "SubmitJob: output_path: <path> holds N bytes of an earlier
// job's rows; ..."} when spec.output_path exists and is not empty. The client removes it first
// when run with --overwrite; `fanout resume` continues its own file and never submits.
[[nodiscard]] Expected<void> check_output_fresh(const proto::JobSpec& spec);

}  // namespace fanout::ix
