// Field formatting shared by the report files: CSV quoting and times. docs/store.md, section 8.
#pragma once

#include <string>
#include <string_view>

namespace fanout::report {

// Appends one CSV field, quoted when it needs it (RFC 4180: a comma, a double quote, CR or LF;
// quotes are doubled).
void append_csv_field(std::string& out, std::string_view field);

// "2026-11-22T05:21:07.250Z" for a Unix time in seconds; "-" for 0 or less (not set).
std::string utc_text(double unix_seconds);

}  // namespace fanout::report
