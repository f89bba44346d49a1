// RAII wrappers over the SQLite C API. See db.hpp.
#include "fanout/store/db.hpp"

#include <sqlite3.h>
#include <sys/stat.h>

#include <mutex>
#include <string>
#include <utility>

#include "fanout/store/file_trust.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store {

void CloseDb::operator()(sqlite3* p) const noexcept { sqlite3_close_v2(p); }
void FinalizeSt::operator()(sqlite3_stmt* p) const noexcept { sqlite3_finalize(p); }

namespace {

std::string message(const std::string& path, std::string_view what, const char* sqlite_msg) {
  std::string m = path;
  m += ": ";
  m += what;
  m += ": ";
  m += sqlite_msg != nullptr ? sqlite_msg : "unknown SQLite error";
  // SQLite words a file its open() check refused as "unable to open database file": say which
  // file and why.
  if (std::string refused = take_refused_open(); !refused.empty()) m += " (" + refused + ")";
  return m;
}

// SQLite resolves a link at the store's path before it opens the file (so that its -wal sits
// beside the real one), which the open() check cannot see: the file it opened must be the one
// check_store_files() found at `path`, compared by device and inode. Throws Failure{Io}.
void check_opened_file(sqlite3* db, const std::string& path) {
  const char* opened = sqlite3_db_filename(db, "main");
  if (opened == nullptr || *opened == '\0') return;  // :memory: or a temporary store
  struct stat at_path {
  }, used{};
  if (::lstat(path.c_str(), &at_path) != 0 || ::stat(opened, &used) != 0) return;
  if (S_ISLNK(at_path.st_mode) || at_path.st_dev != used.st_dev || at_path.st_ino != used.st_ino) {
    throw Failure(ErrorCode::Io, path + ": SQLite opened " + opened +
                                     ", not the file at this path (a symbolic link was planted "
                                     "there meanwhile?); fanout does not follow links to a "
                                     "store: remove it");
  }
}

}  // namespace

Db::Db(std::string path, Mode mode) : path_(std::move(path)) {
  // SQLite keeps memory statistics by default, behind a global mutex taken on every allocation:
  // a cost on the writer's hot path that nothing here reads. Set once, before SQLite
  // initialises (later it is refused, harmlessly).
  // The file checks go in before any connection opens a file (file_trust.hpp).
  static std::once_flag configured;
  static Expected<void> checks;
  std::call_once(configured, [] {
    (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    checks = install_file_checks();
  });
  if (!checks) throw Failure(checks.error());
  (void)take_refused_open();  // only what this open refuses is reported with its errors
  // The store's files decide what runs: refused, with the reason, before SQLite reads them.
  if (auto ok = check_store_files(path_); !ok) throw Failure(ok.error());
  // NOMUTEX: the owner serialises use of the connection (see the class comment), so SQLite's
  // own per-call mutex would only cost time on the hot path.
  const int flags =
      (mode == Mode::ReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
      SQLITE_OPEN_NOMUTEX;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path_.c_str(), &raw, flags, nullptr);
  db_.reset(raw);  // a handle is returned even on failure and must be closed
  if (rc != SQLITE_OK) {
    throw Failure(
        ErrorCode::Database,
        message(path_, "cannot open", raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  sqlite3_extended_result_codes(raw, 1);
  check_opened_file(raw, path_);
}

Db::~Db() = default;

void Db::exec(const char* sql, const char* what) {
  char* err = nullptr;
  if (sqlite3_exec(db_.get(), sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string m =
        message(path_, what != nullptr ? what : sql, err != nullptr ? err : sqlite3_errmsg(get()));
    sqlite3_free(err);
    throw Failure(ErrorCode::Database, std::move(m));
  }
}

std::int64_t Db::query_int(const char* sql) {
  Statement st(*this, sql);
  return st.step() ? st.column_int64(0) : 0;
}

std::string Db::errmsg() const { return sqlite3_errmsg(db_.get()); }

void Db::fail(std::string_view what) const {
  throw Failure(ErrorCode::Database, message(path_, what, sqlite3_errmsg(db_.get())));
}

Statement::Statement(Db& db, std::string_view sql) : db_(db) {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v3(db.get(), sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  st_.reset(raw);
  if (rc != SQLITE_OK) db.fail(std::string("prepare \"").append(sql).append("\""));
}

Statement::~Statement() = default;

// Binding fails only on a wrong index or an out-of-memory condition; both are reported with the
// statement's SQL so that the bug can be found.
void Statement::check_bind(int rc, int idx) {
  if (rc == SQLITE_OK) return;
  db_.fail(std::string("bind ")
               .append(std::to_string(idx))
               .append(" of \"")
               .append(sqlite3_sql(st_.get()))
               .append("\""));
}

Statement& Statement::bind(int idx, std::int64_t v) {
  check_bind(sqlite3_bind_int64(st_.get(), idx, v), idx);
  return *this;
}

Statement& Statement::bind(int idx, double v) {
  check_bind(sqlite3_bind_double(st_.get(), idx, v), idx);
  return *this;
}

Statement& Statement::bind(int idx, std::string_view text) {
  // A null data pointer (an empty string_view) would bind NULL, not ''.
  const char* p = text.data() != nullptr ? text.data() : "";
  check_bind(sqlite3_bind_text64(st_.get(), idx, p, text.size(), SQLITE_STATIC, SQLITE_UTF8), idx);
  return *this;
}

Statement& Statement::bind_blob(int idx, std::string_view bytes) {
  const char* p = bytes.data() != nullptr ? bytes.data() : "";
  check_bind(sqlite3_bind_blob64(st_.get(), idx, p, bytes.size(), SQLITE_STATIC), idx);
  return *this;
}

Statement& Statement::bind_null(int idx) {
  check_bind(sqlite3_bind_null(st_.get(), idx), idx);
  return *this;
}

Statement& Statement::bind_text_or_null(int idx, std::string_view text) {
  return text.empty() ? bind_null(idx) : bind(idx, text);
}

bool Statement::step() {
  const int rc = sqlite3_step(st_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // Keep the message before reset() replaces it.
  std::string what = std::string("\"").append(sqlite3_sql(st_.get())).append("\"");
  std::string m = message(db_.path(), what, sqlite3_errmsg(db_.get()));
  reset();
  throw Failure(ErrorCode::Database, std::move(m));
}

void Statement::run() {
  while (step()) {
  }
  reset();
}

void Statement::reset() noexcept {
  sqlite3_reset(st_.get());
  sqlite3_clear_bindings(st_.get());
}

bool Statement::is_null(int col) const {
  return sqlite3_column_type(st_.get(), col) == SQLITE_NULL;
}

std::int64_t Statement::column_int64(int col) const { return sqlite3_column_int64(st_.get(), col); }

double Statement::column_double(int col) const { return sqlite3_column_double(st_.get(), col); }

std::string_view Statement::column_text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_.get(), col));
  if (p == nullptr) return {};
  return {p, static_cast<std::size_t>(sqlite3_column_bytes(st_.get(), col))};
}

std::string_view Statement::column_blob(int col) const {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(st_.get(), col));
  if (p == nullptr) return {};
  return {p, static_cast<std::size_t>(sqlite3_column_bytes(st_.get(), col))};
}

Transaction::Transaction(Db& db) : db_(db) { db_.exec("BEGIN IMMEDIATE", "begin transaction"); }

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec("COMMIT", "commit");
  done_ = true;
}

}  // namespace fanout::store
