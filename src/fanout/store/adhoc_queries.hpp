// Read-only queries for an ad-hoc run (`fanout run -c`): its rows in input order (-k) and its
// job log (--joblog). Schema: docs/store.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fanout::store {

// A mini-batch's place in its job's output file.
struct BatchRows {
  std::uint64_t id = 0;
  std::string state{};       // pending, running, succeeded, failed
  std::uint64_t offset = 0;  // of its rows in the output file; valid when has_rows
  std::uint64_t bytes = 0;
  bool has_rows = false;
};

// One line of GNU parallel's --joblog: a mini-batch's latest attempt.
struct JoblogEntry {
  std::uint64_t minibatch = 0;
  std::string node{};
  double start = 0;
  double elapsed_s = 0;
  std::uint64_t output_bytes = 0;
  std::string status{};         // attempts.status
  std::string error_message{};  // of a failed attempt
  std::string detail{};         // minibatch_inputs.detail (JSON, {"files": [...]})
};

// Read-only store handle for one ad-hoc run. Throws Failure{NotFound} when the store is missing,
// Failure{Version} for another schema version. Not thread-safe.
class AdhocQueries final {
 public:
  explicit AdhocQueries(const std::string& db);
  ~AdhocQueries();
  AdhocQueries(const AdhocQueries&) = delete;
  AdhocQueries& operator=(const AdhocQueries&) = delete;

  // The newest job whose output file is `output_path`; nullopt before it is submitted.
  [[nodiscard]] std::optional<std::uint64_t> job_writing(const std::string& output_path);
  // The job's output file (its append_row_to); nullopt for a job not in the store or without
  // one.
  [[nodiscard]] std::optional<std::string> output_of(std::uint64_t job);
  // The job's mini-batches from `first` on, in input order (ids not yet recorded are missing).
  [[nodiscard]] std::vector<BatchRows> batches_from(std::uint64_t job, std::uint64_t first);
  // Items that succeeded, and every item known, so far.
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> items_done(std::uint64_t job);
  // The latest attempt of each mini-batch that ran, in input order.
  [[nodiscard]] std::vector<JoblogEntry> joblog(std::uint64_t job);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fanout::store
