// Read-only queries for an ad-hoc run. See adhoc_queries.hpp.
#include "fanout/store/adhoc_queries.hpp"

#include <memory>

#include "fanout/store/db.hpp"
#include "fanout/store/detail/read_only.hpp"

namespace fanout::store {

struct AdhocQueries::Impl {
  explicit Impl(const std::string& path) : conn(detail::open_read_only_current(path)) {}
  std::unique_ptr<Db> conn;
};

AdhocQueries::AdhocQueries(const std::string& db) : impl_(std::make_unique<Impl>(db)) {}
AdhocQueries::~AdhocQueries() = default;

std::optional<std::uint64_t> AdhocQueries::job_writing(const std::string& output_path) {
  Statement st(*impl_->conn, "SELECT max(id) FROM jobs WHERE output_path = ?1");
  st.bind(1, output_path);
  if (!st.step() || st.is_null(0)) return std::nullopt;
  return st.column_uint64(0);
}

std::optional<std::string> AdhocQueries::output_of(std::uint64_t job) {
  Statement st(*impl_->conn, "SELECT output_path FROM jobs WHERE id = ?1");
  st.bind(1, job);
  if (!st.step() || st.is_null(0)) return std::nullopt;
  return std::string(st.column_text(0));
}

std::vector<BatchRows> AdhocQueries::batches_from(std::uint64_t job, std::uint64_t first) {
  Statement st(*impl_->conn,
               "SELECT id, state, output_offset, output_bytes FROM minibatches "
               "WHERE job_id = ?1 AND id >= ?2 ORDER BY id");
  st.bind(1, job).bind(2, first);
  std::vector<BatchRows> out;
  while (st.step()) {
    BatchRows b;
    b.id = st.column_uint64(0);
    b.state = std::string(st.column_text(1));
    b.has_rows = !st.is_null(2) && !st.is_null(3);
    if (b.has_rows) {
      b.offset = st.column_uint64(2);
      b.bytes = st.column_uint64(3);
    }
    out.push_back(std::move(b));
  }
  return out;
}

std::pair<std::uint64_t, std::uint64_t> AdhocQueries::items_done(std::uint64_t job) {
  Statement st(*impl_->conn,
               "SELECT coalesce(sum(CASE WHEN state = 'succeeded' THEN items ELSE 0 END), 0), "
               "coalesce(sum(CASE WHEN state IN ('succeeded', 'failed') THEN items ELSE 0 END), "
               "0) FROM minibatches WHERE job_id = ?1");
  st.bind(1, job);
  if (!st.step()) return {0, 0};
  return {st.column_uint64(0), st.column_uint64(1)};
}

std::vector<JoblogEntry> AdhocQueries::joblog(std::uint64_t job) {
  // The latest attempt of each mini-batch: the one with the highest attempt number.
  Statement st(*impl_->conn,
               "SELECT a.minibatch_id, coalesce(a.node, ''), coalesce(a.start, 0), "
               "coalesce(a.elapsed_s, 0), coalesce(m.output_bytes, 0), a.status, "
               "coalesce(a.error_message, ''), coalesce(i.detail, '') "
               "FROM attempts a JOIN minibatches m ON m.job_id = a.job_id AND m.id = "
               "a.minibatch_id LEFT JOIN minibatch_inputs i ON i.job_id = a.job_id AND "
               "i.minibatch_id = a.minibatch_id WHERE a.job_id = ?1 AND a.attempt = (SELECT "
               "max(b.attempt) FROM attempts b WHERE b.job_id = a.job_id AND b.minibatch_id = "
               "a.minibatch_id) ORDER BY a.minibatch_id, a.id");
  st.bind(1, job);
  std::vector<JoblogEntry> out;
  while (st.step()) {
    JoblogEntry e;
    e.minibatch = st.column_uint64(0);
    if (!out.empty() && out.back().minibatch == e.minibatch) continue;
    e.node = std::string(st.column_text(1));
    e.start = st.column_double(2);
    e.elapsed_s = st.column_double(3);
    e.output_bytes = st.column_uint64(4);
    e.status = std::string(st.column_text(5));
    e.error_message = std::string(st.column_text(6));
    e.detail = std::string(st.column_text(7));
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace fanout::store
