// The rows behind a job's report files (the logs/ folder, docs/store.md sections 7 and 8), read
// from the store in one read transaction. The SQL lives here; what the files look like (CSV
// headers, text layout, file names) is the report layer's (src/fanout/report/).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/store/db.hpp"

namespace fanout::store {

// The tables of the report's CSV files, each a query over a report view or a samples table.
enum class ReportTable : std::uint8_t {
  ProcessedMiniBatches,  // view processed_minibatches: by start time, then attempt id
  ProcessSummary,        // view process_summary: by node, process
  NodeSummary,           // view node_summary: by node
  NodeResourceUsage,     // node_resource_samples of one node: by time
  ProcessResourceUsage,  // process_resource_samples of one node: by time
  NodeDiskUsage,         // disk_usage_samples of one node: by time
};
inline constexpr std::size_t kReportTables = 6;

// The number of columns of `t`'s rows.
[[nodiscard]] int report_columns(ReportTable t) noexcept;
// True for the tables read per node (the resource samples).
[[nodiscard]] bool report_per_node(ReportTable t) noexcept;

// The rows of one ReportTable query, as text (numbers as SQLite prints them). Borrows its
// ReportSource's statement: valid until the next rows() call of that source.
class ReportRows final {
 public:
  ReportRows(Statement& st, int columns) : st_(st), columns_(columns) {}

  // Advances to the next row; false after the last one. Throws Failure{Database}.
  [[nodiscard]] bool next() {
    if (st_.step()) return true;
    st_.reset();
    return false;
  }
  [[nodiscard]] int columns() const noexcept { return columns_; }
  [[nodiscard]] bool is_null(int col) const { return st_.is_null(col); }
  // The column's text; valid until the next next(). Empty for NULL.
  [[nodiscard]] std::string_view text(int col) const { return st_.column_text(col); }

 private:
  Statement& st_;
  int columns_;
};

// What job_result.txt says about a job (jobs joined with view job_counts).
struct JobResultRow {
  std::string name{}, state{}, reason{};
  std::string spec_path{};                            // '' when none
  std::string output_path{};                          // '' for summary_only
  double started = 0, ended = 0;                      // Unix seconds; 0 when not set
  std::int64_t total = 0, succeeded = 0, failed = 0;  // mini-batches
  std::int64_t items_succeeded = 0, items_failed = 0;
  std::int64_t attempts = 0, attempts_failed = 0;
};

// One attempt as the report's single pass reads it (report::report_data()): raw columns, NULLs
// flagged. The views are valid until the pass moves on.
struct AttemptRow {
  std::uint64_t id = 0, job_id = 0, minibatch_id = 0, pool_id = 0;
  std::int64_t attempt = 0, worker_pid = 0, items = 0, succeeded = 0, failed = 0;
  double start = 0, elapsed_s = 0, cpu_s = 0, run_s = 0;
  std::string_view status{}, pool{}, node{}, process{}, error_category{}, error_message{}, detail{};
  std::string_view device{}, cpus{};  // '' when NULL (not placed, or recorded before)
  std::int64_t threads = 0;           // 0 when NULL
  bool has_pool_id = false, has_pool = false, has_node = false, has_pid = false, has_start = false,
       has_elapsed = false, has_cpu = false, has_run = false, has_items = false,
       has_succeeded = false, has_failed = false, has_detail = false;
};

// A failed attempt, as job_result.txt lists the first ones.
struct FailedAttemptRow {
  std::int64_t minibatch = 0;
  std::int64_t picked_count = 0;  // the try
  std::string status{};
  std::string message{};  // the whole error message
  std::string process{};  // '<pool>/<worker>', '' when it never reached one
};

// A job's counters as the progress overview shows them.
struct JobProgressRow {
  std::string name{}, state{};
  bool submit_done = false;
  std::uint64_t total = 0, succeeded = 0, failed = 0;
  std::uint64_t items_succeeded = 0, items_failed = 0, attempts_failed = 0;
  double started = 0, ended = 0;  // Unix seconds; 0 when not set
};

// A read-only connection to a store holding one read transaction, so that everything read
// through it shows the same committed state. Not thread-safe; one owner.
class ReportSource final {
 public:
  // Opens the store at `db_path` read-only and begins the read transaction. Throws
  // Failure{NotFound} (no such store), Failure{Version} (another schema version, naming both),
  // Failure{Database}.
  explicit ReportSource(const std::string& db_path);
  ~ReportSource();
  ReportSource(const ReportSource&) = delete;
  ReportSource& operator=(const ReportSource&) = delete;

  // Each throws Failure{Database} when its query fails.
  // Whether the store has the job.
  [[nodiscard]] bool has_job(std::uint64_t job_id);
  // The nodes that sent resource samples for the job, sorted.
  [[nodiscard]] std::vector<std::string> sample_nodes(std::uint64_t job_id);
  // The rows of `t` for the job (and `node`, for a per-node table), in the table's order.
  // `node` is bound, not copied: it must stay valid until the rows are read.
  [[nodiscard]] ReportRows rows(ReportTable t, std::uint64_t job_id, std::string_view node = {});

  // Calls `fn` for each attempt of the job, in attempt id order (the order tasks were handed
  // out), with its mini-batch's detail: the one scan of `attempts` a report makes.
  template <typename Fn>
  void each_attempt(std::uint64_t job_id, Fn&& fn) {
    Statement& st = attempts_of_job(job_id);
    AttemptRow row;
    while (st.step()) {
      fill_attempt(st, row);
      fn(static_cast<const AttemptRow&>(row));
    }
    st.reset();
  }
  // The detail of mini-batch `minibatch_id` of the job into `out` (its minibatch_inputs row);
  // false when it has none.
  bool minibatch_detail(std::uint64_t job_id, std::uint64_t minibatch_id, std::string& out);
  // The connection, for the row queries of report_queries.cpp within this transaction.
  [[nodiscard]] Db& db() noexcept { return *db_; }

  // The highest attempt id in the store (0 when none).
  [[nodiscard]] std::uint64_t max_attempt_id();
  // Begins a new read transaction after finish(), which sees what was committed since.
  // Throws Failure{Database}.
  void begin();
  // Ends the read transaction. Throws Failure{Database}.
  void finish();

 private:
  Statement& attempts_of_job(std::uint64_t job_id);
  static void fill_attempt(Statement& st, AttemptRow& row);

  std::unique_ptr<Db> db_;
  std::unique_ptr<Statement> attempts_{}, detail_{};                // prepared on first use
  std::array<std::unique_ptr<Statement>, kReportTables> tables_{};  // prepared on first use
};

}  // namespace fanout::store
