// CSV files. See csv.hpp.
#include "fanout/report/csv.hpp"

#include <string>

#include "fanout/report/format.hpp"
#include "fanout/util/error.hpp"

namespace fanout::report {

int csv_field_count(std::string_view header) noexcept {
  int n = 1;
  for (char c : header) n += c == ',' ? 1 : 0;
  return n;
}

void write_csv(store::ReportRows rows, std::string_view header, AtomicFile& file) {
  constexpr std::size_t kChunk = 1 << 20;
  const int n = rows.columns();
  FANOUT_ASSERT(csv_field_count(header) == n);
  std::string out(header);
  out += '\n';
  while (rows.next()) {
    for (int c = 0; c < n; ++c) {
      if (c > 0) out += ',';
      if (!rows.is_null(c)) append_csv_field(out, rows.text(c));
    }
    out += '\n';
    if (out.size() >= kChunk) {
      file.write(out);
      out.clear();
    }
  }
  file.write(out);
}

}  // namespace fanout::report
