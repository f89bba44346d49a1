// `fanout dashboard`: a read-only local web app over a store (the job list, a job's live page,
// compare and tune), served with cpp-httplib. The pages are report/dashboard_pages.hpp's; what
// each shows and how it is protected: docs/observability.md.
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
  std::string token{};                    // required of every request when not empty
  bool generate_token = false;            // make a token and print it once
  std::string ready_file{};               // written once listening: "url=http://HOST:PORT/"
};

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

// Serves the dashboard until SIGINT or SIGTERM. Refuses a non-loopback address without a token
// (exit 2). Returns the exit code: 0 after a signal, 2 bad options, 1 cannot listen.
int run_dashboard(DashboardOptions opts, const Logger& log);

}  // namespace fanout::client
