// The pure part of net::HttpServer: the limits on what a peer may send before it is answered,
// where a request head ends, what it says, and a response's bytes. No I/O, so each bound is
// table-tested. What the limits defend against: docs/security.md ("HTTP servers").
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace fanout::net {

// What one HTTP server lets its peers make it hold. Every bound applies before a request is
// routed, so before any token is checked.
struct HttpLimits {
  std::size_t max_head_bytes = 32 * 1024;           // request line and headers, blank line included
  std::size_t max_header_lines = 100;               // header lines after the request line
  std::chrono::milliseconds head_timeout{10'000};   // from accept to the head's blank line
  std::chrono::milliseconds write_timeout{30'000};  // from the answer to its last byte sent
  std::size_t max_connections = 256;                // open at once, all peers together
  std::size_t max_per_peer = 64;                    // open at once from one address
  std::size_t workers = 2;                          // threads answering complete heads
  std::size_t max_queued = 64;  // complete heads waiting for a worker; more are answered 503
};

// A complete request head, within the limits, as the server hands it to its handler.
struct HttpHead {
  std::string raw{};     // as received: the request line, the headers and the blank line
  std::string method{};  // from the request line
  std::string target{};  // from the request line: the path and the query, as sent
  std::string host{};    // the Host header's value; empty when there is none
  std::string peer{};    // the peer's numeric address
  int peer_port = 0;
  std::string local{};  // the address the connection reached
  int local_port = 0;
};

// Where a head being received stands.
enum class HeadState { Incomplete, Complete, TooLarge, TooManyLines };

// Follows a head as its bytes arrive, looking at each byte once (a peer sending one byte at a
// time costs linear time, not quadratic). Plain value, one per connection.
class HeadScanner final {
 public:
  // `bytes`: everything received so far (the previous call's bytes and more). Complete once the
  // blank line (CR LF CR LF) arrived; end() is then the head's length, and bytes after it are
  // not the head's. TooLarge when more than limits.max_head_bytes arrived without it, or it ends
  // past that; TooManyLines when more than limits.max_header_lines header lines arrived.
  HeadState feed(std::string_view bytes, const HttpLimits& limits);
  [[nodiscard]] std::size_t end() const noexcept { return end_; }

 private:
  std::size_t scanned_ = 0;  // bytes already looked at
  std::size_t lines_ = 0;    // line ends seen
  std::size_t end_ = 0;
};

// Reads the request line ("METHOD TARGET HTTP/x.y") and the Host header of a complete head into
// `head` (raw, method, target, host). False when the request line is not of that form.
[[nodiscard]] bool parse_head(std::string_view raw, HttpHead& head);

// Whether `host`, a Host header's value, names this machine's loopback: localhost, an address
// of 127.0.0.0/8 or [::1], with or without a port. A DNS name that resolves to the loopback
// (what DNS rebinding uses) is not one.
[[nodiscard]] bool is_loopback_host(std::string_view host) noexcept;

// A complete response with Connection: close and Cache-Control: no-store: the status line,
// Content-Type, Content-Length and `body` (left out when `head_only`, as HEAD asks).
[[nodiscard]] std::string http_response(int status, std::string_view content_type,
                                        std::string_view body, bool head_only = false);

}  // namespace fanout::net
