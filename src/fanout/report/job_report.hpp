// A job's logs folder, shaped like ParallelRunStep's, generated from the store: job_result.txt,
// job_progress_overview.<yyyymmddhh>.txt, sys/job_report/*.csv and sys/perf/<node>/*.csv.
// Every file is a pure function of the store's rows, so `fanout report` regenerates a finished
// job's files byte for byte. Files, columns and headers: docs/store.md, sections 7 and 8.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/util/expected.hpp"

namespace fanout::report {

struct JobReportOptions {
  bool html = false;  // report.html too (last in the list), from the same pass
};

// Writes the logs folder files of job `job_id` from the store at `db_path` into `out_dir`
// (normally the job's logs/ folder, jobs.log_dir), all from one read transaction and one scan of
// the job's attempts (processed_mini-batches.csv in attempt id order); each file is
// streamed under a temporary name and renamed into place once all are written. Files already
// there from an earlier run of this function are replaced; other files (logs, user/) are left
// alone. Returns the paths written, relative to `out_dir`, in a fixed order. Errors: NotFound
// (no store, or no such job), Version (a store of another schema version), Database, Io
// (naming the file).
[[nodiscard]] Expected<std::vector<std::string>> write_job_report(
    const std::string& db_path, std::uint64_t job_id, const std::string& out_dir,
    const JobReportOptions& options = {});

// A node name as a folder name under sys/perf/: path separators and NULs become '_', and "",
// "." and ".." get a leading '_'.
[[nodiscard]] std::string node_folder(std::string_view node);

}  // namespace fanout::report
