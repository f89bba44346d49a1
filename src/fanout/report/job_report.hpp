// A job's logs folder, shaped like ParallelRunStep's, generated from the store: job_result.txt,
// job_progress_overview.<yyyymmddhh>.txt, sys/job_report/*.csv and sys/perf/<node>/*.csv.
// Every file is a pure function of the store's rows, so `fanout report` regenerates a finished
// job's files byte for byte. Files, columns and headers: docs/store.md, sections 7 and 8.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/report/report_data.hpp"
#include "fanout/store/report_source.hpp"
#include "fanout/util/atomic_file.hpp"
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

class ReportPass;

// A job's report built one attempt at a time: while the job runs (the interchange's report
// thread hands it each committed attempt, in id order) or in one scan after
// (write_job_report()). processed_mini-batches.csv is written as the attempts come; the other
// files by finish(). Not thread-safe; one owner.
class JobReportBuilder final {
 public:
  // Opens processed_mini-batches.csv under its temporary name in `out_dir`. Throws Failure{Io}.
  JobReportBuilder(std::uint64_t job_id, std::string out_dir);
  // Removes the temporary files unless finish() committed them.
  ~JobReportBuilder();
  JobReportBuilder(const JobReportBuilder&) = delete;
  JobReportBuilder& operator=(const JobReportBuilder&) = delete;

  // One attempt of the job, in attempt id order. Throws Failure{Io}.
  void add(const store::AttemptRow& a);
  // Reads the rest (the job's row and counts, pools, samples) through `src`, writes every
  // other file (and report.html when `html`) and renames them all into place. Returns the paths
  // written, relative to the folder, in write_job_report()'s order. Throws Failure{NotFound},
  // Failure{Database}, Failure{Io}.
  std::vector<std::string> finish(store::ReportSource& src, bool html);

 private:
  std::uint64_t job_id_;
  std::string out_dir_;
  std::unique_ptr<AtomicFile> processed_;
  std::unique_ptr<ReportPass> csv_;
  ReportDataPass figures_;
};

// A node name as a folder name under sys/perf/: path separators and NULs become '_', and "",
// "." and ".." get a leading '_'.
[[nodiscard]] std::string node_folder(std::string_view node);

}  // namespace fanout::report
