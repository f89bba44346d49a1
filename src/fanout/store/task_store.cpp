// The job ledger: schema migrations, the batched writer thread, recovery and read-only queries.
// See task_store.hpp for the contract and docs/store.md for the schema.
#include "fanout/store/task_store.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>

#include "fanout/store/db.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/fd.hpp"
#include "fanout/util/json.hpp"

namespace fanout::store {

namespace {

namespace fs = std::filesystem;

// ---- schema ----

// kMigrations[i] brings a store from user_version i to i + 1. Append only: a released script is
// never edited, since stores in the field already ran it. docs/store.md describes the result.
constexpr const char* kMigrations[] = {
    // 0 -> 1: the initial schema.
    R"sql(
CREATE TABLE jobs (
  id           INTEGER PRIMARY KEY,
  name         TEXT NOT NULL,
  state        TEXT NOT NULL,
  reason       TEXT NOT NULL DEFAULT '',
  spec_path    TEXT,
  runtime      TEXT,
  entry_script TEXT,
  output_path  TEXT,
  log_dir      TEXT,
  settings     TEXT,
  spec         BLOB,
  submit_done  INTEGER NOT NULL DEFAULT 0,
  total        INTEGER NOT NULL DEFAULT 0,
  created      REAL,
  started      REAL,
  ended        REAL
);
CREATE TABLE minibatches (
  job_id        INTEGER NOT NULL,
  id            INTEGER NOT NULL,
  state         TEXT NOT NULL,
  tries         INTEGER NOT NULL DEFAULT 0,
  items         INTEGER NOT NULL,
  succeeded     INTEGER NOT NULL DEFAULT 0,
  failed        INTEGER NOT NULL DEFAULT 0,
  rows          INTEGER NOT NULL DEFAULT 0,
  output_offset INTEGER,
  output_bytes  INTEGER,
  PRIMARY KEY (job_id, id)
) WITHOUT ROWID;
-- What a mini-batch holds, written once: kept out of minibatches so that the state updates of
-- the hot path rewrite a small row.
CREATE TABLE minibatch_inputs (
  job_id        INTEGER NOT NULL,
  minibatch_id  INTEGER NOT NULL,
  detail        TEXT,
  descriptor    BLOB,
  PRIMARY KEY (job_id, minibatch_id)
) WITHOUT ROWID;
CREATE TABLE attempts (
  id             INTEGER PRIMARY KEY,
  job_id         INTEGER NOT NULL,
  minibatch_id   INTEGER NOT NULL,
  attempt        INTEGER NOT NULL,
  status         TEXT NOT NULL,
  pool_id        INTEGER,
  pool           TEXT,
  node           TEXT,
  process        TEXT,
  worker_pid     INTEGER,
  start          REAL,
  elapsed_s      REAL,
  cpu_s          REAL,
  run_s          REAL,
  items          INTEGER,
  succeeded      INTEGER,
  failed         INTEGER,
  rows           INTEGER,
  error_category TEXT,
  error_message  TEXT
);
CREATE INDEX attempts_minibatch ON attempts (job_id, minibatch_id);
CREATE TABLE pools (
  id         INTEGER PRIMARY KEY,
  name       TEXT,
  node       TEXT,
  workers    INTEGER,
  prefetch   INTEGER,
  pid        INTEGER,
  build      TEXT,
  state      TEXT,
  registered REAL,
  last_seen  REAL
);
CREATE VIEW job_counts AS
SELECT j.id AS job_id,
       max(j.total, count(m.id)) AS total,
       count(m.id) AS submitted,
       coalesce(sum(m.state = 'succeeded'), 0) AS succeeded,
       coalesce(sum(m.state = 'failed'), 0) AS failed,
       coalesce(sum(m.state = 'pending'), 0) AS pending,
       coalesce(sum(m.state = 'running'), 0) AS running,
       coalesce(sum(CASE WHEN m.state = 'succeeded' THEN m.succeeded ELSE 0 END), 0)
         AS items_succeeded,
       coalesce(sum(CASE m.state WHEN 'succeeded' THEN m.failed
                                 WHEN 'failed' THEN m.items ELSE 0 END), 0) AS items_failed,
       (SELECT count(*) FROM attempts a WHERE a.job_id = j.id) AS attempts,
       (SELECT count(*) FROM attempts a WHERE a.job_id = j.id AND a.status != 'RUN_DONE')
         AS attempts_failed
FROM jobs j LEFT JOIN minibatches m ON m.job_id = j.id
GROUP BY j.id;
)sql",
    // 1 -> 2: resource-monitor samples and the report views (docs/store.md, "Reports").
    R"sql(
CREATE TABLE node_resource_samples (
  id               INTEGER PRIMARY KEY,
  job_id           INTEGER NOT NULL,
  pool_id          INTEGER,
  pool             TEXT,
  node             TEXT,
  time             REAL NOT NULL,
  interval_s       REAL,
  cpu_percent      REAL,
  mem_total_mb     REAL,
  mem_available_mb REAL,
  mem_used_mb      REAL,
  disk_reads       INTEGER,
  disk_writes      INTEGER,
  disk_read_mb     REAL,
  disk_write_mb    REAL,
  net_sent_mb      REAL,
  net_recv_mb      REAL,
  tcp_connections  INTEGER,
  udp_connections  INTEGER
);
CREATE INDEX node_resource_samples_job ON node_resource_samples (job_id, node, time);
CREATE TABLE process_resource_samples (
  id          INTEGER PRIMARY KEY,
  job_id      INTEGER NOT NULL,
  pool_id     INTEGER,
  pool        TEXT,
  node        TEXT,
  time        REAL NOT NULL,
  process     TEXT,
  pid         INTEGER,
  cpu_percent REAL,
  rss_mb      REAL,
  reads       INTEGER,
  writes      INTEGER,
  read_mb     REAL,
  write_mb    REAL
);
CREATE INDEX process_resource_samples_job ON process_resource_samples (job_id, node, time);
CREATE TABLE disk_usage_samples (
  id           INTEGER PRIMARY KEY,
  job_id       INTEGER NOT NULL,
  pool_id      INTEGER,
  pool         TEXT,
  node         TEXT,
  time         REAL NOT NULL,
  mount        TEXT,
  total_mb     REAL,
  used_mb      REAL,
  free_mb      REAL,
  used_percent REAL
);
CREATE INDEX disk_usage_samples_job ON disk_usage_samples (job_id, node, time);
CREATE VIEW processed_minibatches AS
SELECT a.job_id AS job_id,
       a.minibatch_id AS minibatch_id,
       a.attempt AS picked_count,
       CASE WHEN coalesce(a.process, '') = '' THEN ''
            WHEN coalesce(a.pool, '') = '' THEN a.process
            ELSE a.pool || '/' || a.process END AS process,
       strftime('%Y-%m-%dT%H:%M:%fZ', a.start, 'unixepoch') AS process_start_time,
       a.items AS total,
       a.succeeded AS succeeded,
       a.failed AS failed,
       round(a.elapsed_s, 3) AS elapsed_seconds,
       round(a.cpu_s, 3) AS process_seconds,
       round(a.run_s, 3) AS run_method_seconds,
       a.status AS status,
       coalesce(a.error_category, '') AS error_category,
       coalesce(a.error_message, '') AS error_message,
       i.detail AS minibatch_detail,
       a.node AS node,
       a.pool AS pool,
       a.id AS attempt_id,
       a.start AS start
FROM attempts a
LEFT JOIN minibatch_inputs i ON i.job_id = a.job_id AND i.minibatch_id = a.minibatch_id;
CREATE VIEW process_summary AS
SELECT job_id,
       node,
       pool,
       CASE WHEN coalesce(pool, '') = '' THEN process ELSE pool || '/' || process END AS process,
       count(DISTINCT worker_pid) AS worker_starts,
       count(*) AS attempts,
       sum(status = 'RUN_DONE') AS succeeded_attempts,
       sum(status != 'RUN_DONE') AS failed_attempts,
       sum(items) AS items,
       sum(succeeded) AS items_succeeded,
       sum(failed) AS items_failed,
       round(sum(elapsed_s), 3) AS elapsed_seconds,
       round(sum(cpu_s), 3) AS process_seconds,
       round(sum(run_s), 3) AS run_method_seconds,
       round(avg(run_s), 4) AS avg_run_method_seconds,
       round(sum(elapsed_s) - sum(run_s), 3) AS overhead_seconds,
       strftime('%Y-%m-%dT%H:%M:%fZ', min(start), 'unixepoch') AS first_start_time,
       strftime('%Y-%m-%dT%H:%M:%fZ', max(start + elapsed_s), 'unixepoch') AS last_end_time
FROM attempts
WHERE coalesce(process, '') != ''
GROUP BY job_id, node, pool, process;
CREATE VIEW node_summary AS
SELECT job_id,
       node,
       count(DISTINCT pool) AS pools,
       count(DISTINCT coalesce(pool, '') || '/' || process) AS processes,
       count(*) AS attempts,
       sum(status = 'RUN_DONE') AS succeeded_attempts,
       sum(status != 'RUN_DONE') AS failed_attempts,
       sum(items) AS items,
       sum(succeeded) AS items_succeeded,
       sum(failed) AS items_failed,
       round(sum(elapsed_s), 3) AS elapsed_seconds,
       round(sum(cpu_s), 3) AS process_seconds,
       round(sum(run_s), 3) AS run_method_seconds,
       strftime('%Y-%m-%dT%H:%M:%fZ', min(start), 'unixepoch') AS first_start_time,
       strftime('%Y-%m-%dT%H:%M:%fZ', max(start + elapsed_s), 'unixepoch') AS last_end_time,
       round(count(*) / (max(start + elapsed_s) - min(start)), 3) AS attempts_per_second
FROM attempts
WHERE coalesce(node, '') != '' AND coalesce(process, '') != ''
GROUP BY job_id, node;
CREATE VIEW job_progress AS
SELECT job_id, name, state, reason, total, submitted, done, succeeded, failed, pending, running,
       CASE WHEN total > 0 THEN round(100.0 * done / total, 1) END AS percent_done,
       items_succeeded, items_failed, attempts, attempts_failed,
       strftime('%Y-%m-%dT%H:%M:%fZ', started, 'unixepoch') AS started_time,
       strftime('%Y-%m-%dT%H:%M:%fZ', ended, 'unixepoch') AS ended_time,
       round(elapsed, 3) AS elapsed_seconds,
       round(done / nullif(elapsed, 0), 3) AS minibatches_per_second,
       round((items_succeeded + items_failed) / nullif(elapsed, 0), 3) AS items_per_second,
       CASE WHEN ended IS NULL AND done > 0 AND total > done
            THEN round((total - done) * elapsed / done, 1) END AS eta_seconds
FROM (SELECT j.id AS job_id, j.name AS name, j.state AS state, j.reason AS reason,
             c.total AS total, c.submitted AS submitted, c.succeeded + c.failed AS done,
             c.succeeded AS succeeded, c.failed AS failed, c.pending AS pending,
             c.running AS running, c.items_succeeded AS items_succeeded,
             c.items_failed AS items_failed, c.attempts AS attempts,
             c.attempts_failed AS attempts_failed, j.started AS started, j.ended AS ended,
             coalesce(j.ended, (julianday('now') - 2440587.5) * 86400.0) - j.started AS elapsed
      FROM jobs j JOIN job_counts c ON c.job_id = j.id);
CREATE VIEW job_settings AS
SELECT j.id AS job_id, s.key AS key, s.value AS value, s.type AS type
FROM jobs j, json_each(CASE WHEN json_valid(j.settings) THEN j.settings ELSE '{}' END) s;
)sql",
};
// The writer commits once this many operations are queued, or kGroupCommitDelay after the
// first, whichever comes first (see Impl::run()).
constexpr std::size_t kGroupCommitOps = 8192;
constexpr std::chrono::milliseconds kGroupCommitDelay{20};
// The most queued operations applied in one transaction.
constexpr std::size_t kMaxOpsPerTransaction = 32768;
// Operations queued but not yet committed beyond which push() waits (about 40 MB of attempts).
constexpr std::uint64_t kMaxBacklog = 4 * kMaxOpsPerTransaction;
// How long the writer may hold a submitted mini-batch's rows back, waiting for its first
// result to write them with (see Writer, "Deferred submission").
constexpr std::chrono::milliseconds kSubmittedRowsDelay{250};
// The checkpoint thread runs at most this often (see Impl::checkpoint_loop()).
constexpr std::chrono::milliseconds kCheckpointInterval{100};
// WAL pages past which the writer checkpoints by itself, should the checkpoint thread fall
// behind or be missing (SQLite's default is 1,000).
constexpr int kWriterCheckpointPages = 16384;

