// Cutting delimited text (CSV/TSV) into mini-batches of whole rows by size. Pure: the caller reads
// the file and feeds its bytes, so it is tested as a property (every row in exactly one range,
// no quoted field split). See docs/job-spec.md#tabular-input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fanout::part {

// A half-open byte range [begin, end) of one file holding `rows` whole rows.
struct RowRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t rows = 0;
};

// Finds row ends in a stream of bytes ('\n' outside double quotes; "" inside quotes is an escaped
// quote) and groups rows into ranges of at most `max_bytes`, except that a single row larger than
// that is a range by itself. Never cuts inside a row. Not thread-safe; one instance per file.
class RowCutter final {
 public:
  // `start` is the offset of the first byte fed (after a header). Precondition: max_bytes >= 1.
  explicit RowCutter(std::uint64_t max_bytes, std::uint64_t start = 0);

  // Feeds the next bytes of the file; appends every range completed by them to `out`.
  void feed(std::string_view bytes, std::vector<RowRange>& out);
  // End of file: the last range (a final row without '\n' counts as a row), if any bytes are left.
  std::optional<RowRange> finish();

  // True while inside a quoted field (a file ending so is malformed: its last field is unclosed).
  [[nodiscard]] bool in_quotes() const noexcept { return quoted_; }

 private:
  void row_end(std::uint64_t end, std::vector<RowRange>& out);
  std::uint64_t max_;
  std::uint64_t pos_;
  std::uint64_t start_;     // first byte of the range being built
  std::uint64_t last_end_;  // end of the last complete row in it
  std::uint64_t rows_ = 0;  // complete rows in [start_, last_end_)
  bool quoted_ = false;
};

// Splits one row (without its line break; a trailing '\r' is dropped) into fields, undoing quotes.
std::vector<std::string> split_row(std::string_view row, char delimiter);

// Finds the end of the first row in `bytes` (the offset after its '\n'), honouring quotes; npos
// when the row does not end within `bytes`.
std::size_t first_row_end(std::string_view bytes);

}  // namespace fanout::part
