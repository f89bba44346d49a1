// fanout report JOB --html, fanout compare JOB JOB..., fanout tune JOB: the job's page, run
// comparison and tuning advice, read from the store (read-only). main.cpp parses the CLI and
// calls these; the logic is in src/fanout/report/. See docs/tuning.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fanout/report/tune.hpp"

namespace fanout::client {

// Writes report.html of the job to `out_file`, or to report.html in the job's logs folder when
// empty. Works for a running job (a snapshot). Returns the exit code: 0 written, 2 no such store
// or job, 1 the file could not be written.
int write_html_report(const std::string& db, std::uint64_t job_id, const std::string& out_file);

// Prints the comparison table of `jobs`; with `html_file` also writes the page. Returns the
// exit code: 0, 2 a store or job is missing, 1 the page could not be written.
int compare_jobs(const std::string& db, const std::vector<std::uint64_t>& jobs,
                 const std::string& html_file);

// Prints the recommendations for the job; with `write_file` also writes the suggested settings
// as YAML. Returns the exit code: 0, 2 no such store or job, 1 the file could not be written.
int tune_job(const std::string& db, std::uint64_t job_id, const report::TuneOptions& opt,
             const std::string& write_file);

}  // namespace fanout::client
