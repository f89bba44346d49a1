// RAII wrappers over the SQLite C API: Db (a connection), Statement (a prepared statement) and
// Transaction (BEGIN IMMEDIATE .. COMMIT, rolled back unless committed).
// sqlite3.h is included only by store/*.cpp; this header forward-declares the handle types.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace fanout::store {

struct CloseDb {
  void operator()(sqlite3* p) const noexcept;
};
struct FinalizeSt {
  void operator()(sqlite3_stmt* p) const noexcept;
};
using DbHandle = std::unique_ptr<sqlite3, CloseDb>;
using StmtHandle = std::unique_ptr<sqlite3_stmt, FinalizeSt>;

// One SQLite connection. Not thread-safe: the owner serialises all use of it and of the
// statements prepared on it. Every error is a Failure{Database} whose message starts with the
// file's path and carries sqlite3_errmsg().
class Db final {
 public:
  enum class Mode : std::uint8_t {
    ReadWriteCreate,  // opens or creates the file
    ReadOnly,         // the file must exist
  };
  // Opens `path`. Throws Failure{Database} naming the path when SQLite refuses, and Failure{Io}
  // naming the file, the reason, its owner and mode when the store, its -wal, -shm or -journal,
  // or its folder is not to be trusted (file_trust.hpp: a link, another user's file, a file or
  // folder others may write).
  Db(std::string path, Mode mode);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one or more SQL statements that return no rows of interest. Throws Failure{Database}
  // whose message names the path, `what` (or the SQL when `what` is null) and SQLite's message.
  void exec(const char* sql, const char* what = nullptr);
  // Runs a query returning one integer (e.g. "PRAGMA user_version"); 0 when it returns no row.
  [[nodiscard]] std::int64_t query_int(const char* sql);

  [[nodiscard]] sqlite3* get() const noexcept { return db_.get(); }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  // The last error message of this connection.
  [[nodiscard]] std::string errmsg() const;
  // Throws Failure{Database}: "<path>: <what>: <sqlite message>".
  [[noreturn]] void fail(std::string_view what) const;

 private:
  std::string path_;
  DbHandle db_;
};

// A prepared statement, prepared once and reused: bind, step, reset. Borrows its Db, which must
// outlive it. Parameter indexes are 1-based and column indexes 0-based, as in SQLite.
class Statement final {
 public:
  // Prepares `sql` (one statement). Throws Failure{Database} naming the SQL.
  Statement(Db& db, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds never copy text or blobs: the bytes must stay valid until the statement is stepped
  // for the last time and reset. Unsigned values are stored as SQLite's signed 64-bit integer.
  Statement& bind(int idx, std::int64_t v);
  Statement& bind(int idx, std::uint64_t v) { return bind(idx, static_cast<std::int64_t>(v)); }
  Statement& bind(int idx, std::int32_t v) { return bind(idx, static_cast<std::int64_t>(v)); }
  Statement& bind(int idx, std::uint32_t v) { return bind(idx, static_cast<std::int64_t>(v)); }
  Statement& bind(int idx, double v);
  Statement& bind(int idx, std::string_view text);
  Statement& bind(int idx, const char* text) { return bind(idx, std::string_view(text)); }
  Statement& bind_blob(int idx, std::string_view bytes);
  Statement& bind_null(int idx);
  // Binds NULL when `text` is empty, else the text.
  Statement& bind_text_or_null(int idx, std::string_view text);

  // Advances: true when a row is available, false when done. Throws Failure{Database}.
  [[nodiscard]] bool step();
  // Steps a statement that returns no rows to completion, then reset()s it.
  void run();
  // Makes the statement ready to be bound and stepped again (bindings are cleared).
  void reset() noexcept;

  [[nodiscard]] bool is_null(int col) const;
  [[nodiscard]] std::int64_t column_int64(int col) const;
  [[nodiscard]] std::uint64_t column_uint64(int col) const {
    return static_cast<std::uint64_t>(column_int64(col));
  }
  [[nodiscard]] double column_double(int col) const;
  // Text or blob bytes; valid until the next step() or reset(). Empty for NULL.
  [[nodiscard]] std::string_view column_text(int col) const;
  [[nodiscard]] std::string_view column_blob(int col) const;

 private:
  void check_bind(int rc, int idx);

  Db& db_;
  StmtHandle st_;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless commit() succeeded.
class Transaction final {
 public:
  // Throws Failure{Database} when the write lock cannot be taken (after busy_timeout).
  explicit Transaction(Db& db);
  // Rolls back unless committed; never throws.
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // Throws Failure{Database} carrying sqlite3_errmsg(); the destructor then rolls back.
  void commit();

 private:
  Db& db_;
  bool done_ = false;
};

}  // namespace fanout::store
