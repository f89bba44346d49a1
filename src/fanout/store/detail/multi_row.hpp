// MultiRow: one INSERT prepared for 64, 8 and 1 rows, the writer's way of writing many rows per
// sqlite3_step (docs/performance.md, "Multi-row statements"). Private to the store.
#pragma once

#include <cstddef>
#include <iterator>
#include <memory>
#include <string_view>
#include <vector>

#include "fanout/store/db.hpp"

namespace fanout::store::detail {

// One INSERT prepared for 64, 8 and 1 rows: the writer binds up to 64 rows per sqlite3_step.
// SQLite's per-statement work (resetting the VM, starting the statement, opening and positioning
// cursors on each b-tree) is then paid once per chunk instead of once per row; the rows' own
// b-tree work is the same. Borrows its Db, which must outlive it; used by one thread at a time.
class MultiRow final {
 public:
  static constexpr std::size_t kChunks[] = {64, 8, 1};

  // Prepares "<head> VALUES (?, ...), ... <tail>" for each chunk size. `head` is
  // "INSERT INTO t (a, b, c)", `cols` the number of columns it names, `tail` what follows the
  // VALUES list (an ON CONFLICT clause, or nothing). Throws Failure{Database} naming the SQL.
  MultiRow(Db& db, std::string_view head, int cols, std::string_view tail);

  // Inserts rows 0 .. n-1: bind_row(statement, base, i) binds row i's parameters base + 1 ..
  // base + cols. Rows go in order, so a later row of an upsert wins over an earlier one.
  // Throws Failure{Database}; rows of chunks already stepped stay written (the caller's
  // transaction rolls them back).
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

}  // namespace fanout::store::detail
