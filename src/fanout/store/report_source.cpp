// The report's queries. See report_source.hpp; the views are in docs/store.md, section 7.
#include "fanout/store/report_source.hpp"

#include <string>
#include <utility>

#include "fanout/store/detail/read_only.hpp"

namespace fanout::store {

namespace {

// One query per ReportTable, one column per CSV field. ?1 is the job id, ?2 the node.
struct TableQuery {
  int columns;
  bool per_node;
  const char* sql;
};

constexpr TableQuery kTables[kReportTables] = {
    // ProcessedMiniBatches
    {14, false,
     "SELECT minibatch_id, picked_count, process, process_start_time, total, succeeded, failed, "
     "elapsed_seconds, process_seconds, run_method_seconds, status, error_category, "
     "error_message, minibatch_detail FROM processed_minibatches WHERE job_id = ?1 "
     "ORDER BY start, attempt_id"},
    // ProcessSummary
    {19, false,
     "SELECT node, process, worker_starts, attempts, succeeded_attempts, failed_attempts, items, "
     "items_succeeded, items_failed, elapsed_seconds, process_seconds, run_method_seconds, "
     "avg_run_method_seconds, overhead_seconds, first_start_time, last_end_time, device, cpus, "
     "threads FROM process_summary WHERE job_id = ?1 ORDER BY node, process"},
    // NodeSummary
    {15, false,
     "SELECT node, pools, processes, attempts, succeeded_attempts, failed_attempts, items, "
     "items_succeeded, items_failed, elapsed_seconds, process_seconds, run_method_seconds, "
     "first_start_time, last_end_time, attempts_per_second "
     "FROM node_summary WHERE job_id = ?1 ORDER BY node"},
    // NodeResourceUsage
    {15, true,
     "SELECT strftime('%Y-%m-%dT%H:%M:%fZ', time, 'unixepoch'), pool, round(interval_s, 3), "
     "round(cpu_percent, 1), round(mem_total_mb, 1), round(mem_available_mb, 1), "
     "round(mem_used_mb, 1), disk_reads, disk_writes, round(disk_read_mb, 3), "
     "round(disk_write_mb, 3), round(net_sent_mb, 3), round(net_recv_mb, 3), tcp_connections, "
     "udp_connections FROM node_resource_samples WHERE job_id = ?1 AND node = ?2 "
     "ORDER BY time, id"},
    // ProcessResourceUsage
    {10, true,
     "SELECT strftime('%Y-%m-%dT%H:%M:%fZ', time, 'unixepoch'), pool, process, pid, "
     "round(cpu_percent, 1), round(rss_mb, 1), reads, writes, round(read_mb, 3), "
     "round(write_mb, 3) FROM process_resource_samples WHERE job_id = ?1 AND node = ?2 "
     "ORDER BY time, id"},
    // NodeDiskUsage
    {7, true,
     "SELECT strftime('%Y-%m-%dT%H:%M:%fZ', time, 'unixepoch'), pool, mount, round(total_mb, 1), "
     "round(used_mb, 1), round(free_mb, 1), round(used_percent, 1) FROM disk_usage_samples "
     "WHERE job_id = ?1 AND node = ?2 ORDER BY time, id"},
};

const TableQuery& query_of(ReportTable t) noexcept { return kTables[static_cast<std::size_t>(t)]; }

}  // namespace

int report_columns(ReportTable t) noexcept { return query_of(t).columns; }

bool report_per_node(ReportTable t) noexcept { return query_of(t).per_node; }

ReportSource::ReportSource(const std::string& db_path)
    : db_(detail::open_read_only_current(db_path)) {
  db_->exec("BEGIN", "begin the report's read transaction");
}

ReportSource::~ReportSource() = default;

std::vector<std::string> ReportSource::sample_nodes(std::uint64_t job_id) {
  Statement nodes(*db_,
                  "SELECT node FROM node_resource_samples WHERE job_id = ?1 UNION "
                  "SELECT node FROM process_resource_samples WHERE job_id = ?1 UNION "
                  "SELECT node FROM disk_usage_samples WHERE job_id = ?1 ORDER BY 1");
  nodes.bind(1, job_id);
  std::vector<std::string> out;
  while (nodes.step()) out.emplace_back(nodes.column_text(0));
  nodes.reset();
  return out;
}

ReportRows ReportSource::rows(ReportTable t, std::uint64_t job_id, std::string_view node) {
  const TableQuery& q = query_of(t);
  auto& st = tables_[static_cast<std::size_t>(t)];
  if (!st) st = std::make_unique<Statement>(*db_, q.sql);
  st->reset();
  st->bind(1, job_id);
  if (q.per_node) st->bind(2, node);
  return ReportRows(*st, q.columns);
}

Statement& ReportSource::attempts_of_job(std::uint64_t job_id) {
  if (!attempts_) {
    // A rowid range scan over the job's ids (tasks get ids as they are handed out), not the
    // (job_id, minibatch_id) index and a sort: the rows come in id order as stored.
    attempts_ = std::make_unique<Statement>(*db_, R"sql(
SELECT a.id, a.job_id, a.minibatch_id, a.attempt, a.status, a.pool_id, a.pool, a.node, a.process,
       a.worker_pid, a.start, a.elapsed_s, a.cpu_s, a.run_s, a.items, a.succeeded, a.failed,
       a.error_category, a.error_message, i.detail, a.device, a.cpus, a.threads
FROM attempts a LEFT JOIN minibatch_inputs i ON i.job_id = a.job_id AND
     i.minibatch_id = a.minibatch_id
WHERE a.id BETWEEN (SELECT min(id) FROM attempts WHERE job_id = ?1) AND
      (SELECT max(id) FROM attempts WHERE job_id = ?1) AND +a.job_id = ?1 ORDER BY a.id)sql");
  }
  attempts_->reset();
  attempts_->bind(1, job_id);
  return *attempts_;
}

bool ReportSource::minibatch_detail(std::uint64_t job_id, std::uint64_t minibatch_id,
                                    std::string& out) {
  if (!detail_) {
    detail_ = std::make_unique<Statement>(
        *db_, "SELECT detail FROM minibatch_inputs WHERE job_id = ?1 AND minibatch_id = ?2");
  }
  detail_->reset();
  detail_->bind(1, job_id).bind(2, minibatch_id);
  const bool found = detail_->step() && !detail_->is_null(0);
  if (found) out.assign(detail_->column_text(0));
  detail_->reset();
  return found;
}

void ReportSource::fill_attempt(Statement& st, AttemptRow& r) {
  r.id = st.column_uint64(0);
  r.job_id = st.column_uint64(1);
  r.minibatch_id = st.column_uint64(2);
  r.attempt = st.column_int64(3);
  r.status = st.column_text(4);
  r.has_pool_id = !st.is_null(5);
  r.pool_id = st.column_uint64(5);
  r.has_pool = !st.is_null(6);
  r.pool = st.column_text(6);
  r.has_node = !st.is_null(7);
  r.node = st.column_text(7);
  r.process = st.column_text(8);
  r.has_pid = !st.is_null(9);
  r.worker_pid = st.column_int64(9);
  r.has_start = !st.is_null(10);
  r.start = st.column_double(10);
  r.has_elapsed = !st.is_null(11);
  r.elapsed_s = st.column_double(11);
  r.has_cpu = !st.is_null(12);
  r.cpu_s = st.column_double(12);
  r.has_run = !st.is_null(13);
  r.run_s = st.column_double(13);
  r.has_items = !st.is_null(14);
  r.items = st.column_int64(14);
  r.has_succeeded = !st.is_null(15);
  r.succeeded = st.column_int64(15);
  r.has_failed = !st.is_null(16);
  r.failed = st.column_int64(16);
  r.error_category = st.column_text(17);
  r.error_message = st.column_text(18);
  r.has_detail = !st.is_null(19);
  r.detail = st.column_text(19);
  r.device = st.column_text(20);
  r.cpus = st.column_text(21);
  r.threads = st.column_int64(22);
}

bool ReportSource::has_job(std::uint64_t job_id) {
  Statement st(*db_, "SELECT 1 FROM jobs WHERE id = ?1");
  st.bind(1, job_id);
  return st.step();
}

std::uint64_t ReportSource::max_attempt_id() {
  Statement st(*db_, "SELECT coalesce(max(id), 0) FROM attempts");
  return st.step() ? st.column_uint64(0) : 0;
}

void ReportSource::begin() { db_->exec("BEGIN", "begin the report's read transaction"); }

void ReportSource::finish() { db_->exec("COMMIT", "end the report's read transaction"); }

}  // namespace fanout::store
