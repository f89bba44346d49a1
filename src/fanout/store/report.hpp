// A job's logs folder, shaped like ParallelRunStep's, generated from the store: job_result.txt,
// job_progress_overview.<yyyymmddhh>.txt, sys/job_report/*.csv and sys/perf/<node>/*.csv.
// Every file is a pure function of the store's rows, so `fanout report` regenerates a finished
// job's files byte for byte. Columns and headers: docs/store.md, section "Reports".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fanout/util/expected.hpp"

namespace fanout::store {

// The counters of job_progress_overview.*.txt. The interchange fills it from memory while the
// job runs; write_job_report() fills it from the store.
struct ProgressOverview {
  std::uint64_t job_id = 0;
  std::string name{};
  std::string state{};
  bool total_known = false;  // the client has submitted every mini-batch
  std::uint64_t total = 0;   // mini-batches known
  std::uint64_t succeeded = 0, failed = 0;
  std::uint64_t items_succeeded = 0, items_failed = 0;
  std::uint64_t attempts_failed = 0;
  double started = 0;  // Unix seconds
  double now = 0;      // the job's end, or the time of the snapshot while it runs
};

// The text of a progress overview: a few "key: value" lines, ending with a newline.
std::string format_progress_overview(const ProgressOverview& p);

// "job_progress_overview.2026112205.txt" for a job started at `started` (UTC hour).
std::string progress_overview_name(double started);

// Writes `text` to `path` through a temporary file and a rename, so a reader never sees half a
// file. Creates the parent folders. Error{Io} naming the path on failure.
[[nodiscard]] Expected<void> write_file_atomic(const std::string& path, const std::string& text);

// Writes the logs folder files of job `job_id` from the store at `db_path` into `out_dir`
// (normally the job's logs/ folder, jobs.log_dir). Files already there from an earlier run of
// this function are replaced; other files (logs, user/) are left alone. Returns the paths
// written, relative to `out_dir`, in a fixed order. Errors: NotFound (no store, or no such job),
// Version (a store of another schema version), Database, Io (naming the file).
[[nodiscard]] Expected<std::vector<std::string>> write_job_report(const std::string& db_path,
                                                                  std::uint64_t job_id,
                                                                  const std::string& out_dir);

// What `fanout status JOB` shows, read from the store.
struct JobStatus {
  struct PoolUse {
    std::string name{}, node{}, state{};
    std::uint64_t workers = 0;
    std::uint64_t attempts = 0;  // of this job
  };
  struct ErrorLine {
    std::uint64_t minibatch = 0;
    std::uint64_t attempt = 0;
    std::string process{}, status{}, message{};  // message: its first line
    std::string time{};                          // ISO UTC
  };
  std::uint64_t id = 0;
  std::string name{}, state{}, reason{}, log_dir{}, output_path{};
  bool total_known = false;
  std::uint64_t total = 0, succeeded = 0, failed = 0, pending = 0, running = 0;
  std::uint64_t items_succeeded = 0, items_failed = 0, attempts = 0, attempts_failed = 0;
  double started = 0, ended = 0;  // Unix seconds; ended 0 while running
  double elapsed_s = 0, minibatches_per_s = 0, items_per_s = 0;
  double eta_s = -1;            // -1: unknown or finished
  std::uint64_t processes = 0;  // distinct worker processes that ran an attempt
  std::vector<PoolUse> pools{};
  std::vector<ErrorLine> last_errors{};  // newest first, at most 5
};

// Reads a job's status from the store (read-only). Errors: NotFound (no store, no such job),
// Version, Database.
[[nodiscard]] Expected<JobStatus> read_job_status(const std::string& db_path, std::uint64_t job_id);

// Quotes one CSV field when it needs it (RFC 4180: a comma, a double quote, CR or LF).
void append_csv_field(std::string& out, std::string_view field);

}  // namespace fanout::store
