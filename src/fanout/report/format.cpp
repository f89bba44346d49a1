// Field formatting. See format.hpp.
#include "fanout/report/format.hpp"

#include "fanout/util/clock.hpp"

namespace fanout::report {

void append_csv_field(std::string& out, std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    out += field;
    return;
  }
  // Whole runs between quotes, each quote doubled: a mini-batch's detail is JSON, full of them.
  out += '"';
  std::size_t from = 0;
  for (std::size_t q = field.find('"'); q != std::string_view::npos; q = field.find('"', from)) {
    out.append(field.substr(from, q + 1 - from));
    out += '"';
    from = q + 1;
  }
  out.append(field.substr(from));
  out += '"';
}

std::string utc_text(double unix_seconds) {
  return unix_seconds > 0 ? iso_utc(unix_seconds) : std::string("-");
}

}  // namespace fanout::report