static_assert(std::size(kMigrations) == static_cast<std::size_t>(kSchemaVersion),
              "one migration script per schema version");

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string sys_error(const std::string& path, const char* what) {
  return path + ": " + what + ": " + std::strerror(errno);
}

// Creates the folder holding `path`, if it has one. Throws Failure{Io} naming it.
void make_parent_dirs(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) {
    throw Failure(ErrorCode::Io, parent.string() + ": cannot create folder: " + ec.message());
  }
}

void apply_migrations(Db& db, const Logger& log) {
  auto version = db.query_int("PRAGMA user_version");
  if (version > kSchemaVersion) {
    throw Failure(ErrorCode::Version,
                  db.path() + ": store schema version " + std::to_string(version) +
                      " is newer than this fanout supports (" + std::to_string(kSchemaVersion) +
                      "); use a newer fanout or another --db");
  }
  while (version < kSchemaVersion) {
    Transaction tx(db);
    // Read again under the write lock: another process may have migrated in the meantime.
    version = db.query_int("PRAGMA user_version");
    if (version >= kSchemaVersion) break;
    const std::string what = "migration to schema version " + std::to_string(version + 1);
    db.exec(kMigrations[version], what.c_str());
    db.exec(("PRAGMA user_version = " + std::to_string(version + 1)).c_str(), what.c_str());
    tx.commit();
    ++version;
    log->info("store {}: schema migrated to version {}", db.path(), version);
  }
}

// ---- encoding ----

template <typename T>
void pack_into(msgpack::sbuffer& buf, const T& v) {
  buf.clear();
  msgpack::pack(buf, v);
}

