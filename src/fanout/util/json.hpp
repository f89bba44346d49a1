// Minimal JSON text helpers for the few places that write JSON (settings, details, --json).
// Writing only; JSON is read (jobs.settings) with nlohmann-json in store/job_settings.cpp.
#pragma once

#include <string>
#include <string_view>

namespace fanout {

// Appends `s` as a quoted JSON string: valid UTF-8 passed through, control characters escaped,
// and each byte that is not part of valid UTF-8 written as the escape \udcNN (Python's
// surrogateescape), so the result is always valid UTF-8 and loses nothing. See docs/store.md.
void json_quote(std::string& out, std::string_view s);
std::string json_quote(std::string_view s);

}  // namespace fanout
