// Prometheus metrics of the interchange. See metrics_exporter.hpp and docs/observability.md.
#include "interchange/metrics_exporter.hpp"

#include <fmt/format.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <deque>
#include <iterator>
#include <thread>
#include <utility>

#include "fanout/net/http_server.hpp"
#include "fanout/protocol/messages.hpp"
#include "fanout/util/error.hpp"

namespace fanout::ix {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

// Builds the families of one scrape, in the order docs/observability.md lists them.
class Families {
 public:
  MetricFamily& family(std::string name, std::string help, MetricType type) {
    out_.push_back(MetricFamily{std::move(name), std::move(help), type, {}});
    return out_.back();
  }
  static void add(MetricFamily& f, double v, Labels labels = {}) {
    ClientMetric m;
    m.label = std::move(labels);
    if (f.type == MetricType::Counter) {
      m.counter.value = v;
    } else {
      m.gauge.value = v;
    }
    f.metric.push_back(std::move(m));
  }
  void one(std::string name, std::string help, MetricType type, double v) {
    add(family(std::move(name), std::move(help), type), v);
  }
  std::vector<MetricFamily> take() {
    return {std::make_move_iterator(out_.begin()), std::make_move_iterator(out_.end())};
  }

 private:
  std::deque<MetricFamily> out_;  // a deque: family() hands out references that must stay valid
};

Labels job_labels(const MetricsSnapshot::JobRow& j) {
  return {{"job_id", std::to_string(j.id)}, {"job_name", j.name}};
}

Labels with(Labels l, std::string name, std::string value) {
  l.push_back({std::move(name), std::move(value)});
  return l;
}

void job_families(Families& fs, const MetricsSnapshot& s) {
  constexpr auto kGauge = MetricType::Gauge;
  constexpr auto kCounter = MetricType::Counter;
  auto& state =
      fs.family("fanout_job_info", "a job this interchange runs or ran: its state", kGauge);
  auto& mb = fs.family("fanout_job_minibatches_total",
                       "mini-batches of the job finished, by outcome", kCounter);
  auto& items =
      fs.family("fanout_job_items_total", "items of the job's finished mini-batches", kCounter);
  auto& known = fs.family("fanout_job_minibatches", "mini-batches of the job known so far", kGauge);
  auto& failed_attempts =
      fs.family("fanout_job_attempts_failed_total", "failed attempts of the job", kCounter);
  auto& in_flight =
      fs.family("fanout_job_in_flight", "mini-batches of the job held by pools", kGauge);
  auto& queued =
      fs.family("fanout_job_queued", "mini-batches of the job waiting for a pool", kGauge);
  auto& mb_rate = fs.family("fanout_job_minibatches_per_second",
                            "mini-batches finished per second over the last seconds", kGauge);
  auto& item_rate = fs.family("fanout_job_items_per_second",
                              "items finished per second over the last seconds", kGauge);
  for (const auto& j : s.jobs) {
    const Labels l = job_labels(j);
    Families::add(state, 1, with(l, "state", j.state));
    Families::add(mb, static_cast<double>(j.succeeded), with(l, "outcome", "succeeded"));
    Families::add(mb, static_cast<double>(j.failed), with(l, "outcome", "failed"));
    Families::add(items, static_cast<double>(j.items_succeeded), with(l, "outcome", "succeeded"));
    Families::add(items, static_cast<double>(j.items_failed), with(l, "outcome", "failed"));
    Families::add(known, static_cast<double>(j.total), l);
    Families::add(failed_attempts, static_cast<double>(j.attempts_failed), l);
    Families::add(in_flight, static_cast<double>(j.in_flight), l);
    Families::add(queued, static_cast<double>(j.queued), l);
    Families::add(mb_rate, j.minibatches_per_s, l);
    Families::add(item_rate, j.items_per_s, l);
  }
}

void pool_families(Families& fs, const MetricsSnapshot& s) {
  constexpr auto kGauge = MetricType::Gauge;
  std::uint64_t workers = 0, busy = 0;
  auto& age =
      fs.family("fanout_pool_heartbeat_age_seconds", "seconds since the pool's last frame", kGauge);
  auto& pw = fs.family("fanout_pool_workers", "worker processes of the pool", kGauge);
  auto& pb = fs.family("fanout_pool_busy_workers", "workers of the pool holding a task", kGauge);
  for (const auto& p : s.pools) {
    const Labels l = {{"pool_id", std::to_string(p.id)}, {"pool", p.name}, {"node", p.node}};
    Families::add(age, p.heartbeat_age_s, l);
    Families::add(pw, static_cast<double>(p.workers), l);
    Families::add(pb, static_cast<double>(p.busy), l);
    workers += p.workers;
    busy += p.busy;
  }
  fs.one("fanout_pools", "pools registered", kGauge, static_cast<double>(s.pools.size()));
  fs.one("fanout_workers", "worker processes of the registered pools", kGauge,
         static_cast<double>(workers));
  fs.one("fanout_workers_busy", "workers holding a task", kGauge, static_cast<double>(busy));
  auto& gone = fs.family("fanout_pools_gone_total",
                         "pools dropped: lost (silent or disconnected) or left (said goodbye)",
                         MetricType::Counter);
  Families::add(gone, static_cast<double>(s.pools_lost), {{"how", "lost"}});
  Families::add(gone, static_cast<double>(s.pools_left), {{"how", "left"}});
}

void totals_families(Families& fs, const MetricsSnapshot& s) {
  constexpr auto kGauge = MetricType::Gauge;
  constexpr auto kCounter = MetricType::Counter;
  std::uint64_t in_flight = 0, queued = 0, running = 0;
  for (const auto& j : s.jobs) {
    in_flight += j.in_flight;
    queued += j.queued;
    running += j.state == "running" ? 1 : 0;
  }
  auto& jobs =
      fs.family("fanout_jobs", "jobs by state: running now, ended since the start", kGauge);
  Families::add(jobs, static_cast<double>(running), {{"state", "running"}});
  for (const auto& [st, n] : s.jobs_ended)
    Families::add(jobs, static_cast<double>(n), {{"state", st}});
  fs.one("fanout_in_flight", "mini-batches held by pools, all jobs", kGauge,
         static_cast<double>(in_flight));
  fs.one("fanout_queued", "mini-batches waiting for a pool, all jobs", kGauge,
         static_cast<double>(queued));
  auto& attempts = fs.family("fanout_attempts_total", "attempts ended, by status", kCounter);
  for (std::size_t i = 1; i < s.attempts_by_status.size(); ++i) {
    Families::add(attempts, static_cast<double>(s.attempts_by_status[i]),
                  {{"status", proto::to_string(static_cast<proto::AttemptStatus>(i))}});
  }
  fs.one("fanout_tasks_dispatched_total", "tasks sent to pools", kCounter,
         static_cast<double>(s.tasks_dispatched));
  fs.one("fanout_results_total", "results received from pools", kCounter,
         static_cast<double>(s.results));
  fs.one("fanout_late_results_total", "results for tasks no longer held (dropped)", kCounter,
         static_cast<double>(s.late_results));
  fs.one("fanout_bad_frames_total", "frames that failed to decode", kCounter,
         static_cast<double>(s.bad_frames));
  fs.one("fanout_refused_peers_total", "connections the authentication handler refused", kCounter,
         static_cast<double>(s.refused_peers));
  fs.one("fanout_unauthenticated_cut_total",
         "connections cut for sending too much before authenticating", kCounter,
         static_cast<double>(s.unauthenticated_cut));
  fs.one("fanout_window_refused_total", "mini-batches refused beyond a client's window", kCounter,
         static_cast<double>(s.window_refused));
  fs.one("fanout_store_write_queue_depth", "store operations queued and not yet committed", kGauge,
         static_cast<double>(s.store_queue_depth));
  fs.one("fanout_store_commits_total", "store write transactions committed", kCounter,
         static_cast<double>(s.store_commits));
  fs.one("fanout_store_commit_seconds_total", "seconds spent in store write transactions", kCounter,
         s.store_commit_seconds);
  fs.one("fanout_store_last_commit_seconds", "duration of the last store write transaction", kGauge,
         s.store_last_commit_s);
}

}  // namespace