// Decodes msgpack `bytes` into `out`; false when they do not hold a T.
template <typename T>
bool unpack_from(std::string_view bytes, T& out) {
  try {
    msgpack::object_handle oh = msgpack::unpack(bytes.data(), bytes.size());
    oh.get().convert(out);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Appends the detail recorded when the client sent none: {"files": [...items...]}.
void append_default_detail(std::string& out, const std::vector<std::string>& items) {
  out += "{\"files\": [";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    json_quote(out, items[i]);
  }
  out += "]}";
}

// ---- queued operations ----

struct CreateJob {
  std::uint64_t job_id = 0;
  proto::JobSpec spec{};
  double created = 0;
};
struct AddMiniBatches {
  std::uint64_t job_id = 0;
  std::vector<proto::MiniBatch> batches{};
};
struct SetSubmitDone {
  std::uint64_t job_id = 0;
  std::uint64_t total = 0;
};
struct MarkRunning {
  std::uint64_t job_id = 0;
  std::uint64_t index = 0;
  std::uint32_t tries = 0;
  bool superseded = false;  // a later AttemptRecord in the same transaction overwrites it
};
struct FinishJob {
  std::uint64_t job_id = 0;
  std::string state{};
  std::string reason{};
  double ended = 0;
};

// Queued by flush(): every submitted mini-batch the writer still holds back is written.
struct WriteSubmitted {};

// CreateJob and ResourceRecord are rare and large, so they are boxed to keep the queue's
// elements small.
using Op = std::variant<std::unique_ptr<CreateJob>, AddMiniBatches, SetSubmitDone, MarkRunning,
                        AttemptRecord, FinishJob, PoolRecord, std::unique_ptr<ResourceRecord>,
                        WriteSubmitted>;

// A submitted mini-batch whose rows the writer holds back (see Writer, "Deferred submission").
struct HeldMiniBatch {
  proto::MiniBatch mb{};
  std::chrono::steady_clock::time_point added{};
  std::uint32_t tries = 0;
  bool running = false;  // dispatched (a MarkRunning came for it)
  bool written = false;  // its rows went in with its first result
};

// One job's held mini-batches: consecutive indexes from `first`, in submission order.
struct HeldJob {
  std::uint64_t first = 0;
  std::deque<HeldMiniBatch> entries{};
  std::uint64_t written_end = 0;  // 1 + the highest index written with a result this transaction
};

// A mini-batch whose minibatches and minibatch_inputs rows are being written.
struct SubmittedRow {
  std::uint64_t job_id = 0;
  const proto::MiniBatch* mb = nullptr;
  std::uint32_t tries = 0;
  bool running = false;
};

struct MiniBatchKey {
  std::uint64_t job_id = 0;
  std::uint64_t index = 0;
  bool operator==(const MiniBatchKey&) const = default;
};
struct MiniBatchKeyHash {
  std::size_t operator()(const MiniBatchKey& k) const noexcept {
    return std::hash<std::uint64_t>{}(k.index * 0x9e3779b97f4a7c15ULL ^ k.job_id);
  }
};

// A job's append_row file, open while the job runs.
struct OutputFile {
  std::string path{};
  UniqueFd fd{};
  std::uint64_t end = 0;     // bytes written and synced (or present at open)
  std::string pending{};     // bytes of the current batch, written at `end`
  bool touched = false;      // has pending bytes in the current batch
  bool close_after = false;  // the job finished in the current batch
};

// One INSERT prepared for 64, 8 and 1 rows: the writer binds up to 64 rows per sqlite3_step.
// SQLite's per-statement work (resetting the VM, starting the statement, opening and positioning
// cursors on each b-tree) is then paid once per chunk instead of once per row; the rows' own
// b-tree work is the same. `head` is "INSERT INTO t (a, b, c)", `tail` what follows the VALUES
// list (an ON CONFLICT clause, or nothing).
class MultiRow final {
 public:
  static constexpr std::size_t kChunks[] = {64, 8, 1};

  MultiRow(Db& db, std::string_view head, int cols, std::string_view tail) : cols_(cols) {
    std::string row = "(";
    for (int c = 0; c < cols; ++c) row += c == 0 ? "?" : ", ?";
    row += ")";
    for (const std::size_t n : kChunks) {
      std::string sql(head);
      sql += " VALUES ";
      for (std::size_t r = 0; r < n; ++r) {
        if (r > 0) sql += ", ";
        sql += row;
      }
      sql += ' ';
      sql += tail;
      statements_.push_back(std::make_unique<Statement>(db, sql));
    }
  }

  // Inserts rows 0 .. n-1: bind_row(statement, base, i) binds row i's parameters base + 1 ..
  // base + cols. Rows go in order, so a later row of an upsert wins over an earlier one.
  template <typename BindRow>
  void run(std::size_t n, BindRow&& bind_row) {
    std::size_t i = 0;
    for (std::size_t k = 0; k < std::size(kChunks); ++k) {
      Statement& st = *statements_[k];
      for (; n - i >= kChunks[k]; i += kChunks[k]) {
        for (std::size_t r = 0; r < kChunks[k]; ++r) {
          bind_row(st, static_cast<int>(r) * cols_, i + r);
        }
        st.run();
      }
    }
  }

 private:
  int cols_;
  std::vector<std::unique_ptr<Statement>> statements_;
};

// The writer thread's state: statements prepared once, reusable buffers and the open output
// files. Used only with Impl::db_mu held.
class Writer {
 public:
  Writer(Db& db, Logger log)
      : log_(std::move(log)),
        db_(db),
        insert_job_(db, R"sql(
INSERT INTO jobs (id, name, state, reason, spec_path, runtime, entry_script, output_path,
                  log_dir, settings, spec, created, started)
VALUES (?1, ?2, 'running', '', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10))sql"),
        // A row that exists (a mini-batch submitted again after a restart) keeps its state,
        // unless this one was dispatched: then it is marked running, as mark_running_ would.
        insert_minibatch_(db, "INSERT INTO minibatches (job_id, id, state, tries, items)", 5,
                          "ON CONFLICT (job_id, id) DO UPDATE SET state = excluded.state, "
                          "tries = excluded.tries WHERE excluded.state = 'running'"),
        insert_input_(db,
                      "INSERT OR IGNORE INTO minibatch_inputs (job_id, minibatch_id, detail, "
                      "descriptor)",
                      4, ""),
        submit_done_(db, "UPDATE jobs SET submit_done = 1, total = ?2 WHERE id = ?1"),
        mark_running_(db,
                      "UPDATE minibatches SET state = 'running', tries = ?3 "
                      "WHERE job_id = ?1 AND id = ?2"),
        insert_attempt_(db, R"sql(
INSERT INTO attempts (id, job_id, minibatch_id, attempt, status, pool_id, pool, node, process,
                      worker_pid, start, elapsed_s, cpu_s, run_s, items, succeeded, failed, rows,
                      error_category, error_message))sql",
                        20, ""),
        // The row exists (added at submission), so the upsert acts as an UPDATE, in a form that
        // many rows share in one statement. A missing row would be created, not skipped.
        update_minibatch_(db, R"sql(
INSERT INTO minibatches (job_id, id, state, tries, items, succeeded, failed, rows, output_offset,
                         output_bytes))sql",
                          10, R"sql(
ON CONFLICT (job_id, id) DO UPDATE SET state = excluded.state, tries = excluded.tries,
       succeeded = excluded.succeeded, failed = excluded.failed, rows = excluded.rows,
       output_offset = coalesce(excluded.output_offset, output_offset),
       output_bytes = coalesce(excluded.output_bytes, output_bytes))sql"),
        finish_job_(db, "UPDATE jobs SET state = ?2, reason = ?3, ended = ?4 WHERE id = ?1"),
        upsert_pool_(db, R"sql(
INSERT OR REPLACE INTO pools (id, name, node, workers, prefetch, pid, build, state, registered,
                              last_seen)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10))sql"),
        job_output_(db, "SELECT output_path FROM jobs WHERE id = ?1"),
        insert_node_sample_(db, R"sql(
INSERT INTO node_resource_samples (job_id, pool_id, pool, node, time, interval_s, cpu_percent,
                                   mem_total_mb, mem_available_mb, mem_used_mb, disk_reads,
                                   disk_writes, disk_read_mb, disk_write_mb, net_sent_mb,
                                   net_recv_mb, tcp_connections, udp_connections)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18))sql"),
        insert_process_sample_(db, R"sql(
INSERT INTO process_resource_samples (job_id, pool_id, pool, node, time, process, pid,
                                      cpu_percent, rss_mb, reads, writes, read_mb, write_mb)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13))sql"),
        insert_disk_sample_(db, R"sql(
INSERT INTO disk_usage_samples (job_id, pool_id, pool, node, time, mount, total_mb, used_mb,
                                free_mb, used_percent)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10))sql") {}

  // Applies `ops` in one transaction: rows first, then the output bytes are written and synced,
  // then the transaction commits, so a committed offset always points at durable bytes.
  // Throws Failure on any error; the transaction is then rolled back and the output files are
  // cut back to where the batch began.
  void apply(std::span<Op> ops) {
    skip_superseded(ops);
    try {
      Transaction tx(db_);
      for (auto& op : ops) {
        // Consecutive results are queued to share multi-row statements. Any other operation
        // first writes the results queued before it, so that every row is written in the order
        // it was queued (a MarkRunning does so itself, only when it writes a row).
        if (!std::holds_alternative<AttemptRecord>(op) &&
            !std::holds_alternative<MarkRunning>(op)) {
          flush_attempts();
        }
        std::visit([this](auto& o) { do_op(o); }, op);
      }
      flush_attempts();
      write_due_submitted();
      write_outputs();
      tx.commit();
    } catch (...) {
      attempts_.clear();
      discard_outputs();
      throw;
    }
    commit_outputs();
    for (auto it = outputs_.begin(); it != outputs_.end();) {
      it = it->second.close_after ? outputs_.erase(it) : std::next(it);
    }
  }

  // When the oldest held mini-batch is due to be written without a result (max: none held).
  [[nodiscard]] std::chrono::steady_clock::time_point held_due() const {
    auto due = std::chrono::steady_clock::time_point::max();
    for (const auto& [job_id, job] : held_) {
      if (!job.entries.empty())
        due = std::min(due, job.entries.front().added + kSubmittedRowsDelay);
    }
    return due;
  }

 private:
  void do_op(std::unique_ptr<CreateJob>& op) {
    const auto& s = op->spec;
    pack_into(buf_, s);
    insert_job_.bind(1, op->job_id)
        .bind(2, s.name)
        .bind_text_or_null(3, s.spec_path)
        .bind_text_or_null(4, s.runtime)
        .bind_text_or_null(5, s.entry_script)
        .bind_text_or_null(6, s.output_path)
        .bind_text_or_null(7, s.log_dir)
        .bind_text_or_null(8, s.settings_json)
        .bind_blob(9, {buf_.data(), buf_.size()})
        .bind(10, op->created);
    insert_job_.run();
    if (!s.output_path.empty()) open_output(op->job_id, s.output_path);
  }

  // ---- Deferred submission ----
  // A submitted mini-batch's rows (minibatches, minibatch_inputs) are held back for up to
  // kSubmittedRowsDelay. When its first result comes within that time, which under load is the
  // rule, the minibatches row is inserted once with its final state: the UPDATE of a row
  // written moments earlier (a b-tree descent and a rewrite, a third of the writer's cost per
  // mini-batch) is saved. Otherwise it is written as before, pending or running.
  // What a crash loses is what a client resubmits: it resubmits from the interchange's count of
  // a job's mini-batches, so the committed rows of a job must stay a prefix of its indexes. At
  // the end of every transaction, every held mini-batch below the highest one written with a
  // result is written too; SetSubmitDone (after which no client resubmits), FinishJob and
  // flush() write all of the job's, or everyone's.

  void do_op(AddMiniBatches& op) {
    HeldJob& job = held_[op.job_id];
    const auto now = std::chrono::steady_clock::now();
    for (auto& mb : op.batches) {
      // Held mini-batches are consecutive; any other order (a resubmission) writes them first.
      if (!job.entries.empty() && mb.index != job.first + job.entries.size()) {
        write_held(op.job_id, job, job.entries.size());
      }
      if (job.entries.empty()) job.first = mb.index;
      job.entries.push_back(HeldMiniBatch{std::move(mb), now});
    }
    SPDLOG_LOGGER_TRACE(log_, "job {}: {} mini-batches added", op.job_id, op.batches.size());
  }

  void do_op(WriteSubmitted&) {
    for (auto& [job_id, job] : held_) write_held(job_id, job, job.entries.size());
  }

  // The held, not yet written mini-batch (job_id, index), or null.
  HeldMiniBatch* find_held(std::uint64_t job_id, std::uint64_t index) {
    auto it = held_.find(job_id);
    if (it == held_.end()) return nullptr;
    HeldJob& job = it->second;
    if (index < job.first || index - job.first >= job.entries.size()) return nullptr;
    HeldMiniBatch& e = job.entries[index - job.first];
    return e.written ? nullptr : &e;
  }

  // Writes the rows of the first `n` held mini-batches of `job` (those not written with a
  // result already) and forgets them.
  void write_held(std::uint64_t job_id, HeldJob& job, std::size_t n) {
    rows_.clear();
    for (std::size_t i = 0; i < n; ++i) {
      const HeldMiniBatch& e = job.entries[i];
      if (!e.written) rows_.push_back(SubmittedRow{job_id, &e.mb, e.tries, e.running});
    }
    insert_minibatch_.run(rows_.size(), [this](Statement& st, int b, std::size_t i) {
      const SubmittedRow& r = rows_[i];
      st.bind(b + 1, r.job_id)
          .bind(b + 2, r.mb->index)
          .bind(b + 3, r.running ? "running" : "pending")
          .bind(b + 4, r.tries)
          .bind(b + 5, static_cast<std::uint64_t>(r.mb->items.size()));
    });
    write_inputs();
    job.entries.erase(job.entries.begin(), job.entries.begin() + static_cast<std::ptrdiff_t>(n));
    job.first += n;
  }

  // At the end of a transaction: writes each job's held mini-batches that were written with a
  // result, lie below one that was (the prefix rule), or were held for kSubmittedRowsDelay.
  void write_due_submitted() {
    const auto cutoff = std::chrono::steady_clock::now() - kSubmittedRowsDelay;
    for (auto& [job_id, job] : held_) {
      std::size_t n = 0;
      while (n < job.entries.size()) {
        const HeldMiniBatch& e = job.entries[n];
        if (!e.written && job.first + n >= job.written_end && e.added > cutoff) break;
        ++n;
      }
      if (n > 0) write_held(job_id, job, n);
      job.written_end = 0;
    }
  }

  // Writes the minibatch_inputs rows of rows_. Every descriptor and default detail is encoded
  // first, into one buffer each, so that the multi-row statement can bind views into them
  // (binds do not copy).
  void write_inputs() {
    buf_.clear();
    detail_.clear();
    ends_.clear();
    for (const SubmittedRow& r : rows_) {
      msgpack::pack(buf_, r.mb->items);
      if (r.mb->detail.empty()) append_default_detail(detail_, r.mb->items);
      ends_.emplace_back(buf_.size(), detail_.size());
    }
    insert_input_.run(rows_.size(), [this](Statement& st, int b, std::size_t i) {
      const auto [desc_begin, detail_begin] =
          i == 0 ? std::pair<std::size_t, std::size_t>{} : ends_[i - 1];
      const auto [desc_end, detail_end] = ends_[i];
      const proto::MiniBatch& mb = *rows_[i].mb;
      std::string_view detail = mb.detail;
      if (detail.empty()) {
        detail = std::string_view(detail_).substr(detail_begin, detail_end - detail_begin);
      }
      st.bind(b + 1, rows_[i].job_id)
          .bind(b + 2, mb.index)
          .bind(b + 3, detail)
          .bind_blob(b + 4, {buf_.data() + desc_begin, desc_end - desc_begin});
    });
  }

  void do_op(SetSubmitDone& op) {
    if (auto it = held_.find(op.job_id); it != held_.end()) {
      write_held(op.job_id, it->second, it->second.entries.size());
    }
    submit_done_.bind(1, op.job_id).bind(2, op.total);
    submit_done_.run();
  }

  // Under load a mini-batch's dispatch and its result often fall in the same transaction. The
  // result's UPDATE sets every column mark_running sets (state, tries), so the earlier UPDATE
  // changes nothing that is committed and is skipped: one statement less per mini-batch, the
  // same committed rows. An AttemptRecord *before* a MarkRunning (a retry) does not count.
  void skip_superseded(std::span<Op> ops) {
    recorded_.clear();
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      if (auto* rec = std::get_if<AttemptRecord>(&*it)) {
        recorded_.insert(MiniBatchKey{rec->result.job_id, rec->result.index});
      } else if (auto* run = std::get_if<MarkRunning>(&*it)) {
        run->superseded = recorded_.contains(MiniBatchKey{run->job_id, run->index});
      }
    }
  }

  void do_op(MarkRunning& op) {
    if (op.superseded) return;
    if (HeldMiniBatch* e = find_held(op.job_id, op.index)) {
      e->running = true;
      e->tries = op.tries;
      return;
    }
    flush_attempts();  // a retry's earlier result must not overwrite this
    mark_running_.bind(1, op.job_id).bind(2, op.index).bind(3, op.tries);
    mark_running_.run();
  }

  // Queues a result's two rows (its attempt, its mini-batch's new state) for flush_attempts(),
  // and its output bytes for write_outputs(); `rec` must stay alive until then.
  void do_op(AttemptRecord& rec) {
    QueuedAttempt q{&rec};
    const auto& r = rec.result;
    if (HeldMiniBatch* e = find_held(r.job_id, r.index)) {
      e->written = true;
      q.held = &e->mb;
      HeldJob& job = held_.find(r.job_id)->second;
      job.written_end = std::max(job.written_end, r.index + 1);
    }
    if (rec.write_output) {
      if (OutputFile* f = output_for(rec.result.job_id)) {
        if (!f->touched) {
          f->touched = true;
          touched_.push_back(f);
        }
        q.has_output = true;
        q.output_offset = f->end + f->pending.size();
        f->pending += rec.result.output;
      }
    }
    attempts_.push_back(q);
  }

  // Writes the queued results' rows, up to 64 per statement.
  void flush_attempts() {
    if (attempts_.empty()) return;
    insert_attempt_.run(attempts_.size(), [this](Statement& st, int b, std::size_t i) {
      const AttemptRecord& rec = *attempts_[i].rec;
      const auto& r = rec.result;
      st.bind(b + 1, r.task_id)
          .bind(b + 2, r.job_id)
          .bind(b + 3, r.index)
          .bind(b + 4, r.attempt)
          .bind(b + 5, proto::to_string(static_cast<proto::AttemptStatus>(r.status)))
          .bind(b + 6, rec.pool_id)
          .bind_text_or_null(b + 7, rec.pool_name)
          .bind_text_or_null(b + 8, r.node)
          .bind_text_or_null(b + 9, r.process)
          .bind(b + 10, r.worker_pid)
          .bind(b + 11, r.start)
          .bind(b + 12, r.elapsed_s)
          .bind(b + 13, r.cpu_s)
          .bind(b + 14, r.run_s)
          .bind(b + 15, r.items)
          .bind(b + 16, r.succeeded)
          .bind(b + 17, r.failed)
          .bind(b + 18, r.rows)
          .bind_text_or_null(b + 19, r.error_category)
          .bind_text_or_null(b + 20, r.error_message);
    });
    update_minibatch_.run(attempts_.size(), [this](Statement& st, int b, std::size_t i) {
      const QueuedAttempt& q = attempts_[i];
      const auto& r = q.rec->result;
      st.bind(b + 1, r.job_id)
          .bind(b + 2, r.index)
          .bind(b + 3, q.rec->minibatch_state)
          .bind(b + 4, r.attempt)
          .bind(b + 5, q.held != nullptr ? static_cast<std::uint64_t>(q.held->items.size())
                                         : static_cast<std::uint64_t>(r.items))
          .bind(b + 6, r.succeeded)
          .bind(b + 7, r.failed)
          .bind(b + 8, r.rows);
      if (q.has_output) {
        st.bind(b + 9, q.output_offset).bind(b + 10, static_cast<std::uint64_t>(r.output.size()));
      } else {
        st.bind_null(b + 9).bind_null(b + 10);
      }
    });
    // The inputs rows of the mini-batches whose first result this is.
    rows_.clear();
    for (const QueuedAttempt& q : attempts_) {
      if (q.held != nullptr) rows_.push_back(SubmittedRow{q.rec->result.job_id, q.held});
    }
    if (!rows_.empty()) write_inputs();
    SPDLOG_LOGGER_TRACE(log_, "{} attempts recorded", attempts_.size());
    attempts_.clear();
  }

  void do_op(FinishJob& op) {
    if (auto it = held_.find(op.job_id); it != held_.end()) {
      write_held(op.job_id, it->second, it->second.entries.size());
      held_.erase(it);
    }
    finish_job_.bind(1, op.job_id).bind(2, op.state).bind(3, op.reason).bind(4, op.ended);
    finish_job_.run();
    // Closed only after this batch's bytes are written and synced (see apply()).
    if (auto it = outputs_.find(op.job_id); it != outputs_.end()) it->second.close_after = true;
  }

  void do_op(PoolRecord& p) {
    upsert_pool_.bind(1, p.id)
        .bind_text_or_null(2, p.name)
        .bind_text_or_null(3, p.node)
        .bind(4, p.workers)
        .bind(5, p.prefetch)
        .bind(6, p.pid)
        .bind_text_or_null(7, p.build)
        .bind_text_or_null(8, p.state)
        .bind(9, p.registered)
        .bind(10, p.last_seen);
    upsert_pool_.run();
  }

  void do_op(std::unique_ptr<ResourceRecord>& rec) {
    const auto& smp = rec->sample;
    const auto& n = smp.node;
    for (const std::uint64_t job_id : rec->job_ids) {
      insert_node_sample_.bind(1, job_id)
          .bind(2, rec->pool_id)
          .bind_text_or_null(3, rec->pool_name)
          .bind_text_or_null(4, rec->node)
          .bind(5, smp.time)
          .bind(6, smp.interval_s)
          .bind(7, n.cpu_percent)
          .bind(8, n.mem_total_mb)
          .bind(9, n.mem_available_mb)
          .bind(10, n.mem_used_mb)
          .bind(11, n.disk_reads)
          .bind(12, n.disk_writes)
          .bind(13, n.disk_read_mb)
          .bind(14, n.disk_write_mb)
          .bind(15, n.net_sent_mb)
          .bind(16, n.net_recv_mb)
          .bind(17, n.tcp_connections)
          .bind(18, n.udp_connections);
      insert_node_sample_.run();
      for (const auto& d : smp.disks) {
        insert_disk_sample_.bind(1, job_id)
            .bind(2, rec->pool_id)
            .bind_text_or_null(3, rec->pool_name)
            .bind_text_or_null(4, rec->node)
            .bind(5, smp.time)
            .bind(6, d.mount)
            .bind(7, d.total_mb)
            .bind(8, d.used_mb)
            .bind(9, d.free_mb)
            .bind(10, d.used_percent);
        insert_disk_sample_.run();
      }
    }
    for (const auto& p : smp.processes) {
      // A worker belongs to one job: its rows go to that job, if the sample counts for it.
      if (std::find(rec->job_ids.begin(), rec->job_ids.end(), p.job_id) == rec->job_ids.end()) {
        continue;
      }
      insert_process_sample_.bind(1, p.job_id)
          .bind(2, rec->pool_id)
          .bind_text_or_null(3, rec->pool_name)
          .bind_text_or_null(4, rec->node)
          .bind(5, smp.time)
          .bind(6, p.process)
          .bind(7, p.pid)
          .bind(8, p.cpu_percent)
          .bind(9, p.rss_mb)
          .bind(10, p.reads)
          .bind(11, p.writes)
          .bind(12, p.read_mb)
          .bind(13, p.write_mb);
      insert_process_sample_.run();
    }
  }

  // The job's output file, opened on first use when the job was created before this process
  // started (a resumed job). Null when the job has no output file (summary_only).
  OutputFile* output_for(std::uint64_t job_id) {
    if (auto it = outputs_.find(job_id); it != outputs_.end()) return &it->second;
    job_output_.bind(1, job_id);
    std::string path;
    if (job_output_.step()) path = job_output_.column_text(0);
    job_output_.reset();
    if (path.empty()) return nullptr;
    return &open_output(job_id, path);
  }

  // Opens (creating, never truncating) the job's output file; new rows go at its current end.
  OutputFile& open_output(std::uint64_t job_id, const std::string& path) {
    if (auto it = outputs_.find(job_id); it != outputs_.end()) {
      it->second.close_after = false;
      return it->second;
    }
    make_parent_dirs(path);
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    if (!fd.valid()) throw Failure(ErrorCode::Io, sys_error(path, "cannot open output file"));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw Failure(ErrorCode::Io, sys_error(path, "fstat"));
    OutputFile f;
    f.path = path;
    f.fd = std::move(fd);
    f.end = static_cast<std::uint64_t>(st.st_size);
    return outputs_.emplace(job_id, std::move(f)).first->second;
  }

  // One pwrite per touched file, then one fdatasync each.
  void write_outputs() {
    for (OutputFile* f : touched_) {
      std::string_view data = f->pending;
      auto off = static_cast<off_t>(f->end);
      while (!data.empty()) {
        const ssize_t n = ::pwrite(f->fd.get(), data.data(), data.size(), off);
        if (n < 0) {
          if (errno == EINTR) continue;
          throw Failure(ErrorCode::Io, sys_error(f->path, "write"));
        }
        data.remove_prefix(static_cast<std::size_t>(n));
        off += n;
      }
      if (::fdatasync(f->fd.get()) != 0) {
        throw Failure(ErrorCode::Io, sys_error(f->path, "fdatasync"));
      }
    }
  }

  // After the commit: the batch's bytes are now part of the committed output.
  void commit_outputs() {
    for (OutputFile* f : touched_) {
      f->end += f->pending.size();
      f->pending.clear();
      f->touched = false;
    }
    touched_.clear();
  }

  // After a failed batch: drops its bytes and cuts each file back to its committed end, so
  // that nothing is left past the last committed offset (the bytes may have been written and
  // synced before the commit failed). Best effort: recover() does the same
  // on the next start.
  void discard_outputs() noexcept {
    for (OutputFile* f : touched_) {
      f->pending.clear();
      f->touched = false;
      if (::ftruncate(f->fd.get(), static_cast<off_t>(f->end)) != 0) {
        // Nothing more can be done here; recover() truncates on the next start.
      }
    }
    touched_.clear();
  }

 private:
  Logger log_;
  Db& db_;
  Statement insert_job_;
  MultiRow insert_minibatch_;
  MultiRow insert_input_;
  Statement submit_done_;
  Statement mark_running_;
  MultiRow insert_attempt_;
  MultiRow update_minibatch_;
  Statement finish_job_;
  Statement upsert_pool_;
  Statement job_output_;
  Statement insert_node_sample_;
  Statement insert_process_sample_;
  Statement insert_disk_sample_;
  msgpack::sbuffer buf_{1024};
  std::string detail_;
  std::vector<std::pair<std::size_t, std::size_t>> ends_;  // AddMiniBatches: buf_, detail_ ends
  struct QueuedAttempt {
    AttemptRecord* rec = nullptr;
    const proto::MiniBatch* held = nullptr;  // its rows go in with this result (held_)
    bool has_output = false;
    std::uint64_t output_offset = 0;
  };
  std::vector<QueuedAttempt> attempts_;              // results of the current run of AttemptRecords
  std::unordered_map<std::uint64_t, HeldJob> held_;  // by job id: see "Deferred submission"
  std::vector<SubmittedRow> rows_;                   // write_held() and write_inputs() scratch
  std::unordered_map<std::uint64_t, OutputFile> outputs_;
  std::unordered_set<MiniBatchKey, MiniBatchKeyHash> recorded_;  // skip_superseded() scratch
  std::vector<OutputFile*> touched_;  // stable: unordered_map never moves its elements
};

}  // namespace

