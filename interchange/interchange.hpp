// The interchange: broker and master of jobs. Clients submit mini-batches on one ROUTER, pools
// take tasks and return results on another; the interchange decides retries, enforces
// thresholds, watches pool liveness and is the only writer of the store. See docs/architecture.md.
// Not thread-safe: run() owns the sockets; stop() may be called from a signal handler.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fanout/net/socket.hpp"
#include "fanout/protocol/messages.hpp"
#include "fanout/store/task_store.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/log.hpp"
#include "interchange/report_writer.hpp"

namespace fanout::ix {

struct Options {
  std::string client_endpoint = "tcp://127.0.0.1:*";
  std::string pool_endpoint = "tcp://127.0.0.1:*";
  std::string db_path{};
  std::string ready_file{};  // written once bound: "client=...\npool=...\npid=...\n"
  std::chrono::milliseconds heartbeat_period{2000};
  std::chrono::milliseconds heartbeat_threshold{10000};
  std::chrono::milliseconds stats_interval{30000};
  std::chrono::milliseconds progress_interval{250};
  // How often a running job's logs/job_progress_overview.*.txt is rewritten.
  std::chrono::milliseconds overview_interval{10000};
  std::uint32_t window = 20000;    // mini-batches a client may have queued per job
  std::uint32_t max_batch = 1024;  // tasks per TaskBatch frame
  bool exit_when_idle = false;     // embedded mode: exit once every job ended and clients left
  std::string shutdown_token{};    // a client Shutdown must carry it; empty: refused
};

// Counters logged at INFO every stats_interval when they changed (STYLE.md section 7).
struct LoopStats {
  std::uint64_t frames_in = 0, frames_out = 0, tasks_dispatched = 0, results = 0;
  std::uint64_t bad_frames = 0, late_results = 0, would_block = 0, pools_lost = 0;
  std::uint64_t unknown_pool_frames = 0, reregistrations = 0, dropped_submissions = 0;
  std::uint64_t resource_samples = 0, pools_left = 0;
  bool operator==(const LoopStats&) const = default;
};

class Interchange final {
 public:
  // Binds both sockets, opens the store and recovers unfinished jobs. Throws Failure when a
  // bind or the store fails.
  Interchange(Options opts, Logger log);
  ~Interchange();
  Interchange(const Interchange&) = delete;
  Interchange& operator=(const Interchange&) = delete;

  // Serves until stop() or, in embedded mode, until idle. Returns the process exit code.
  int run();
  // Async-signal-safe.
  void stop() noexcept { stop_.store(true, std::memory_order_relaxed); }

  [[nodiscard]] const std::string& client_endpoint() const noexcept { return client_ep_; }
  [[nodiscard]] const std::string& pool_endpoint() const noexcept { return pool_ep_; }

 private:
  struct Pending {
    proto::MiniBatch mb;
    std::uint32_t tries = 0;  // attempts already made
  };
  struct Job {
    std::uint64_t id = 0;
    proto::JobSpec spec{};
    std::string state = "running";
    bool submit_done = false;
    std::uint64_t total = 0;  // known mini-batches
    std::uint64_t succeeded = 0, failed = 0, items_succeeded = 0, items_failed = 0;
    std::uint64_t attempts_failed = 0;
    std::uint64_t in_flight = 0;
    std::deque<Pending> ready{};
    std::unordered_set<std::string> clients{};
    Clock::time_point last_progress{};
    std::uint64_t finished_at_last_progress = 0;
    // For ParallelRunStep's job-level timeouts (JobSpec::*_timeout_s).
    Clock::time_point accepted_at{};       // accepted, or resumed by this process
    Clock::time_point last_finished_at{};  // an attempt of this job last finished (or accepted_at)
    bool dispatched = false;               // a task of this job was sent to a pool
    double started = 0;  // Unix seconds; 0 when resumed after a restart (not known here)
  };
  struct InFlight {
    std::string pool_peer;
    std::uint64_t job_id = 0;
    std::uint32_t attempt = 0;
    proto::MiniBatch mb;
  };
  // A job that ended and whose report is being written: its clients get JobEnded after it.
  struct Reporting {
    proto::JobEnded ended{};
    std::unordered_set<std::string> clients{};
  };
  struct Pool {
    std::uint64_t id = 0;
    std::string peer{};
    proto::Register reg{};
    std::uint32_t capacity = 0;
    std::unordered_set<std::uint64_t> tasks{};       // task ids held
    std::unordered_set<std::uint64_t> jobs_known{};  // JobInfo sent
    Clock::time_point last_seen{};
    double registered = 0;
  };

  void on_client(net::Message& msg);
  void on_pool(net::Message& msg);
  void on_register(const std::string& peer, const proto::Register& reg);
  void on_results(Pool& pool, proto::ResultBatch& batch);
  void on_result(Pool& pool, proto::TaskResult& r);
  void dispatch();
  void expire_pools(Clock::time_point now);
  // Drops a pool and requeues what it held, each as a POOL_LOST attempt. `left`: it said
  // goodbye (PoolLeaving) and is recorded `gone`; otherwise `lost`.
  void lose_pool(const std::string& peer, const std::string& why, bool left = false);
  void requeue_lost(Job& job, InFlight fl, proto::AttemptStatus status, const std::string& why);
  // Returns true when the mini-batch will be retried.
  bool fail_attempt(Job& job, Pending p, const proto::TaskResult& r);
  void check_thresholds(Job& job);
  void check_job_timeouts(Clock::time_point now);
  void maybe_finish(Job& job);
  void end_job(Job& job, const std::string& state, const std::string& reason);
  void send_progress(Job& job, bool force);
  void on_resource_sample(const Pool& pool, proto::ResourceSample& sample);
  void write_overviews();
  // Reports finished by the report thread: their JobEnded goes out now.
  void on_reports_done();
  void deliver_ended(proto::JobEnded ended, const std::unordered_set<std::string>& clients);
  proto::JobProgress progress_of(const Job& job) const;
  void send_client(const std::string& peer, const std::string& frame);
  bool send_pool(Pool& pool, const std::string& frame);
  void bad_frame(const char* side, const std::string& peer, const Error& err);
  void log_stats(bool force);
  void write_ready_file();
  // Checks a submitted spec before a job exists: an error names the field.
  [[nodiscard]] Expected<void> validate_spec(const proto::JobSpec& spec) const;
  void recover();

  Options opts_;
  Logger log_;
  net::Context ctx_;  // declared before the sockets: destroyed after them
  net::Socket clients_;
  net::Socket pools_sock_;
  std::string client_ep_, pool_ep_;
  std::unique_ptr<store::TaskStore> store_;
  std::unique_ptr<ReportWriter> reports_;  // after store_: destroyed (and joined) first
  std::atomic<bool> stop_{false};

  std::map<std::uint64_t, Job> jobs_;  // live jobs, by id (dispatch goes oldest first)
  std::map<std::uint64_t, proto::JobEnded> ended_{};  // ended jobs seen by this process
  std::map<std::uint64_t, Reporting> reporting_{};    // ended, report being written
  std::unordered_map<std::string, Pool> pools_{};     // by routing id
  std::unordered_map<std::uint64_t, InFlight> in_flight_{};
  std::uint64_t next_job_id_ = 1;
  std::uint64_t next_task_id_ = 1;
  std::uint64_t next_pool_id_ = 1;
  std::uint64_t instance_ = 0;  // JobProgress::instance: random per process
  bool had_client_ = false;
  LoopStats stats_{}, logged_stats_{};
  Clock::time_point last_stats_{};
  bool warned_bad_ = false;
};

}  // namespace fanout::ix
