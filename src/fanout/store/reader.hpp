// Read-only queries on a store file for `fanout history`, `fanout wait` and `fanout perf`:
// jobs and their counts. Readers use their own connection and never block the writer.
// Schema: docs/store.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fanout::store {

// A job as `fanout history` / `fanout status` show it.
struct JobSummary {
  std::uint64_t id = 0;
  std::string name{};
  std::string state{};
  std::string reason{};
  double created = 0;
  double ended = 0;                         // 0 while running
  std::uint64_t total = 0;                  // mini-batches known
  std::uint64_t succeeded = 0, failed = 0;  // mini-batches
  std::uint64_t items_succeeded = 0, items_failed = 0;
  std::uint64_t attempts = 0;
  std::uint64_t attempts_failed = 0;  // attempts not RUN_DONE (failed, lost, cancelled)
  std::string output_path{};
  std::string log_dir{};
  std::string experiment{};  // the `fanout explore` experiment it was a run of; empty if none
};

// An experiment of `fanout explore` (table `experiments`) with its runs' totals.
struct ExperimentRow {
  std::string id{}, state{};
  double created = 0;
  double last_ended = 0;  // the latest end of its runs' jobs; 0 when none ended
  std::uint64_t runs = 0, items_succeeded = 0;
};

// Read-only queries on a store file. Throws Failure{NotFound} when the file does not exist,
// Failure{Version} when its schema version is not kSchemaVersion. Not thread-safe.
class StoreReader final {
 public:
  explicit StoreReader(const std::string& path);
  ~StoreReader();
  StoreReader(const StoreReader&) = delete;
  StoreReader& operator=(const StoreReader&) = delete;

  // Newest first, at most `limit` jobs (0: all); `state` empty means any. Throws
  // Failure{Database} when a query fails.
  [[nodiscard]] std::vector<JobSummary> history(std::size_t limit, const std::string& state = {});
  [[nodiscard]] std::optional<JobSummary> job(std::uint64_t id);
  // The accelerators the job's workers were given (attempts.device), distinct and sorted; a
  // scan of the job's attempts, so asked for apart from the summary.
  [[nodiscard]] std::vector<std::string> devices(std::uint64_t id);
  [[nodiscard]] std::optional<ExperimentRow> experiment(const std::string& id);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fanout::store