// ---- TaskStore ----

struct TaskStore::Impl {
  Impl(const std::string& p, Logger l)
      : path(p), log(std::move(l)), db((make_parent_dirs(p), p), Db::Mode::ReadWriteCreate) {
    db.exec("PRAGMA busy_timeout = 5000", "set busy_timeout");
    bool is_wal = false;
    {
      Statement wal(db, "PRAGMA journal_mode = WAL");
      is_wal = wal.step() && wal.column_text(0) == "wal";
      if (!is_wal) {
        log->warn("store {}: cannot use WAL journal mode; readers may block the writer", path);
      }
    }
    // synchronous=NORMAL: in WAL mode a commit is atomic and survives a process crash without
    // an fsync per commit (the output files are synced before every commit, see Writer). A
    // 64 MiB page cache (the default is 2 MiB) keeps the recently written pages of a large job
    // in memory, where the updates that follow their inserts find them.
    db.exec("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = OFF; PRAGMA cache_size = -65536",
            "set pragmas");
    apply_migrations(db, log);
    writer = std::make_unique<Writer>(db, log);
    // Checkpoints (copying committed pages from the WAL into the database file) run on a
    // thread of their own, with a connection of their own: SQLite's automatic checkpoint would
    // run them on the writer thread, inside the commit of every ~1,000th page, and the writer
    // is the serial stage of the hot path. The writer keeps a far larger automatic threshold as
    // a backstop. Without a WAL there is nothing to checkpoint.
    if (is_wal) {
      checkpoint_db = std::make_unique<Db>(p, Db::Mode::ReadWriteCreate);
      db.exec(("PRAGMA wal_autocheckpoint = " + std::to_string(kWriterCheckpointPages)).c_str(),
              "set wal_autocheckpoint");
      checkpoint_thread = std::thread([this] {
        ::pthread_setname_np(::pthread_self(), "fanout-ckpt");  // as top -H and perf show it
        checkpoint_loop();
      });
    }
    thread = std::thread([this] {
      ::pthread_setname_np(::pthread_self(), "fanout-store");
      run();
    });
  }

