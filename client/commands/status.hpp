// fanout status JOB and fanout report JOB: read a job from the store (read-only), show its
// state, or regenerate its logs folder. main.cpp parses the CLI and calls these.
#pragma once

#include <cstdint>
#include <string>

namespace fanout::client {

// Prints a job's counts, rate, pools, workers and last errors. Returns the exit code: 0 shown,
// 2 no such store or job (the error names which).
int print_status(const std::string& db, std::uint64_t job_id, bool json);

// Regenerates the job's report files (report::write_job_report) into `out_dir`, or into the
// job's own logs folder when empty, and lists them. Returns the exit code: 0 written, 2 no such
// store or job, 1 a file could not be written.
int write_report(const std::string& db, std::uint64_t job_id, const std::string& out_dir);

}  // namespace fanout::client
