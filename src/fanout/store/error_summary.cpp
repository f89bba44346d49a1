// A job's errors, grouped. See error_summary.hpp.
#include "fanout/store/error_summary.hpp"

#include "fanout/store/db.hpp"
#include "fanout/store/detail/read_only.hpp"
#include "fanout/store/report_source.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store {

namespace {

ErrorSummary query_error_summary(Db& db, std::uint64_t job_id) {
  ErrorSummary s;
  {
    // SQLite takes the bare columns from the row that holds min(start): the first occurrence.
    Statement st(db,
                 "SELECT status, error_category, count(*), count(DISTINCT minibatch_id), "
                 "minibatch_id, picked_count, process, process_start_time, error_message, "
                 "min(start) FROM processed_minibatches "
                 "WHERE job_id = ?1 AND status != 'RUN_DONE' GROUP BY status, error_category "
                 "ORDER BY status = 'CANCELLED', min(start), status, error_category");
    st.bind(1, job_id);
    while (st.step()) {
      s.kinds.push_back(ErrorKind{std::string(st.column_text(0)), std::string(st.column_text(1)),
                                  st.column_uint64(2), st.column_uint64(3), st.column_uint64(4),
                                  st.column_uint64(5), std::string(st.column_text(6)),
                                  std::string(st.column_text(7)), std::string(st.column_text(8))});
    }
  }
  {
    Statement st(db,
                 "SELECT node, process, minibatch_id, picked_count, status, error_category, "
                 "process_start_time, error_message, n FROM ("
                 "SELECT coalesce(node, '') AS node, process, minibatch_id, picked_count, status, "
                 "error_category, process_start_time, error_message, "
                 "row_number() OVER w AS k, count(*) OVER (PARTITION BY node, process) AS n "
                 "FROM processed_minibatches "
                 "WHERE job_id = ?1 AND status NOT IN ('RUN_DONE', 'CANCELLED') AND process != '' "
                 "WINDOW w AS (PARTITION BY node, process ORDER BY start, attempt_id)) "
                 "WHERE k <= ?2 ORDER BY node, process, k");
    st.bind(1, job_id).bind(2, kProcessErrors);
    while (st.step()) {
      if (s.processes.empty() || s.processes.back().node != st.column_text(0) ||
          s.processes.back().process != st.column_text(1)) {
        s.processes.push_back(ProcessErrors{std::string(st.column_text(0)),
                                            std::string(st.column_text(1)),
                                            st.column_uint64(8),
                                            {}});
      }
      s.processes.back().errors.push_back(
          ProcessError{st.column_uint64(2), st.column_uint64(3), std::string(st.column_text(4)),
                       std::string(st.column_text(5)), std::string(st.column_text(6)),
                       std::string(st.column_text(7))});
    }
  }
  return s;
}

}  // namespace

ErrorSummary read_error_summary(ReportSource& src, std::uint64_t job_id) {
  return query_error_summary(src.db(), job_id);
}

Expected<ErrorSummary> read_error_summary(const std::string& db_path, std::uint64_t job_id) {
  try {
    const auto conn = detail::open_read_only_current(db_path);
    Db& db = *conn;
    db.exec("BEGIN", "begin a read transaction");
    ErrorSummary s = query_error_summary(db, job_id);
    db.exec("COMMIT", "end a read transaction");
    return s;
  } catch (const Failure& f) {
    return Unexpected{f.error()};
  }
}

}  // namespace fanout::store