  ~Impl() {
    push(WriteSubmitted{});
    {
      std::lock_guard lk(mu);
      stop = true;
    }
    work_cv.notify_one();
    thread.join();
    if (checkpoint_thread.joinable()) {
      {
        std::lock_guard lk(checkpoint_mu);
        checkpoint_stop = true;
      }
      checkpoint_cv.notify_one();
      checkpoint_thread.join();
      // Closed before db, whose close then checkpoints what is left and removes the WAL.
      checkpoint_db.reset();
    }
    SPDLOG_LOGGER_DEBUG(log,
                        "store {}: closed after {} ops in {} transactions (largest {}), "
                        "writer CPU {:.3f} s wall {:.3f} s; {} checkpoints on their own thread",
                        path, stats_ops, stats_batches, stats_max_batch, stats_cpu_s, stats_wall_s,
                        stats_checkpoints);
  }

  template <typename T>
  void push(T&& op) {
    if (!healthy.load(std::memory_order_relaxed)) return;  // dropped: see ok()
    bool was_empty = false;
    bool enough = false;
    {
      std::unique_lock lk(mu);
      // Backpressure: a writer that falls behind (a busy machine, a slow disk) slows the caller
      // down instead of letting the queue, and the interchange's memory, grow with the job.
      // The writer is busy whenever the backlog is this large, and wakes us after each commit.
      if (queued - committed >= kMaxBacklog) {
        done_cv.wait(lk, [this] {
          return queued - committed < kMaxBacklog / 2 || !healthy.load(std::memory_order_relaxed);
        });
      }
      was_empty = queue.empty();
      queue.emplace_back(std::forward<T>(op));
      ++queued;
      enough = queue.size() == kGroupCommitOps;
    }
    // A non-empty queue means the writer was already woken, or is busy and will look again,
    // or is waiting for a group commit to fill (woken once it has).
    if (was_empty || enough) work_cv.notify_one();
  }

