// Row-boundary cutting of delimited text. See row_cutter.hpp.
#include "fanout/partition/row_cutter.hpp"

namespace fanout::part {

RowCutter::RowCutter(std::uint64_t max_bytes, std::uint64_t start)
    : max_(max_bytes == 0 ? 1 : max_bytes), pos_(start), start_(start), last_end_(start) {}

void RowCutter::row_end(std::uint64_t end, std::vector<RowRange>& out) {
  // Adding this row would overflow a range that already holds rows: close the range before it.
  if (end - start_ > max_ && last_end_ > start_) {
    out.push_back(RowRange{start_, last_end_, rows_});
    start_ = last_end_;
    rows_ = 0;
  }
  last_end_ = end;
  ++rows_;
  // Full (or a single oversized row): close it here.
  if (end - start_ >= max_) {
    out.push_back(RowRange{start_, end, rows_});
    start_ = last_end_ = end;
    rows_ = 0;
  }
}

void RowCutter::feed(std::string_view bytes, std::vector<RowRange>& out) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (c == '"') {
      quoted_ = !quoted_;  // "" inside quotes toggles twice: still quoted
    } else if (c == '\n' && !quoted_) {
      row_end(pos_ + i + 1, out);
    }
  }
  pos_ += bytes.size();
}

std::optional<RowRange> RowCutter::finish() {
  if (pos_ > last_end_) {
    last_end_ = pos_;
    ++rows_;
  }
  if (last_end_ == start_) return std::nullopt;
  RowRange r{start_, last_end_, rows_};
  start_ = last_end_;
  rows_ = 0;
  return r;
}

std::vector<std::string> split_row(std::string_view row, char delimiter) {
  if (!row.empty() && row.back() == '\n') row.remove_suffix(1);
  if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
  std::vector<std::string> fields;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < row.size(); ++i) {
    const char c = row[i];
    if (quoted) {
      if (c == '"' && i + 1 < row.size() && row[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == delimiter) {
      fields.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  fields.push_back(std::move(cur));
  return fields;
}

std::size_t first_row_end(std::string_view bytes) {
  bool quoted = false;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] == '"') {
      quoted = !quoted;
    } else if (bytes[i] == '\n' && !quoted) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

}  // namespace fanout::part
