// Prometheus metrics of the interchange (--metrics-listen): what the loop publishes
// (MetricsSnapshot) and the HTTP endpoint that serves it as /metrics. The metric names and
// what each shows: docs/observability.md.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fanout::ix {

// A copy of the interchange's counters and gauges, taken by the poll loop at most every
// kMetricsPeriod, so a scrape never touches the loop's own state. Plain value.
struct MetricsSnapshot {
  struct JobRow {
    std::uint64_t id = 0;
    std::string name{}, state{};
    bool total_known = false;
    std::uint64_t total = 0, succeeded = 0, failed = 0, items_succeeded = 0, items_failed = 0;
    std::uint64_t attempts_failed = 0, in_flight = 0, queued = 0;
    double minibatches_per_s = 0, items_per_s = 0;  // over the last few seconds
  };
  struct PoolRow {
    std::uint64_t id = 0;
    std::string name{}, node{};
    std::uint64_t workers = 0, held = 0, busy = 0;  // busy: tasks held, up to the workers
    double heartbeat_age_s = 0;                     // since its last frame
  };
  double now_unix = 0;         // when it was taken
  std::vector<JobRow> jobs{};  // running jobs, then the last ones that ended in this process
  std::map<std::string, std::uint64_t> jobs_ended{};  // by final state, since the start
  std::array<std::uint64_t, 9> attempts_by_status{};  // index: proto::AttemptStatus
  std::vector<PoolRow> pools{};
  std::uint64_t pools_lost = 0, pools_left = 0;
  std::uint64_t tasks_dispatched = 0, results = 0, late_results = 0, bad_frames = 0;
  std::uint64_t refused_peers = 0, unauthenticated_cut = 0, window_refused = 0;
  std::uint64_t store_queue_depth = 0, store_commits = 0;
  double store_commit_seconds = 0, store_last_commit_s = 0;
};

// The HTTP endpoint (a net::HttpServer on threads of its own, within its limits; the text
// format is prometheus-cpp's) and the last snapshot. Owned by the Interchange; publish() is
// called from the poll loop, the scrape runs on the server's threads: the snapshot is the only
// state they share, under a mutex.
class MetricsExporter final {
 public:
  // Listens on `address` ("HOST:PORT", as --metrics-listen takes it; IPv6 as [::1]:PORT).
  // Throws Failure{InvalidArgument} when it is not of that form, Failure{Io} naming it when it
  // cannot listen. On a loopback address, only requests whose Host names the loopback are
  // answered (403 otherwise).
  explicit MetricsExporter(const std::string& address);
  ~MetricsExporter();
  MetricsExporter(const MetricsExporter&) = delete;
  MetricsExporter& operator=(const MetricsExporter&) = delete;

  // Replaces the snapshot scrapes read.
  void publish(MetricsSnapshot snapshot);
  // "HOST:PORT" it listens on (the port it got when `address` asked for port 0).
  [[nodiscard]] const std::string& address() const noexcept { return address_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string address_;
};

}  // namespace fanout::ix
