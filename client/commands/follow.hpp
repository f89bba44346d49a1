// Following a job by id after its submitter: `fanout wait`, `fanout cancel` and `fanout resume`.
// They find the interchange through the job's run folder (docs/architecture.md, "Interchange
// crash and resume") and reattach when it restarts. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fanout/net/security.hpp"
#include "fanout/protocol/messages.hpp"
#include "fanout/util/log.hpp"

namespace fanout::client {

// Writes `<run_dir>/interchange.ready` ("client=<endpoint>") unless one exists (the embedded
// interchange writes its own), so that `fanout wait/cancel JOB` find the job's interchange.
void write_job_pointer(const std::string& run_dir, const std::string& endpoint,
                       std::uint64_t job_id);

// Prints the job's end (state, reason, counts, output and logs, and, when the store `db` can be
// read here, the job's first real error with the last lines of its message), then, for a failed,
// partial or cancelled job, a last line with the command that continues it (`fanout resume N
// --failed`), and returns exit_status(state, allow_partial).
int report_ended(const proto::JobEnded& ended, const std::string& output_path,
                 const std::string& log_dir, const std::string& db = {},
                 bool allow_partial = false);

struct FollowOptions {
  std::string db{};           // the store: the job's run folder and, once ended, its result
  std::string interchange{};  // client endpoint; empty: from the run folder's interchange.ready
  bool cancel = false;        // send CancelJob first
  std::string reason{};       // the cancel's reason (default: "cancelled by fanout cancel")
  bool quiet = false;
  bool resumed = false;  // set by resume_job: the interchange is its private one
  // set by resume_job --failed on a store another interchange owns: ReopenJob before Attach
  bool reopen = false;
  bool allow_partial = false;  // a partial job exits 0
  net::Security security{};    // for a tcp:// interchange (docs/security.md)
};

// `fanout wait JOB` / `fanout cancel JOB`: attaches to the job's interchange and follows the job
// to its end. A job the store holds as ended is reported from the store. `wait` returns the
// job's exit_status() (0 succeeded, 4 partial, 1 failed or cancelled); `cancel` returns 0 when it
// cancelled the job and 1 when the job had already ended (or ended otherwise first): nothing was
// cancelled. Both: 2 unknown job or bad arguments, 3 no interchange reachable.
int follow_job(std::uint64_t job_id, const FollowOptions& opts, Logger log);

// Writes the reports (logs/: job_result.txt, the CSVs, report.html) of job `job_id`, ended in
// the store `db`, when report.html is missing (its interchange was killed before writing them),
// removing temporary files dead writers left. A failure is printed, not fatal.
void write_missing_reports(const std::string& db, std::uint64_t job_id, const std::string& log_dir);

// The end of job `job_id` as the store `db` holds it, as JobEnded would have told it; nullopt
// while it has not ended there (or the store cannot be read).
std::optional<proto::JobEnded> job_ended_in_store(const std::string& db, std::uint64_t job_id);

struct ResumeOptions {
  std::string db{};
  std::string python{};       // empty: the job's
  std::uint32_t workers = 0;  // per pool; 0: the job's
  std::uint32_t pools = 0;    // 0: the job's instance_count
  bool quiet = false;
  bool allow_partial = false;
  // --failed: also re-run the mini-batches that failed, of a job that may have ended (failed,
  // cancelled, partial); the output keeps its rows and gets only the new ones.
  bool failed = false;
  // --accept-changed-input: resume even when the job's input no longer lists as it was submitted
  // (files added or removed, a table changed); what changed is recorded in jobs.settings.
  bool accept_changed_input = false;
};

// `fanout resume JOB --db X`: starts a private interchange on the store (it resumes every
// unfinished job), local pools, and follows JOB to its end. Same exit codes as follow_job.
int resume_job(std::uint64_t job_id, const ResumeOptions& opts, Logger log);

}  // namespace fanout::client
