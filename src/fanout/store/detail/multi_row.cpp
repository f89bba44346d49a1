// MultiRow's statements. See multi_row.hpp.
#include "fanout/store/detail/multi_row.hpp"

#include <string>

namespace fanout::store::detail {

MultiRow::MultiRow(Db& db, std::string_view head, int cols, std::string_view tail) : cols_(cols) {
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

}  // namespace fanout::store::detail
