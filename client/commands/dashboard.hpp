// `fanout dashboard`: a read-only local web app over a store (the job list, a job's live page,
// compare and tune): net::HttpServer reads each request within its limits, cpp-httplib routes it.
// The pages are report/dashboard_pages.hpp's; what each shows and how it is protected:
// docs/observability.md and docs/security.md ("HTTP servers").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fanout/util/expected.hpp"
#include "fanout/util/log.hpp"

namespace fanout::client {

struct DashboardOptions {
  std::string db{};                       // the store (already defaulted by main)
  std::string listen = "127.0.0.1:8470";  // HOST:PORT; port 0: any free port
  std::string token_file{};               // --token-file: the token, in a private file
  bool token_on_command_line = false;     // --token was given: refused, `ps` shows it
  std::string token{};          // required of every request when not empty: from token_file, the
                                // environment (kTokenEnv) or generate_token, never the command line
  bool generate_token = false;  // make a token and print it once
  std::string ready_file{};     // written once listening: "url=http://HOST:PORT/"
};

// The environment variable a token may come from, when there is no --token-file.
inline constexpr const char* kTokenEnv = "FANOUT_DASHBOARD_TOKEN";

// Reads a token file: a regular file (not a link) owned by the user, with no access for group
// or others (mode 0600 or 0400), holding the token (printable, no spaces, at most 1 KiB; a
// trailing newline is dropped). Errors: InvalidArgument naming --token-file, the path and what
// is wrong (and the chmod that fixes the mode); NotFound when it cannot be opened.
[[nodiscard]] Expected<std::string> read_token_file(const std::string& path);

// Where the dashboard listens, parsed from --listen.
struct ListenAddress {
  std::string host{};
  int port = 0;
  bool loopback = false;  // 127.0.0.0/8, ::1 or localhost
};

// Parses "HOST:PORT" ("[::1]:8470" for IPv6). Errors: InvalidArgument naming --listen and the
// value.
[[nodiscard]] Expected<ListenAddress> parse_listen(const std::string& listen);

// Whether the request's token (a `Bearer` Authorization header, a `token` query parameter or
// the `fanout_token` cookie; empty when none) is `expected`, compared in constant time.
[[nodiscard]] bool token_matches(const std::string& given, const std::string& expected) noexcept;

// Serves the dashboard until SIGINT or SIGTERM. Refuses a non-loopback address without a token,
// --token, and a token file read_token_file() refuses (exit 2). Without a token, answers only
// requests whose Host names the loopback (403 otherwise: DNS rebinding). Returns the exit code:
// 0 after a signal, 2 bad options, 1 cannot listen.
int run_dashboard(DashboardOptions opts, const Logger& log);

}  // namespace fanout::client
