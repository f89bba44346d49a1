// What `fanout status JOB` shows, read from the store in one read transaction. The text and
// JSON it is shown as are the report layer's (report/status_text.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fanout/util/expected.hpp"

namespace fanout::store {

// A job's state, counts, rates, pools and last errors, as the store holds them.
struct JobStatus {
  struct PoolUse {
    std::string name{}, node{}, state{};
    std::uint64_t workers = 0;
    std::uint64_t attempts = 0;  // of this job
    std::string devices{};       // the accelerators its workers were given, e.g. "0,1"; "": none
    // Seconds since pools.last_seen (its last heartbeat while connected, kept every few
    // seconds by the interchange; its loss or leaving after); -1: not recorded.
    double heartbeat_age_s = -1;
  };
  struct ErrorLine {
    std::uint64_t minibatch = 0;
    std::uint64_t attempt = 0;
    std::string process{}, status{}, message{};  // message: its first line
    std::string time{};                          // ISO UTC
    // The message's last lines after the first (at most 5; a command's stderr ends its message).
    std::vector<std::string> tail{};
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
  // At most 5: real errors newest first, then CANCELLED attempts (stopped by the job's end).
  std::vector<ErrorLine> last_errors{};
  std::optional<ErrorLine> first_error{};  // the oldest failed attempt that is not CANCELLED
};

// Reads a job's status from the store at `db_path` (read-only). Errors: NotFound (no store, no
// such job), Version (a store of another schema version), Database.
[[nodiscard]] Expected<JobStatus> read_job_status(const std::string& db_path, std::uint64_t job_id);

}  // namespace fanout::store
