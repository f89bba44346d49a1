// Field formatting. See format.hpp.
#include "fanout/report/format.hpp"

#include "fanout/util/clock.hpp"

namespace fanout::report {

void append_csv_field(std::string& out, std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    out += field;
    return;
  }
  out += '"';
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

std::string utc_text(double unix_seconds) {
  return unix_seconds > 0 ? iso_utc(unix_seconds) : std::string("-");
}

}  // namespace fanout::report