  void run() {
    std::vector<Op> ops;
    std::unique_lock lk(mu);
    for (;;) {
      // Held submissions (Writer, "Deferred submission") come due even when nothing else is
      // queued: then a transaction of no operations writes them.
      const auto has_work = [this] { return stop || !queue.empty(); };
      if (held_due == std::chrono::steady_clock::time_point::max()) {
        work_cv.wait(lk, has_work);
      } else if (!work_cv.wait_until(lk, held_due, has_work)) {
        lk.unlock();
        if (healthy.load(std::memory_order_relaxed)) {
          apply({});
        } else {
          held_due = std::chrono::steady_clock::time_point::max();  // dropped: see ok()
        }
        lk.lock();
        continue;
      }
      if (queue.empty()) break;  // stop requested and everything committed
      // Group commit. A commit writes every page its transaction touched to the WAL, and the
      // hot path touches the same few pages (the right edges of the b-trees) in every
      // transaction: a writer that keeps up would commit a few operations at a time and write
      // those pages again and again. So it waits a moment for more, unless enough are queued,
      // someone waits in flush(), or we stop. Only the time to durability grows, by at most
      // kGroupCommitDelay; nothing is acknowledged to a peer on commit.
      if (queue.size() < kGroupCommitOps && !stop && flush_waiters == 0) {
        work_cv.wait_for(lk, kGroupCommitDelay, [this] {
          return stop || flush_waiters > 0 || queue.size() >= kGroupCommitOps;
        });
      }
      ops.swap(queue);
      const std::uint64_t first = queued - ops.size();
      lk.unlock();
      // Everything queued goes in as few transactions as possible, but no larger than
      // kMaxOpsPerTransaction: a backlog then still commits (and shows to readers) in steps and
      // keeps the WAL file from growing with the backlog.
      for (std::size_t i = 0; i < ops.size(); i += kMaxOpsPerTransaction) {
        const std::size_t n = std::min(kMaxOpsPerTransaction, ops.size() - i);
        // After a failure the rest is dropped (see ok()), but still counted as done so that
        // flush() returns.
        if (healthy.load(std::memory_order_relaxed)) apply(std::span<Op>(ops).subspan(i, n));
        {
          std::lock_guard done_lk(mu);
          committed = first + i + n;
        }
        done_cv.notify_all();
        request_checkpoint();
      }
      ops.clear();
      lk.lock();
    }
  }

