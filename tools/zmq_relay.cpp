// fanout-zmq-relay: the transport ceiling for `fanout perf` (docs/performance.md). Three
// processes on TCP loopback relay one small message per task, with nothing else done:
//   client DEALER -> ROUTER relay ROUTER <- DEALER worker
// The client keeps up to --window tasks in flight; the relay forwards each task to the worker
// and each reply to the client; the worker answers every task. Prints "rate=<tasks per second>".
// Uses fanout's own socket wrappers (src/fanout/net), so the ceiling includes what they cost.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "fanout/net/socket.hpp"

namespace {

using fanout::net::Context;
using fanout::net::Message;
using fanout::net::Poller;
using fanout::net::Socket;

// Reads the ready endpoints from a pipe written by the relay.
std::string read_line(int fd) {
  std::string s;
  char c;
  while (::read(fd, &c, 1) == 1 && c != '\n') s.push_back(c);
  return s;
}

int relay(int ready_fd) {
  Context ctx;
  Socket front(ctx, Socket::Kind::Router);
  Socket back(ctx, Socket::Kind::Router);
  std::string line = front.bind("tcp://127.0.0.1:*") + " " + back.bind("tcp://127.0.0.1:*") + "\n";
  if (::write(ready_fd, line.data(), line.size()) < 0) return 1;
  ::close(ready_fd);
  Poller poller;
  poller.add(front);
  poller.add(back);
  Message m;
  std::string client, worker;
  while (true) {
    poller.wait(std::chrono::milliseconds(1000));
    for (int i = 0; i < 4096 && front.recv(m); ++i) {
      client = m.peer;
      if (m.frame == "stop") {
        if (!worker.empty()) (void)back.send_to(worker, "stop", false);
        return 0;
      }
      if (!worker.empty()) (void)back.send_to(worker, m.frame, false);
    }
    for (int i = 0; i < 4096 && back.recv(m); ++i) {
      if (m.frame == "hello") {
        worker = m.peer;
        continue;
      }
      (void)front.send_to(client, m.frame, false);
    }
  }
}

int worker(const std::string& ep) {
  Context ctx;
  Socket s(ctx, Socket::Kind::Dealer);
  s.connect(ep);
  (void)s.send("hello", false);
  Poller poller;
  poller.add(s);
  Message m;
  while (true) {
    poller.wait(std::chrono::milliseconds(1000));
    while (s.recv(m)) {
      if (m.frame == "stop") return 0;
      (void)s.send(m.frame, false);  // the reply: the task's own 8 bytes back
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fanout-zmq-relay: the 3-process ZeroMQ relay ceiling"};
  std::uint64_t tasks = 200000;
  std::uint64_t window = 10000;
  app.add_option("--tasks", tasks, "messages to relay")->capture_default_str();
  app.add_option("--window", window, "messages in flight")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  int fds[2];
  if (::pipe(fds) != 0) return 1;
  // No ZeroMQ context exists before these forks: each process makes its own.
  pid_t relay_pid = ::fork();
  if (relay_pid == 0) {
    ::close(fds[0]);
    ::_exit(relay(fds[1]));
  }
  ::close(fds[1]);
  const std::string eps = read_line(fds[0]);
  ::close(fds[0]);
  const auto sp = eps.find(' ');
  if (sp == std::string::npos) return 1;
  const std::string front_ep = eps.substr(0, sp), back_ep = eps.substr(sp + 1);
  pid_t worker_pid = ::fork();
  if (worker_pid == 0) ::_exit(worker(back_ep));

  int rc = 0;
  {
    Context ctx;
    Socket s(ctx, Socket::Kind::Dealer);
    s.connect(front_ep);
    Poller poller;
    poller.add(s);
    Message m;
    // Warm up: one round trip proves the path is connected before the clock starts.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    bool warm = false;
    while (!warm && std::chrono::steady_clock::now() < deadline) {
      (void)s.send("warmup00", false);
      poller.wait(std::chrono::milliseconds(100));
      while (s.recv(m)) warm = true;
    }
    if (!warm) {
      std::fprintf(stderr, "fanout-zmq-relay: no reply within 10 s\n");
      rc = 1;
    } else {
      while (s.recv(m)) {
      }
      const auto t0 = std::chrono::steady_clock::now();
      std::uint64_t sent = 0, got = 0;
      char task[8];
      while (got < tasks) {
        while (sent < tasks && sent - got < window) {
          std::memcpy(task, &sent, sizeof task);
          if (s.send(std::string_view(task, sizeof task)) != fanout::net::SendResult::Sent) break;
          ++sent;
        }
        poller.wait(std::chrono::milliseconds(100));
        while (s.recv(m)) ++got;
      }
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("tasks=%llu seconds=%.4f rate=%.1f\n", static_cast<unsigned long long>(tasks),
                  secs, static_cast<double>(tasks) / secs);
    }
    (void)s.send("stop", false);
    s.set_linger(std::chrono::milliseconds(1000));
  }
  int st = 0;
  ::waitpid(relay_pid, &st, 0);
  ::waitpid(worker_pid, &st, 0);
  return rc;
}
