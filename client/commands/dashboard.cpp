// fanout dashboard. See dashboard.hpp and docs/observability.md.
#include "client/commands/dashboard.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "fanout/net/http_server.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/report/dashboard_pages.hpp"
#include "fanout/report/report_data.hpp"
#include "fanout/report/status_text.hpp"
#include "fanout/report/tune.hpp"
#include "fanout/store/job_status.hpp"
#include "fanout/store/reader.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/fd.hpp"
#include "fanout/util/json.hpp"

namespace fanout::client {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kListLimit = 500;  // jobs the list and the compare form show

// Answers from the store, each kept until it is older than a few times what reading it cost
// (and at least `min_age`), so many open pages and fast polling read the store no more often
// than that. One read at a time: the dashboard adds at most one reader to the store.
class StoreCache final {
 public:
  struct Answer {
    int status = 200;
    std::string body{};
  };
  Answer get(const std::string& key, Clock::duration min_age, const std::function<Answer()>& read) {
    std::lock_guard lk(mu_);
    const auto now = Clock::now();
    if (auto it = entries_.find(key); it != entries_.end()) {
      if (now - it->second.at < std::max(min_age, 5 * it->second.cost)) return it->second.answer;
    }
    Entry e{.at = now, .cost = {}, .answer = read()};
    e.cost = Clock::now() - now;
    if (entries_.size() > 256) entries_.clear();  // bounded: old pages are simply read again
    return (entries_[key] = std::move(e)).answer;
  }

