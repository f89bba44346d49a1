// Read-only queries for fanout history and wait. See reader.hpp.
#include "fanout/store/reader.hpp"

#include <utility>

#include "fanout/store/db.hpp"
#include "fanout/store/detail/read_only.hpp"
#include "fanout/store/schema.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store {

namespace {

constexpr const char* kSummaryColumns =
    "SELECT id, name, state, reason, coalesce(created, 0), coalesce(ended, 0), output_path, "
    "log_dir FROM jobs ";

}  // namespace

struct StoreReader::Impl {
  explicit Impl(const std::string& path) : conn(detail::open_read_only(path)), db(*conn) {
    // Checked before the statements are prepared, so that a store of another version gets a
    // message about versions rather than about a missing table.
    const auto version = db.query_int("PRAGMA user_version");
    if (version > kSchemaVersion) {
      throw Failure(ErrorCode::Version, path + ": store schema version " + std::to_string(version) +
                                            " is newer than this fanout supports (" +
                                            std::to_string(kSchemaVersion) + ")");
    }
    if (version < kSchemaVersion) {
      throw Failure(ErrorCode::Version,
                    path + ": store schema version " + std::to_string(version) +
                        " is older than this fanout reads (" + std::to_string(kSchemaVersion) +
                        "); open it once with fanout-interchange to migrate it");
    }
    by_id.emplace(db, std::string(kSummaryColumns) + "WHERE id = ?1");
    newest.emplace(db, std::string(kSummaryColumns) + "ORDER BY id DESC LIMIT ?1");
    newest_in_state.emplace(
        db, std::string(kSummaryColumns) + "WHERE state = ?2 ORDER BY id DESC LIMIT ?1");
    counts.emplace(db,
                   "SELECT total, succeeded, failed, items_succeeded, items_failed, attempts, "
                   "attempts_failed "
                   "FROM job_counts WHERE job_id = ?1");
    experiment_of.emplace(db, "SELECT experiment FROM experiment_runs WHERE job_id = ?1 LIMIT 1");
  }

  // The summary of the row `st` is on, with its counts.
  JobSummary summary(const Statement& st) {
    JobSummary j;
    j.id = st.column_uint64(0);
    j.name = st.column_text(1);
    j.state = st.column_text(2);
    j.reason = st.column_text(3);
    j.created = st.column_double(4);
    j.ended = st.column_double(5);
    j.output_path = st.column_text(6);
    j.log_dir = st.column_text(7);
    counts->bind(1, j.id);
    if (counts->step()) {
      j.total = counts->column_uint64(0);
      j.succeeded = counts->column_uint64(1);
      j.failed = counts->column_uint64(2);
      j.items_succeeded = counts->column_uint64(3);
      j.items_failed = counts->column_uint64(4);
      j.attempts = counts->column_uint64(5);
      j.attempts_failed = counts->column_uint64(6);
    }
    counts->reset();
    experiment_of->bind(1, j.id);
    if (experiment_of->step()) j.experiment = experiment_of->column_text(0);
    experiment_of->reset();
    return j;
  }

  // Runs `st` (already bound) and collects every row's summary; `st` is reset in all cases.
  std::vector<JobSummary> collect(Statement& st) {
    std::vector<JobSummary> out;
    try {
      while (st.step()) out.push_back(summary(st));
    } catch (...) {
      st.reset();
      throw;
    }
    st.reset();
    return out;
  }

  std::unique_ptr<Db> conn;
  Db& db;
  // Prepared once the version is known to be right (std::optional: Statement is not movable).
  std::optional<Statement> by_id;
  std::optional<Statement> newest;
  std::optional<Statement> newest_in_state;
  std::optional<Statement> counts;
  std::optional<Statement> experiment_of;
};

StoreReader::StoreReader(const std::string& path) : impl_(std::make_unique<Impl>(path)) {}

StoreReader::~StoreReader() = default;

std::vector<JobSummary> StoreReader::history(std::size_t limit, const std::string& state) {
  // LIMIT -1 is SQLite's "no limit".
  const std::int64_t lim = limit == 0 ? -1 : static_cast<std::int64_t>(limit);
  Statement& st = state.empty() ? *impl_->newest : *impl_->newest_in_state;
  st.bind(1, lim);
  if (!state.empty()) st.bind(2, state);
  return impl_->collect(st);
}

std::vector<std::string> StoreReader::devices(std::uint64_t id) {
  Statement st(impl_->db,
               "SELECT DISTINCT device FROM attempts WHERE job_id = ?1 AND "
               "coalesce(device, '') != '' ORDER BY device");
  st.bind(1, id);
  std::vector<std::string> out;
  while (st.step()) out.emplace_back(st.column_text(0));
  return out;
}

std::optional<ExperimentRow> StoreReader::experiment(const std::string& id) {
  Statement st(impl_->db,
               "SELECT e.id, e.state, e.created, coalesce(max(j.ended), 0), count(r.seq), "
               "coalesce(sum(c.items_succeeded), 0) FROM experiments e "
               "LEFT JOIN experiment_runs r ON r.experiment = e.id "
               "LEFT JOIN jobs j ON j.id = r.job_id "
               "LEFT JOIN job_counts c ON c.job_id = r.job_id WHERE e.id = ?1 GROUP BY e.id");
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  return ExperimentRow{.id = std::string(st.column_text(0)),
                       .state = std::string(st.column_text(1)),
                       .created = st.column_double(2),
                       .last_ended = st.column_double(3),
                       .runs = st.column_uint64(4),
                       .items_succeeded = st.column_uint64(5)};
}

std::optional<JobSummary> StoreReader::job(std::uint64_t id) {
  impl_->by_id->bind(1, id);
  auto rows = impl_->collect(*impl_->by_id);
  if (rows.empty()) return std::nullopt;
  return std::move(rows.front());
}

}  // namespace fanout::store