  void request_checkpoint() {
    if (!checkpoint_thread.joinable()) return;
    {
      std::lock_guard lk(checkpoint_mu);
      checkpoint_due = true;
    }
    checkpoint_cv.notify_one();
  }

  // The checkpoint thread: after commits, at most every kCheckpointInterval, a PASSIVE
  // checkpoint, which copies what readers no longer need and never waits for, or blocks, the
  // writer or a reader. What it cannot copy yet is copied by a later one. Once a checkpoint has
  // copied everything, the writer's next transaction starts the WAL file over, so the file stays
  // about as large as what is written between two checkpoints.
  void checkpoint_loop() {
    std::unique_lock lk(checkpoint_mu);
    for (;;) {
      checkpoint_cv.wait(lk, [this] { return checkpoint_stop || checkpoint_due; });
      if (checkpoint_stop) break;
      checkpoint_due = false;
      lk.unlock();
      int wal_frames = 0, copied = 0;
      const int rc = sqlite3_wal_checkpoint_v2(checkpoint_db->get(), nullptr,
                                               SQLITE_CHECKPOINT_PASSIVE, &wal_frames, &copied);
      // BUSY: another checkpoint (the writer's backstop) is running; the next one continues.
      if (rc != SQLITE_OK && rc != SQLITE_BUSY && !checkpoint_warned) {
        checkpoint_warned = true;
        log->warn("store {}: checkpoint failed, the writer's own checkpoints take over: {}", path,
                  checkpoint_db->errmsg());
      }
      ++stats_checkpoints;
      lk.lock();
      checkpoint_cv.wait_for(lk, kCheckpointInterval, [this] { return checkpoint_stop; });
    }
  }

  void apply(std::span<Op> ops) {
    try {
      std::lock_guard db_lk(db_mu);
      const double cpu0 = thread_cpu_seconds();
      const auto w0 = std::chrono::steady_clock::now();
      writer->apply(ops);
      stats_cpu_s += thread_cpu_seconds() - cpu0;
      stats_wall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
      ++stats_batches;
      stats_ops += ops.size();
      stats_max_batch = std::max<std::uint64_t>(stats_max_batch, ops.size());
      held_due = writer->held_due();
      SPDLOG_LOGGER_TRACE(log, "store: committed {} ops", ops.size());
    } catch (const std::exception& e) {
      healthy.store(false, std::memory_order_relaxed);
      log->critical(
          "store {}: write failed; {} operations rolled back, further writes are dropped: {}", path,
          ops.size(), e.what());
    }
  }

  std::string path;
  Logger log;
  Db db;
  std::mutex db_mu;  // serialises the connection between startup calls and the writer thread
  std::unique_ptr<Writer> writer;

  std::mutex mu;  // guards queue, queued, committed, stop
  std::condition_variable work_cv;
  std::condition_variable done_cv;
  std::vector<Op> queue;
  std::uint64_t queued = 0;     // operations ever queued
  std::uint64_t committed = 0;  // operations ever applied (or dropped after a failure)
  bool stop = false;
  int flush_waiters = 0;  // threads in flush(): the writer commits without waiting for more
  std::atomic<bool> healthy{true};

  // Writer thread only.
  std::chrono::steady_clock::time_point held_due = std::chrono::steady_clock::time_point::max();
  std::uint64_t stats_batches = 0, stats_ops = 0, stats_max_batch = 0;
  double stats_cpu_s = 0;
  double stats_wall_s = 0;

  // The checkpoint thread (see checkpoint_loop()); absent without a WAL.
  std::unique_ptr<Db> checkpoint_db;
  std::mutex checkpoint_mu;  // guards checkpoint_due, checkpoint_stop
  std::condition_variable checkpoint_cv;
  bool checkpoint_due = false;
  bool checkpoint_stop = false;
  bool checkpoint_warned = false;       // checkpoint thread only
  std::uint64_t stats_checkpoints = 0;  // checkpoint thread only; read after it is joined
  std::thread checkpoint_thread;

  std::thread thread;  // last: started once everything above exists
};

TaskStore::TaskStore(const std::string& path, Logger log)
    : impl_(std::make_unique<Impl>(path, std::move(log))) {}

TaskStore::~TaskStore() = default;

std::uint64_t TaskStore::max_job_id() {
  std::lock_guard lk(impl_->db_mu);
  return static_cast<std::uint64_t>(impl_->db.query_int("SELECT coalesce(max(id), 0) FROM jobs"));
}

std::uint64_t TaskStore::max_attempt_id() {
  std::lock_guard lk(impl_->db_mu);
  return static_cast<std::uint64_t>(
      impl_->db.query_int("SELECT coalesce(max(id), 0) FROM attempts"));
}

std::uint64_t TaskStore::max_pool_id() {
  std::lock_guard lk(impl_->db_mu);
  return static_cast<std::uint64_t>(impl_->db.query_int("SELECT coalesce(max(id), 0) FROM pools"));
}

namespace {

// Cuts the job's output file back to `end`, the end of its last committed rows, removing what a
// writer that crashed before committing appended. Creates the file when missing.
void restore_output(const std::string& path, std::uint64_t end, const Logger& log) {
  make_parent_dirs(path);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid()) throw Failure(ErrorCode::Io, sys_error(path, "cannot open output file"));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw Failure(ErrorCode::Io, sys_error(path, "fstat"));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > end) {
    if (::ftruncate(fd.get(), static_cast<off_t>(end)) != 0 || ::fsync(fd.get()) != 0) {
      throw Failure(ErrorCode::Io, sys_error(path, "cannot truncate output file"));
    }
    log->info("output {}: removed {} uncommitted bytes after offset {}", path, size - end, end);
  } else if (size < end) {
    // Extending would write zeros in place of rows; the loss is reported instead.
    log->error(
        "output {}: {} bytes, but the store records rows up to offset {}; the file was "
        "changed outside fanout and rows are missing",
        path, size, end);
  }
}

}  // namespace