struct MetricsExporter::Impl {
  // Answers one request read within net::HttpServer's limits (on one of its worker threads).
  std::string answer(const net::HttpHead& h) const {
    const bool head_only = h.method == "HEAD";
    if (h.method != "GET" && !head_only) {
      return net::http_response(405, "text/plain", "405: only GET /metrics is served\n");
    }
    // On a loopback address, a page of another site whose name resolves to 127.0.0.1 (DNS
    // rebinding) would read the job names: only loopback names are answered there.
    if (loopback && !net::is_loopback_host(h.host)) {
      return net::http_response(403, "text/plain",
                                "403: this endpoint listens on the loopback and answers only "
                                "requests addressed to 127.0.0.1, localhost or [::1]\n");
    }
    if (h.target.substr(0, h.target.find('?')) != "/metrics") {
      return net::http_response(404, "text/plain", "404: the metrics are at /metrics\n");
    }
    std::vector<MetricFamily> families;
    {
      std::lock_guard lk(mu);
      Families fs;
      totals_families(fs, snapshot);
      job_families(fs, snapshot);
      pool_families(fs, snapshot);
      families = fs.take();
    }
    return net::http_response(200, "text/plain; version=0.0.4; charset=utf-8",
                              prometheus::TextSerializer().Serialize(families), head_only);
  }

