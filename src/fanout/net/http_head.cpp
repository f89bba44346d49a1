// Request heads and responses of net::HttpServer. See http_head.hpp.
#include "fanout/net/http_head.hpp"

#include <fmt/format.h>
#include <strings.h>

#include <algorithm>

namespace fanout::net {

namespace {

bool all_digits(std::string_view s) noexcept {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// 127.0.0.0/8 in dotted decimal, four parts of at most three digits up to 255.
bool is_loopback_ipv4(std::string_view s) noexcept {
  int parts = 0;
  while (true) {
    const auto dot = s.find('.');
    const std::string_view part = s.substr(0, dot);
    if (!all_digits(part) || part.size() > 3) return false;
    const int v = std::stoi(std::string(part));
    if (v > 255 || (parts == 0 && v != 127)) return false;
    ++parts;
    if (dot == std::string_view::npos) break;
    s.remove_prefix(dot + 1);
  }
  return parts == 4;
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

const char* reason(int status) noexcept {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

}  // namespace

HeadState HeadScanner::feed(std::string_view bytes, const HttpLimits& limits) {
  for (; scanned_ < bytes.size(); ++scanned_) {
    if (bytes[scanned_] != '\n') continue;
    ++lines_;
    // The blank line: this line end follows CR LF CR.
    if (scanned_ >= 3 && bytes.substr(scanned_ - 3, 4) == "\r\n\r\n") {
      end_ = scanned_ + 1;
      return end_ > limits.max_head_bytes ? HeadState::TooLarge : HeadState::Complete;
    }
    // The request line's end is not a header line's.
    if (lines_ > limits.max_header_lines + 1) return HeadState::TooManyLines;
  }
  return bytes.size() > limits.max_head_bytes ? HeadState::TooLarge : HeadState::Incomplete;
}

bool parse_head(std::string_view raw, HttpHead& head) {
  head.raw = std::string(raw);
  const auto eol = raw.find("\r\n");
  const std::string_view line = raw.substr(0, eol);
  const auto sp1 = line.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == 0 || sp2 == std::string_view::npos || sp2 == sp1 + 1 ||
      line.find(' ', sp2 + 1) != std::string_view::npos ||
      line.substr(sp2 + 1).rfind("HTTP/1.", 0) != 0) {
    return false;
  }
  head.method = std::string(line.substr(0, sp1));
  head.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  head.host.clear();
  for (std::size_t pos = eol + 2; pos < raw.size();) {
    const auto end = raw.find("\r\n", pos);
    const std::string_view h = raw.substr(pos, end - pos);
    if (h.size() > 5 && strncasecmp(h.data(), "host:", 5) == 0) {
      head.host = std::string(trim(h.substr(5)));
      break;
    }
    if (end == std::string_view::npos) break;
    pos = end + 2;
  }
  return true;
}

bool is_loopback_host(std::string_view host) noexcept {
  std::string_view name = host;
  std::string_view port;
  if (!host.empty() && host.front() == '[') {
    const auto close = host.find(']');
    if (close == std::string_view::npos) return false;
    name = host.substr(1, close - 1);
    const std::string_view rest = host.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || !all_digits(rest.substr(1)))) return false;
    return name == "::1";
  }
  if (const auto colon = host.rfind(':'); colon != std::string_view::npos) {
    name = host.substr(0, colon);
    port = host.substr(colon + 1);
    if (!all_digits(port)) return false;
  }
  return (name.size() == 9 && strncasecmp(name.data(), "localhost", 9) == 0) ||
         is_loopback_ipv4(name);
}

std::string http_response(int status, std::string_view content_type, std::string_view body,
                          bool head_only) {
  std::string r = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n"
      "Connection: close\r\n\r\n",
      status, reason(status), content_type, body.size());
  if (!head_only) r += body;
  return r;
}

}  // namespace fanout::net
