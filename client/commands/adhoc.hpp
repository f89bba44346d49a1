// Ad-hoc runs without a job file, as GNU parallel users work:
//   fanout run -c 'gzip -k {}' --input DIR|LIST|-
// The command line becomes a command-runtime job file (written beside the store and kept, so
// `fanout resume` and the store's history work as for any job), run through the same path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fanout/util/expected.hpp"

namespace fanout::client {

struct AdhocOptions {
  std::string command{};  // -c: the command, with GNU parallel's replacement strings
  std::string input{};    // --input: a folder (its files), a list file (its lines), or - (stdin)
  std::string output{};   // --output: the rows file; empty or "-": rows to stdout at the end
  std::string name{};     // --name: the job's name (default: adhoc-<program>)
  std::uint64_t mini_batch_size = 1;  // items per mini-batch
  int max_retries = 0;                // retry_settings.max_retries (GNU: no retries)
  std::uint32_t timeout_s = 0;        // retry_settings.timeout per mini-batch; 0: none
  std::int64_t error_threshold = -1;  // failed items allowed; -1: run everything
  std::vector<std::string> env{};     // --env NAME=VALUE
};

// What an ad-hoc run wrote: the job file to run, and the rows file to print at the end (empty
// when --output named a file).
struct AdhocJob {
  std::string job_file{};
  std::string print_rows{};
};

// Writes the job file into `folder` (made if missing); stdin (`--input -`) is first saved there
// as the list of items. Errors name the option at fault.
[[nodiscard]] Expected<AdhocJob> write_adhoc_job(const AdhocOptions& o, const std::string& folder);

// Copies an ad-hoc run's rows file to stdout (missing file: nothing).
void print_rows_file(const std::string& path);

}  // namespace fanout::client