  mutable std::mutex mu;  // guards snapshot
  MetricsSnapshot snapshot{};
  bool loopback = false;  // listens on a loopback address
  // Last: stopped and joined first, while what the handler reads is still there.
  std::unique_ptr<net::HttpServer> server;
  std::thread thread;  // runs server->serve()
};

MetricsExporter::MetricsExporter(const std::string& address) : impl_(std::make_unique<Impl>()) {
  // The HTTP server takes a comma-separated list and would listen on every address in it, when
  // one was asked for and only the first is logged: refused.
  if (address.find_first_of(", \t") != std::string::npos) {
    throw Failure(Error{ErrorCode::InvalidArgument,
                        fmt::format("--metrics-listen: expected one HOST:PORT (got '{}'): a "
                                    "list of addresses is not taken",
                                    address)});
  }
  const auto colon = address.rfind(':');
  const std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
  if (colon == std::string::npos || colon == 0 || port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535) {
    throw Failure(Error{ErrorCode::InvalidArgument,
                        fmt::format("--metrics-listen: expected HOST:PORT (got '{}')", address)});
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  impl_->loopback = host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
  try {
    impl_->server = std::make_unique<net::HttpServer>(
        host, std::stoi(port), net::HttpLimits{},
        [impl = impl_.get()](const net::HttpHead& h) { return impl->answer(h); });
  } catch (const Failure& f) {
    throw Failure(
        Error{ErrorCode::Io, fmt::format("--metrics-listen {}: {}", address, f.error().message)});
  }
  address_ = fmt::format("{}:{}", address.substr(0, colon), impl_->server->port());
  impl_->thread = std::thread([impl = impl_.get()] { impl->server->serve(); });
}

MetricsExporter::~MetricsExporter() {
  impl_->server->stop();
  impl_->thread.join();
}

void MetricsExporter::publish(MetricsSnapshot snapshot) {
  std::lock_guard lk(impl_->mu);
  impl_->snapshot = std::move(snapshot);
}

}  // namespace fanout::ix
