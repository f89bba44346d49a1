// A small HTTP/1.1 server that bounds what an unauthenticated peer can make it hold: header
// bytes and lines, the time to send them, connections per peer and in all. The dashboard and
// the interchange's /metrics are served by it. See docs/security.md ("HTTP servers").
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "fanout/net/http_head.hpp"

namespace fanout::net {

// One thread (the one that calls serve()) accepts connections and reads every request head
// without blocking, within HttpLimits: a head that passes a limit is answered by that thread
// (431, 408) and its connection closed; a peer at max_per_peer connections, or any peer at
// max_connections, has its oldest connection still sending a head closed to make room. Complete
// heads go to `limits.workers` threads, which call the handler; the reading thread sends the
// response (within write_timeout) and closes the connection: one request per connection. So a
// slow or flooding peer costs a descriptor and at most max_head_bytes, for at most
// head_timeout, and never holds a worker; a request whose head arrives at once is answered
// whatever other peers hold open.
//
// Thread rules: construct on any thread; serve() on one thread; stop() from any thread. The
// handler runs on the worker threads, several at a time.
class HttpServer final {
 public:
  // Returns the complete response to send (http_response() makes one). It may throw: the peer
  // then gets a 500.
  using Handler = std::function<std::string(const HttpHead&)>;

  // Binds `host` (a name or a numeric address, IPv6 without brackets) on `port` (0: a free
  // one) and starts the workers. Throws Failure{Io} naming HOST:PORT when it cannot listen.
  HttpServer(const std::string& host, int port, HttpLimits limits, Handler handler);
  ~HttpServer();  // stops; joins the workers
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port it listens on.
  [[nodiscard]] int port() const noexcept;
  // Serves until stop(); then closes every connection. Call once.
  void serve();
  // Makes serve() return soon. Safe from any thread, also before serve() starts.
  void stop() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fanout::net
