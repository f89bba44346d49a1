// fanout status's queries. See job_status.hpp; the views are in docs/store.md, section 7.
#include "fanout/store/job_status.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string_view>
#include <vector>

#include "fanout/store/db.hpp"
#include "fanout/store/detail/read_only.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store {

namespace {

// An error line from a row of (minibatch_id, picked_count, process, status, error_message,
// process_start_time): the message's first line, at most 300 bytes.
JobStatus::ErrorLine error_line(const Statement& st) {
  const std::string_view full = st.column_text(4);
  const std::string_view msg = full.substr(0, full.find('\n'));
  JobStatus::ErrorLine e{st.column_uint64(0),
                         st.column_uint64(1),
                         std::string(st.column_text(2)),
                         std::string(st.column_text(3)),
                         std::string(msg.substr(0, 300)),
                         std::string(st.column_text(5))};
  // The last lines, newest last: what a failing command said just before it ended.
  std::string_view rest = msg.size() < full.size() ? full.substr(msg.size() + 1) : "";
  while (!rest.empty() && e.tail.size() < 5) {
    while (!rest.empty() && rest.back() == '\n') rest.remove_suffix(1);
    if (rest.empty()) break;
    const auto nl = rest.rfind('\n');
    const std::string_view line = nl == std::string_view::npos ? rest : rest.substr(nl + 1);
    if (line != "stderr (tail):") e.tail.insert(e.tail.begin(), std::string(line.substr(0, 300)));
    rest = nl == std::string_view::npos ? "" : rest.substr(0, nl);
  }
  return e;
}

// The job's row of view job_progress into `s`; false when there is no such job.
bool read_progress(Db& db, std::uint64_t job_id, JobStatus& s) {
  Statement st(db,
               "SELECT p.name, p.state, p.reason, coalesce(j.log_dir, ''), "
               "coalesce(j.output_path, ''), j.submit_done, p.total, p.succeeded, p.failed, "
               "p.pending, p.running, p.items_succeeded, p.items_failed, p.attempts, "
               "p.attempts_failed, coalesce(j.started, 0), coalesce(j.ended, 0), "
               "coalesce(p.elapsed_seconds, 0), coalesce(p.minibatches_per_second, 0), "
               "coalesce(p.items_per_second, 0), coalesce(p.eta_seconds, -1) "
               "FROM job_progress p JOIN jobs j ON j.id = p.job_id WHERE p.job_id = ?1");
  st.bind(1, job_id);
  if (!st.step()) return false;
  s.id = job_id;
  s.name = st.column_text(0);
  s.state = st.column_text(1);
  s.reason = st.column_text(2);
  s.log_dir = st.column_text(3);
  s.output_path = st.column_text(4);
  s.total_known = st.column_int64(5) != 0;
  s.total = st.column_uint64(6);
  s.succeeded = st.column_uint64(7);
  s.failed = st.column_uint64(8);
  s.pending = st.column_uint64(9);
  s.running = st.column_uint64(10);
  s.items_succeeded = st.column_uint64(11);
  s.items_failed = st.column_uint64(12);
  s.attempts = st.column_uint64(13);
  s.attempts_failed = st.column_uint64(14);
  s.started = st.column_double(15);
  s.ended = st.column_double(16);
  s.elapsed_s = st.column_double(17);
  s.minibatches_per_s = st.column_double(18);
  s.items_per_s = st.column_double(19);
  s.eta_s = st.column_double(20);
  return true;
}

// "2,0,1" -> "0,1,2": group_concat() lists in scan order.
std::string sorted_list(std::string_view text) {
  std::vector<std::string> parts;
  for (std::size_t pos = 0; pos < text.size();) {
    auto comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    parts.emplace_back(text.substr(pos, comma - pos));
    pos = comma + 1;
  }
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

// The pools that ran the job's attempts, its worker processes and its errors into `s`.
void read_pools_and_errors(Db& db, std::uint64_t job_id, JobStatus& s) {
  {
    Statement st(db,
                 "SELECT coalesce(p.name, a.pool, ''), coalesce(p.node, a.node, ''), "
                 "coalesce(p.state, ''), coalesce(p.workers, 0), count(*), "
                 "coalesce(group_concat(DISTINCT a.device), ''), "
                 "CASE WHEN p.last_seen IS NULL THEN -1 ELSE "
                 "max(0, (julianday('now') - 2440587.5) * 86400.0 - p.last_seen) END "
                 "FROM attempts a LEFT JOIN pools p ON p.id = a.pool_id "
                 "WHERE a.job_id = ?1 AND a.pool_id != 0 GROUP BY a.pool_id ORDER BY a.pool_id");
    st.bind(1, job_id);
    while (st.step()) {
      s.pools.push_back(JobStatus::PoolUse{
          std::string(st.column_text(0)), std::string(st.column_text(1)),
          std::string(st.column_text(2)), st.column_uint64(3), st.column_uint64(4),
          sorted_list(st.column_text(5)), st.column_double(6)});
    }
  }
  {
    Statement st(db,
                 "SELECT count(DISTINCT coalesce(pool, '') || '/' || process) FROM attempts "
                 "WHERE job_id = ?1 AND coalesce(process, '') != ''");
    st.bind(1, job_id);
    if (st.step()) s.processes = st.column_uint64(0);
  }
  {
    Statement st(db,
                 "SELECT minibatch_id, picked_count, process, status, error_message, "
                 "process_start_time FROM processed_minibatches "
                 "WHERE job_id = ?1 AND status != 'RUN_DONE' "
                 "ORDER BY status = 'CANCELLED', start DESC, attempt_id DESC LIMIT 5");
    st.bind(1, job_id);
    // Real errors first: the attempts a job's end stopped (CANCELLED) say only that it ended.
    while (st.step()) s.last_errors.push_back(error_line(st));
  }
  {
    Statement st(db,
                 "SELECT minibatch_id, picked_count, process, status, error_message, "
                 "process_start_time FROM processed_minibatches "
                 "WHERE job_id = ?1 AND status NOT IN ('RUN_DONE', 'CANCELLED') "
                 "ORDER BY start, attempt_id LIMIT 1");
    st.bind(1, job_id);
    if (st.step()) s.first_error = error_line(st);
  }
}

}  // namespace

Expected<JobStatus> read_job_status(const std::string& db_path, std::uint64_t job_id) {
  try {
    const auto conn = detail::open_read_only_current(db_path);
    Db& db = *conn;
    db.exec("BEGIN", "begin a read transaction");
    JobStatus s;
    if (!read_progress(db, job_id, s)) {
      return make_error(ErrorCode::NotFound,
                        fmt::format("{}: no job {} in this store", db_path, job_id));
    }
    read_pools_and_errors(db, job_id, s);
    db.exec("COMMIT", "end a read transaction");
    return s;
  } catch (const Failure& f) {
    return Unexpected{f.error()};
  }
}

}  // namespace fanout::store
