// The ready file's text. See ready_file.hpp.
#include "fanout/protocol/ready_file.hpp"

#include <charconv>
#include <cstdint>
#include <optional>

namespace fanout::proto {

namespace {

// A positive decimal number, all of `value`; nullopt otherwise.
template <typename T>
std::optional<T> positive(const std::string& value) {
  T n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc{} || end != value.data() + value.size() || n <= 0) return std::nullopt;
  return n;
}

}  // namespace

std::string format_ready(const ReadyFile& r) {
  std::string out;
  auto line = [&](std::string_view key, const std::string& value) {
    if (value.empty()) return;
    out.append(key).append("=").append(value).append("\n");
  };
  line("client", r.client);
  line("pool", r.pool);
  line("pid", r.pid > 0 ? std::to_string(r.pid) : std::string());
  line("host", r.host);
  line("security", r.security);
  line("keys", r.keys);
  line("job", r.job > 0 ? std::to_string(r.job) : std::string());
  return out;
}

Expected<ReadyFile> parse_ready(std::string_view text, std::string_view where) {
  ReadyFile r;
  std::size_t number = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t nl = text.find('\n', pos);
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++number;
    if (line.empty()) continue;
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return make_error(ErrorCode::Protocol,
                        std::string(where) + ": line " + std::to_string(number) +
                            ": expected key=value, found '" + std::string(line) + "'");
    }
    const std::string_view key = line.substr(0, eq);
    const std::string value(line.substr(eq + 1));
    if (key == "client") {
      r.client = value;
    } else if (key == "pool") {
      r.pool = value;
    } else if (key == "pid" || key == "job") {
      // Both are positive numbers; anything else is a damaged file, not a missing value.
      const auto n = positive<std::uint64_t>(value);
      if (!n || (key == "pid" && *n > static_cast<std::uint64_t>(INT64_MAX))) {
        return make_error(ErrorCode::Protocol,
                          std::string(where) + ": line " + std::to_string(number) + ": " +
                              std::string(key) + ": expected a positive number, found '" + value +
                              "'");
      }
      if (key == "pid") {
        r.pid = static_cast<std::int64_t>(*n);
      } else {
        r.job = *n;
      }
    } else if (key == "host") {
      r.host = value;
    } else if (key == "security") {
      r.security = value;
    } else if (key == "keys") {
      r.keys = value;
    }
    // Any other key is a newer writer's: skipped.
  }
  return r;
}

}  // namespace fanout::proto