 private:
  struct Entry {
    Clock::time_point at{};
    Clock::duration cost{};
    Answer answer{};
  };
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

std::string random_token() {
  std::random_device rd;
  std::string t;
  for (int i = 0; i < 4; ++i) t += fmt::format("{:08x}", rd());
  return t;
}

// The token a request carries, from its Authorization header, its query or its cookie.
std::string request_token(const httplib::Request& req) {
  const std::string auth = req.get_header_value("Authorization");
  if (auth.rfind("Bearer ", 0) == 0) return auth.substr(7);
  if (req.has_param("token")) return req.get_param_value("token");
  const std::string cookies = req.get_header_value("Cookie");
  const std::string key = "fanout_token=";
  for (std::size_t pos = 0; pos < cookies.size();) {
    std::size_t end = cookies.find(';', pos);
    if (end == std::string::npos) end = cookies.size();
    std::string c = cookies.substr(pos, end - pos);
    c.erase(0, c.find_first_not_of(' '));
    if (c.rfind(key, 0) == 0) return c.substr(key.size());
    pos = end + 1;
  }
  return {};
}

std::optional<std::uint64_t> job_id_of(const httplib::Request& req) {
  try {
    return std::stoull(req.matches[1].str());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

int status_of(const Error& e) { return e.code == ErrorCode::NotFound ? 404 : 500; }

// The routes: pages and their JSON, all read-only, all through the cache.
class Routes final {
 public:
  explicit Routes(std::string db) : db_(std::move(db)) {}

  StoreCache::Answer jobs_page(const std::string& state, const std::string& name) {
    return cache_.get("list/" + state + "/" + name, std::chrono::seconds(2), [&] {
      auto jobs = history(state, name);
      if (!jobs) return error_page("fanout jobs", jobs.error());
      return StoreCache::Answer{200, report::dashboard_jobs_page(*jobs, state, name)};
    });
  }
  StoreCache::Answer jobs_json(const std::string& state, const std::string& name) {
    return cache_.get("api/list/" + state + "/" + name, std::chrono::seconds(1), [&] {
      auto jobs = history(state, name);
      if (!jobs) return error_json(jobs.error());
      return StoreCache::Answer{200, report::dashboard_jobs_json(*jobs)};
    });
  }
  StoreCache::Answer job_page(std::uint64_t id) {
    return cache_.get(fmt::format("job/{}", id), std::chrono::seconds(2), [&] {
      auto d = report::read_report_data(db_, id);
      if (!d) return error_page(fmt::format("fanout job {}", id), d.error());
      return StoreCache::Answer{200, report::dashboard_job_page(*d)};
    });
  }
  StoreCache::Answer figures_json(std::uint64_t id) {
    return cache_.get(fmt::format("api/figures/{}", id), std::chrono::seconds(2), [&] {
      auto d = report::read_report_data(db_, id);
      if (!d) return error_json(d.error());
      return StoreCache::Answer{200, report::dashboard_figures_json(*d)};
    });
  }
  StoreCache::Answer status_json(std::uint64_t id) {
    return cache_.get(fmt::format("api/status/{}", id), std::chrono::milliseconds(500), [&] {
      auto s = store::read_job_status(db_, id);
      if (!s) return error_json(s.error());
      return StoreCache::Answer{200, report::format_status_json(*s)};
    });
  }
  StoreCache::Answer tune_page(std::uint64_t id) {
    return cache_.get(fmt::format("tune/{}", id), std::chrono::seconds(2), [&] {
      auto d = report::read_report_data(db_, id);
      if (!d) return error_page(fmt::format("fanout tune {}", id), d.error());
      return StoreCache::Answer{200, report::dashboard_tune_page(*d, report::tune(*d, {}))};
    });
  }
  StoreCache::Answer compare_page(const std::vector<std::uint64_t>& ids) {
    std::string key = "compare";
    for (auto id : ids) key += fmt::format("/{}", id);
    return cache_.get(key, std::chrono::seconds(2), [&] {
      auto choices = history("", "");
      if (!choices) return error_page("fanout compare", choices.error());
      std::vector<report::ReportData> jobs;
      for (auto id : ids) {
        auto d = report::read_report_data(db_, id);
        if (!d) return error_page("fanout compare", d.error());
        jobs.push_back(std::move(*d));
      }
      return StoreCache::Answer{200, report::dashboard_compare_page(*choices, jobs)};
    });
  }

 private:
  Expected<std::vector<store::JobSummary>> history(const std::string& state,
                                                   const std::string& name) {
    try {
      store::StoreReader reader(db_);
      auto jobs = reader.history(name.empty() ? kListLimit : 0, state);
      if (!name.empty()) {
        std::erase_if(jobs, [&](const auto& j) { return j.name.find(name) == std::string::npos; });
        if (jobs.size() > kListLimit) jobs.resize(kListLimit);
      }
      return jobs;
    } catch (const Failure& f) {
      return make_error(f.error().code, f.error().message);
    }
  }
  static StoreCache::Answer error_page(const std::string& title, const Error& e) {
    return {status_of(e), report::dashboard_message_page(title, e.message)};
  }
  static StoreCache::Answer error_json(const Error& e) {
    std::string j = "{\"error\":";
    json_quote(j, e.message);
    return {status_of(e), j + "}"};
  }

  std::string db_;
  StoreCache cache_;
};

void reply(httplib::Response& res, const StoreCache::Answer& a, const char* type) {
  res.status = a.status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(a.body, type);
}

constexpr const char* kHtml = "text/html; charset=utf-8";
constexpr const char* kJson = "application/json";

// A head that net::HttpServer read within its limits, as httplib reads a socket; what httplib
// writes is collected as the response. Not thread-safe: one per request.
class HeadStream final : public httplib::Stream {
 public:
  explicit HeadStream(const net::HttpHead& head) : head_(head) {}
  bool is_readable() const override { return pos_ < head_.raw.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const std::size_t n = std::min(size, head_.raw.size() - pos_);
    std::memcpy(ptr, head_.raw.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = head_.peer;
    port = head_.peer_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = head_.local;
    port = head_.local_port;
  }
  // No socket: httplib never waits on one here.
  socket_t socket() const override { return INVALID_SOCKET; }
  std::string take() { return std::move(out_); }

 private:
  const net::HttpHead& head_;
  std::size_t pos_ = 0;
  std::string out_{};
};

// httplib as a router only: its process_request (protected, hence this class) parses a head
// net::HttpServer read and answers it through a HeadStream. httplib's own socket loop is not
// used: Debian 12's build (0.11.4, compiled with its defaults) bounds neither the number of
// header lines nor the time a head may take, and holds a thread per connection, so eight peers
// sending header lines grew the dashboard by 1.4 GB and twelve slow ones starved it.
class HeadRouter final : public httplib::Server {
 public:
  // Thread-safe once the routes are set: httplib's own threads call process_request the same way.
  std::string answer(const net::HttpHead& head) {
    HeadStream s(head);
    bool closed = false;
    process_request(s, /*close_connection=*/true, closed, {});
    return s.take();
  }
};

// Every route, behind the token check when there is a token, and behind the Host check when
// there is none: a page of another site whose name resolves to 127.0.0.1 (DNS rebinding) sends
// its own name as Host, so only loopback names reach a tokenless dashboard.
void add_routes(httplib::Server& svr, Routes& r, const std::string& token) {
  svr.set_pre_routing_handler([token](const httplib::Request& req, httplib::Response& res) {
    if (token.empty()) {
      const std::string host = req.get_header_value("Host");
      if (net::is_loopback_host(host)) return httplib::Server::HandlerResponse::Unhandled;
      res.status = 403;
      res.set_content(fmt::format("403: this dashboard has no token, so it answers only requests "
                                  "addressed to 127.0.0.1, localhost or [::1] (Host: '{}'); "
                                  "give it a --token-file to serve other names\n",
                                  host.substr(0, 200)),
                      "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!token_matches(request_token(req), token)) {
      res.status = 401;
      res.set_header("WWW-Authenticate", "Bearer");
      res.set_content("401: this dashboard needs its token (?token=T or Authorization: Bearer T)\n",
                      "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    // A page opened with ?token= keeps it in a cookie, so its links and polling carry it.
    if (req.has_param("token")) {
      res.set_header("Set-Cookie", "fanout_token=" + token + "; HttpOnly; SameSite=Strict; Path=/");
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  auto param = [](const httplib::Request& req, const char* k) {
    return req.has_param(k) ? req.get_param_value(k) : std::string();
  };
  svr.Get("/", [&r, param](const httplib::Request& req, httplib::Response& res) {
    reply(res, r.jobs_page(param(req, "state"), param(req, "name")), kHtml);
  });
  svr.Get("/api/jobs", [&r, param](const httplib::Request& req, httplib::Response& res) {
    reply(res, r.jobs_json(param(req, "state"), param(req, "name")), kJson);
  });
  auto by_id = [](std::function<StoreCache::Answer(std::uint64_t)> fn, const char* type) {
    return [fn = std::move(fn), type](const httplib::Request& req, httplib::Response& res) {
      auto id = job_id_of(req);
      if (!id) {
        res.status = 404;
        return;
      }
      reply(res, fn(*id), type);
    };
  };
  svr.Get(R"(/jobs/(\d+))", by_id([&r](std::uint64_t id) { return r.job_page(id); }, kHtml));
  svr.Get(R"(/jobs/(\d+)/tune)", by_id([&r](std::uint64_t id) { return r.tune_page(id); }, kHtml));
  svr.Get(R"(/api/jobs/(\d+)/status)",
          by_id([&r](std::uint64_t id) { return r.status_json(id); }, kJson));
  svr.Get(R"(/api/jobs/(\d+)/figures)",
          by_id([&r](std::uint64_t id) { return r.figures_json(id); }, kJson));
  // Browsers ask for it on every page: no icon, and no error in their console.
  svr.Get("/favicon.ico",
          [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
  svr.Get("/compare", [&r](const httplib::Request& req, httplib::Response& res) {
    std::vector<std::uint64_t> ids;
    for (std::size_t i = 0; i < req.get_param_value_count("jobs"); ++i) {
      try {
        ids.push_back(std::stoull(req.get_param_value("jobs", i)));
      } catch (const std::exception&) {
        res.status = 400;
        res.set_content("400: jobs=" + req.get_param_value("jobs", i) + ": not a job id\n",
                        "text/plain");
        return;
      }
    }
    reply(res, r.compare_page(ids), kHtml);
  });
}

}  // namespace

Expected<ListenAddress> parse_listen(const std::string& listen) {
  const auto colon = listen.rfind(':');
  auto bad = [&](const char* why) {
    return make_error(ErrorCode::InvalidArgument,
                      fmt::format("--listen: expected HOST:PORT, {} (got '{}')", why, listen));
  };
  if (colon == std::string::npos || colon == 0) return bad("with a host");
  ListenAddress a;
  a.host = listen.substr(0, colon);
  if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']') {
    a.host = a.host.substr(1, a.host.size() - 2);
  }
  const std::string port = listen.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return bad("the port a number");
  }
  a.port = std::stoi(port);
  if (a.port > 65535) return bad("the port at most 65535");
  a.loopback = a.host == "localhost" || a.host == "::1" || a.host.rfind("127.", 0) == 0;
  return a;
}

Expected<std::string> read_token_file(const std::string& path) {
  auto bad = [&](const std::string& why) {
    return make_error(ErrorCode::InvalidArgument, fmt::format("--token-file {}: {}", path, why));
  };
  // No link is followed, and the checks are on the descriptor read: what is checked is read.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ELOOP) return bad("is a symbolic link; name the file itself");
    return make_error(ErrorCode::NotFound,
                      fmt::format("--token-file {}: cannot open: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return bad(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return bad("is not a regular file");
  if (st.st_uid != ::geteuid()) {
    return bad(
        fmt::format("is owned by uid {}, not by you (uid {}): whoever owns it chooses "
                    "the token",
                    st.st_uid, ::geteuid()));
  }
  if ((st.st_mode & 077) != 0) {
    return bad(fmt::format("mode {:04o} lets other users read or change it; chmod 600 {}",
                           st.st_mode & 07777, path));
  }
  constexpr std::size_t kMaxToken = 1024;
  std::string token(kMaxToken + 2, '\0');
  const ssize_t n = ::read(fd.get(), token.data(), token.size());
  if (n < 0) return bad(std::strerror(errno));
  token.resize(static_cast<std::size_t>(n));
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty()) return bad("is empty; put the token in it");
  if (token.size() > kMaxToken) return bad(fmt::format("holds over {} bytes", kMaxToken));
  if (!std::all_of(token.begin(), token.end(), [](char c) { return c > ' ' && c < 127; })) {
    return bad("the token must be printable ASCII without spaces, on one line");
  }
  return token;
}

bool token_matches(const std::string& given, const std::string& expected) noexcept {
  if (expected.empty() || given.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  }
  return diff == 0;
}

namespace {

// The token, from --token-file, else the environment, else generated when asked; never from the
// command line, which `ps` shows every user. Returns false (and says why) on a bad source.
bool resolve_token(DashboardOptions& opts) {
  if (opts.token_on_command_line) {
    std::fprintf(stderr,
                 "error: dashboard: --token puts the token on the command line, where `ps` shows "
                 "it to every user of this machine; put it in a file only you can read "
                 "(--token-file PATH, mode 0600) or in the environment (%s)\n",
                 kTokenEnv);
    return false;
  }
  if (!opts.token_file.empty()) {
    auto t = read_token_file(opts.token_file);
    if (!t) {
      std::fprintf(stderr, "error: dashboard: %s\n", t.error().message.c_str());
      return false;
    }
    opts.token = std::move(*t);
  } else if (const char* env = std::getenv(kTokenEnv); env != nullptr && *env != '\0') {
    opts.token = env;
    ::unsetenv(kTokenEnv);  // read once; nothing this process starts inherits it
  }
  if (opts.generate_token && opts.token.empty()) opts.token = random_token();
  return true;
}

}  // namespace

int run_dashboard(DashboardOptions opts, const Logger& log) {
  auto addr = parse_listen(opts.listen);
  if (!addr) {
    std::fprintf(stderr, "error: dashboard: %s\n", addr.error().message.c_str());
    return proto::kExitUsage;
  }
  if (!resolve_token(opts)) return proto::kExitUsage;
  if (!addr->loopback && opts.token.empty()) {
    std::fprintf(stderr,
                 "error: dashboard: --listen %s is not a loopback address: anyone who reaches "
                 "it could read every job of the store; give --token-file PATH, %s or "
                 "--generate-token\n",
                 opts.listen.c_str(), kTokenEnv);
    return proto::kExitUsage;
  }
  // SIGINT and SIGTERM are taken by a thread of their own (sigwait), which stops the server:
  // blocked here, before the server's threads start, so they inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  HeadRouter router;
  Routes routes(opts.db);
  add_routes(router, routes, opts.token);
  // Store reads are one at a time (StoreCache): two workers keep a cheap answer (a 401, a
  // cached page) from waiting behind a slow read.
  net::HttpLimits limits;
  limits.workers = 2;
  std::unique_ptr<net::HttpServer> http;
  try {
    http = std::make_unique<net::HttpServer>(
        addr->host, addr->port, limits,
        [&router](const net::HttpHead& head) { return router.answer(head); });
  } catch (const Failure& f) {
    std::fprintf(stderr, "error: dashboard: --listen %s: %s\n", opts.listen.c_str(),
                 f.error().message.c_str());
    return proto::kExitInfra;
  }
  const bool v6 = addr->host.find(':') != std::string::npos;
  const std::string url =
      fmt::format("http://{}{}{}:{}/", v6 ? "[" : "", addr->host, v6 ? "]" : "", http->port());
  std::printf("fanout dashboard of %s: %s%s\n", opts.db.c_str(), url.c_str(),
              opts.generate_token ? ("?token=" + opts.token).c_str() : "");
  std::fflush(stdout);
  if (!opts.ready_file.empty()) {
    if (auto w = write_file_atomic(opts.ready_file, "url=" + url + "\n"); !w) {
      std::fprintf(stderr, "error: dashboard: %s\n", w.error().message.c_str());
      return proto::kExitInfra;
    }
  }
  log->info("dashboard listening on {}", url);
  std::atomic<bool> signalled{false};
  std::thread stopper([&http, &signalled, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    signalled = true;
    http->stop();
  });
  http->serve();
  // The server failed rather than being stopped: wake the stopper, which still waits.
  if (!signalled) pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  if (!signalled) {
    std::fprintf(stderr, "error: dashboard: the server on %s stopped\n", url.c_str());
    return proto::kExitInfra;
  }
  return proto::kExitOk;
}

}  // namespace fanout::client