std::vector<UnfinishedJob> TaskStore::recover() {
  auto& db = impl_->db;
  std::lock_guard lk(impl_->db_mu);
  Transaction tx(db);
  Statement jobs(db,
                 "SELECT id, spec, submit_done, total, output_path FROM jobs "
                 "WHERE state IN ('pending', 'running') ORDER BY id");
  Statement counts(db,
                   "SELECT succeeded, failed, items_succeeded, items_failed, attempts_failed "
                   "FROM job_counts WHERE job_id = ?1");
  Statement remaining(db,
                      "SELECT m.id, m.state, m.tries, i.descriptor, i.detail FROM minibatches m "
                      "JOIN minibatch_inputs i ON i.job_id = m.job_id AND i.minibatch_id = m.id "
                      "WHERE m.job_id = ?1 AND m.state IN ('pending', 'running') ORDER BY m.id");
  Statement output_end(db,
                       "SELECT coalesce(max(output_offset + output_bytes), 0) FROM minibatches "
                       "WHERE job_id = ?1 AND output_offset IS NOT NULL");
  Statement requeue(db,
                    "UPDATE minibatches SET state = 'pending', tries = max(tries - 1, 0) "
                    "WHERE job_id = ?1 AND state = 'running'");
  Statement fail_job(db, "UPDATE jobs SET state = 'failed', reason = ?2, ended = ?3 WHERE id = ?1");

  std::vector<UnfinishedJob> out;
  std::vector<std::pair<std::uint64_t, std::string>> broken;   // job id, reason
  std::vector<std::pair<std::string, std::uint64_t>> outputs;  // path, committed end
  std::string detail;
  while (jobs.step()) {
    UnfinishedJob u;
    u.job_id = jobs.column_uint64(0);
    if (!unpack_from(jobs.column_blob(1), u.spec)) {
      broken.emplace_back(u.job_id, "cannot resume: the stored job spec cannot be decoded");
      continue;
    }
    u.submit_done = jobs.column_int64(2) != 0;
    u.total = jobs.column_uint64(3);
    const std::string output_path(jobs.column_text(4));

    counts.bind(1, u.job_id);
    if (counts.step()) {
      u.succeeded = counts.column_uint64(0);
      u.failed = counts.column_uint64(1);
      u.items_succeeded = counts.column_uint64(2);
      u.items_failed = counts.column_uint64(3);
      u.attempts_failed = counts.column_uint64(4);
    }
    counts.reset();

    bool ok = true;
    remaining.bind(1, u.job_id);
    while (remaining.step()) {
      proto::MiniBatch mb;
      mb.index = remaining.column_uint64(0);
      auto tries = static_cast<std::uint32_t>(remaining.column_int64(2));
      // A running mini-batch's last try was dispatched but never recorded: it is given back.
      if (remaining.column_text(1) == "running" && tries > 0) --tries;
      if (!unpack_from(remaining.column_blob(3), mb.items)) {
        broken.emplace_back(u.job_id, "cannot resume: the stored items of mini-batch " +
                                          std::to_string(mb.index) + " cannot be decoded");
        ok = false;
        break;
      }
      mb.detail = remaining.column_text(4);
      // A detail the store made up (the client sent none) is not handed on as the client's.
      detail.clear();
      append_default_detail(detail, mb.items);
      if (mb.detail == detail) mb.detail.clear();
      u.remaining.push_back(std::move(mb));
      u.remaining_tries.push_back(tries);
    }
    remaining.reset();
    if (!ok) continue;

    if (!output_path.empty()) {
      output_end.bind(1, u.job_id);
      const std::uint64_t end = output_end.step() ? output_end.column_uint64(0) : 0;
      output_end.reset();
      outputs.emplace_back(output_path, end);
    }
    out.push_back(std::move(u));
  }
  jobs.reset();

  for (const auto& u : out) {
    requeue.bind(1, u.job_id);
    requeue.run();
  }
  const double now = unix_now();
  for (const auto& [id, reason] : broken) {
    impl_->log->error("store {}: job {} {}; marked failed", impl_->path, id, reason);
    fail_job.bind(1, id).bind(2, reason).bind(3, now);
    fail_job.run();
  }
  for (const auto& [path, end] : outputs) restore_output(path, end, impl_->log);
  // Pools connected to the previous interchange process are gone with it: one that is still
  // alive registers again, as a new row.
  Statement stale(db, "UPDATE pools SET state = 'lost', last_seen = ?1 WHERE state = 'connected'");
  stale.bind(1, now);
  stale.run();
  tx.commit();
  return out;
}

void TaskStore::create_job(std::uint64_t job_id, const proto::JobSpec& spec, double created) {
  impl_->push(std::make_unique<CreateJob>(CreateJob{job_id, spec, created}));
}

void TaskStore::add_minibatches(std::uint64_t job_id, std::vector<proto::MiniBatch> batches) {
  impl_->push(AddMiniBatches{job_id, std::move(batches)});
}

void TaskStore::set_submit_done(std::uint64_t job_id, std::uint64_t total) {
  impl_->push(SetSubmitDone{job_id, total});
}

void TaskStore::mark_running(std::uint64_t job_id, std::uint64_t index, std::uint32_t tries) {
  impl_->push(MarkRunning{job_id, index, tries});
}

void TaskStore::record_attempt(AttemptRecord rec) { impl_->push(std::move(rec)); }

void TaskStore::finish_job(std::uint64_t job_id, const std::string& state,
                           const std::string& reason, double ended) {
  impl_->push(FinishJob{job_id, state, reason, ended});
}

void TaskStore::upsert_pool(const PoolRecord& pool) { impl_->push(PoolRecord(pool)); }

void TaskStore::record_resources(ResourceRecord rec) {
  if (rec.job_ids.empty()) return;
  impl_->push(std::make_unique<ResourceRecord>(std::move(rec)));
}

void TaskStore::flush() {
  impl_->push(WriteSubmitted{});  // what the writer holds back is part of what must be durable
  std::unique_lock lk(impl_->mu);
  const std::uint64_t target = impl_->queued;
  if (impl_->committed >= target) return;
  ++impl_->flush_waiters;
  impl_->work_cv.notify_one();  // cut a group-commit wait short
  impl_->done_cv.wait(lk, [&] { return impl_->committed >= target; });
  --impl_->flush_waiters;
}

bool TaskStore::ok() const noexcept { return impl_->healthy.load(std::memory_order_relaxed); }

const std::string& TaskStore::path() const noexcept { return impl_->path; }

// ---- StoreReader ----

namespace {

constexpr const char* kSummaryColumns =
    "SELECT id, name, state, reason, coalesce(created, 0), coalesce(ended, 0), output_path, "
    "log_dir FROM jobs ";

}  // namespace

struct StoreReader::Impl {
  explicit Impl(const std::string& path) : db((check_exists(path), path), Db::Mode::ReadOnly) {
    db.exec("PRAGMA busy_timeout = 5000", "set busy_timeout");
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
                   "SELECT total, succeeded, failed, items_succeeded, items_failed, attempts "
                   "FROM job_counts WHERE job_id = ?1");
  }

  static void check_exists(const std::string& path) {
    std::error_code ec;
    if (!fs::exists(path, ec)) throw Failure(ErrorCode::NotFound, path + ": no such store");
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
    }
    counts->reset();
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

  Db db;
  // Prepared once the version is known to be right (std::optional: Statement is not movable).
  std::optional<Statement> by_id;
  std::optional<Statement> newest;
  std::optional<Statement> newest_in_state;
  std::optional<Statement> counts;
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

std::optional<JobSummary> StoreReader::job(std::uint64_t id) {
  impl_->by_id->bind(1, id);
  auto rows = impl_->collect(*impl_->by_id);
  if (rows.empty()) return std::nullopt;
  return std::move(rows.front());
}

}  // namespace fanout::store
