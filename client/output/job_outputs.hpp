// A job's declared outputs on the client's side: their folders made before it starts, the
// append_row file of an earlier job refused unless --overwrite, and the MLTable file of an
// `mltable` output written when it ends. See docs/job-spec.md#outputs.
#pragma once

#include <string>

#include "fanout/config/job_spec.hpp"
#include "fanout/store/job_settings.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::client {

// Where the entry script's EntryScript().output_dir and AZUREML_BI_OUTPUT_PATH point: the
// append_row file's folder; without one, the first folder output (uri_folder or mltable) with a
// path; else "" (the pool then uses <run folder>/outputs). Pure.
[[nodiscard]] std::string output_folder(const config::JobConfig& cfg);

// What the end summary of `run`, `wait` and `resume` names as a job's output (`output: ...`),
// from what the store records: the append_row file (jobs.output_path) when there is one, else
// the declared folder output of jobs.settings (`output_dir`); "" when neither. Pure.
[[nodiscard]] std::string summary_output(const std::string& output_path,
                                         const store::JobSettings& recorded);

// Creates every output's folder (a uri_file output's parent), as Azure ML provides them.
// Error{Io} naming the output and folder.
[[nodiscard]] Expected<void> make_output_folders(const config::JobConfig& cfg);

// A new job writes a fresh append_row file. When the file exists and is not empty (an earlier,
// finished job's rows), this refuses with a message naming the file and --overwrite, unless
// `overwrite`, which removes it. A file that an unfinished job in the store `db` writes is
// refused either way (that job continues it on resume); an empty `db` skips that check (a shared
// interchange's store is not the client's). Error{InvalidArgument} or Error{Io}.
[[nodiscard]] Expected<void> claim_row_file(const config::JobConfig& cfg, const std::string& db,
                                            bool overwrite);

// For each `mltable` output with a path, writes <folder>/MLTable describing what the job wrote
// (config::output_mltable_text), atomically. Error{Io} naming the file.
[[nodiscard]] Expected<void> write_output_mltables(const config::JobConfig& cfg);

}  // namespace fanout::client
