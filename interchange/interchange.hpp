// The interchange: broker and master of jobs. Clients submit mini-batches on one ROUTER, pools
// take tasks and return results on another; the interchange decides retries, enforces
// thresholds, watches pool liveness and is the only writer of the store. See docs/architecture.md.
// Not thread-safe: run() owns the sockets; stop() may be called from a signal handler.
#pragma once

#include <sys/types.h>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "fanout/net/connection_guard.hpp"
#include "fanout/net/security.hpp"
#include "fanout/net/socket.hpp"
#include "fanout/protocol/messages.hpp"
#include "fanout/store/owner_lock.hpp"
#include "fanout/store/task_store.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/log.hpp"
#include "interchange/client_sessions.hpp"
#include "interchange/dispatcher.hpp"
#include "interchange/job_ledger.hpp"
#include "interchange/metrics_exporter.hpp"
#include "interchange/peer_bounds.hpp"
#include "interchange/pool_table.hpp"
#include "interchange/report_writer.hpp"

namespace fanout::ix {

struct Options {
  std::string client_endpoint = "tcp://127.0.0.1:*";
  std::string pool_endpoint = "tcp://127.0.0.1:*";
  std::string db_path{};
  std::string ready_file{};  // written once bound: client=, pool=, pid=, host= lines
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
  net::Security security{};        // Curve on tcp:// endpoints; see docs/security.md
  // The store's owner lock main() took (store/owner_lock.hpp): where this interchange listens is
  // published there once bound. Null: nothing published (tests).
  store::OwnerLock* owner = nullptr;
  // `fanout resume --failed`: jobs whose failed mini-batches are reopened before recovery.
  std::vector<std::uint64_t> reopen_failed{};
  // The folders a client's SubmitJob may make this interchange write in (its output_path and
  // log_dir; --write-root). Empty: the store's folder only. See docs/security.md.
  std::vector<std::string> write_roots{};
  // HOST:PORT to serve Prometheus metrics on (/metrics); empty: none. docs/observability.md.
  std::string metrics_listen{};
};

// Counters logged at INFO every stats_interval when they changed (INFO never grows per task).
struct LoopStats {
  std::uint64_t frames_in = 0, frames_out = 0, tasks_dispatched = 0, results = 0;
  std::uint64_t bad_frames = 0, late_results = 0, would_block = 0, pools_lost = 0;
  std::uint64_t stale_results = 0;  // in ResultBatches from unregistered pools
  std::uint64_t unknown_pool_frames = 0, reregistrations = 0, dropped_submissions = 0;
  std::uint64_t resource_samples = 0, pools_left = 0;
  std::uint64_t refused_peers = 0;  // connections the ZAP handler refused
  // Connections cut for sending too much before authenticating, and those ZeroMQ could not
  // accept (no descriptors), on both sockets (net::ConnectionGuard).
  std::uint64_t unauthenticated_cut = 0, accept_failures = 0;
  std::uint64_t key_mismatch = 0;  // pool frames whose key is not the one its routing id holds
  // Mini-batches beyond a client's window; tasks a heartbeating pool did not hold (peer_bounds).
  std::uint64_t window_refused = 0, leases_expired = 0;
  bool operator==(const LoopStats&) const = default;
};

// The poll loop and its wiring: it receives frames, asks the parts below what to do (they decide
// without I/O) and does it: sends frames, writes the store, starts reports.
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

  [[nodiscard]] const std::string& client_endpoint() const noexcept { return eps_.client; }
  [[nodiscard]] const std::string& pool_endpoint() const noexcept { return eps_.pool; }

 private:
  struct Endpoints {
    std::string client{}, pool{};
  };
  // Sets up and binds both sockets (Curve and the ZAP handler on tcp://, docs/security.md): the
  // one place where they are configured. Throws Failure.
  Endpoints open_sockets();
  void recover();
  void write_ready_file();
  // True when the embedded interchange's client died before a job's submission ended.
  bool submitter_gone();

  // Client side.
  void on_client(net::Message& msg);
  void on_submit_job(const std::string& peer, const std::string& frame);
  void on_submit_tasks(const std::string& peer, const std::string& frame);
  void on_submit_end(const std::string& peer, const std::string& frame);
  void on_attach(const std::string& peer, const std::string& frame);
  void on_cancel(const std::string& peer, const std::string& frame);
  void on_reopen(const std::string& peer, const std::string& frame);
  void on_shutdown(const std::string& peer, const std::string& frame);
  // The I/O half of accepting a job, after check_job_spec(): code_dir exists, log_dir and the
  // output file's folder are created, the output file opens for appending.
  [[nodiscard]] Expected<void> prepare_job_files(const proto::JobSpec& spec) const;
  void send_client(const std::string& peer, const std::string& frame);
  void send_progress(const Job& job, bool force);
  proto::JobProgress progress_of(const Job& job) const;

  // Pool side.
  void on_pool(net::Message& msg);
  void heartbeat_pools(Clock::time_point now);    // and expires the silent ones
  void record_pools_seen(Clock::time_point now);  // pools.last_seen, every kPoolsSeenPeriod
  void end_jobs_whose_output_failed();
  void shut_down();  // reports finished, pools told to go, the store flushed
  void on_pool_register(const net::Message& msg);
  void on_unknown_pool(const net::Message& msg, proto::MsgType type);
  void on_pool_message(Pool& pool, const net::Message& msg, proto::MsgType type);
  // Whether the frame's key (Message::user_id) may use its routing id (PoolTable::key_holds).
  // Counts a mismatch and logs it once per key.
  bool key_holds(const net::Message& msg);
  void on_register(const std::string& peer, const proto::Register& reg, const std::string& key);
  void on_results(Pool& pool, proto::ResultBatch& batch);
  void on_resource_sample(const Pool& pool, proto::ResourceSample& sample);
  bool send_pool(Pool& pool, const std::string& frame);
  void dispatch();
  // Sends `pool` the tasks picks_ chose (JobInfo first where needed). False: stop filling it.
  bool send_tasks(Pool& pool);
  void expire_pools(Clock::time_point now);
  // Requeues the tasks of `pool` whose lease expired (TaskLeases), each as a POOL_LOST attempt.
  void expire_leases(Pool& pool, const std::vector<std::uint64_t>& tasks);
  // Drops a pool and requeues what it held, each as a POOL_LOST attempt. `left`: it said
  // goodbye (PoolLeaving) and is recorded `gone`; otherwise `lost`. `no_try`: its tasks go back
  // with no try used (left, or taken from it for a reason that is not theirs).
  void lose_pool(const std::string& peer, const std::string& why, bool left = false,
                 bool no_try = false);

  // Jobs.
  // Ends the job if the ledger has a verdict for it.
  void settle(Job& job);
  // Ends the job in the ledger and queues its end in the store; the rest (the client's
  // JobEnded, the report) waits in ended_ for that to be committed, off this loop.
  void end_job(std::uint64_t job_id, const Verdict& verdict);
  // What the store has committed since: each accepted job's JobAccepted, then each ended job's
  // report and JobEnded, in order.
  void finish_committed();
  struct EndedJob;
  void finish_ended_job(EndedJob& e);
  void log_gave_up(const proto::TaskResult& r);
  void on_reports_done();
  void deliver(Delivery d);
  void write_overviews();

  // Metrics (interchange_metrics.cpp): a copy of the counters for the exporter's scrapes.
  void publish_metrics(Clock::time_point now);
  void note_job_ended(const Job& job, const std::string& state);
  void count_attempt(std::uint8_t status) noexcept {
    ++attempts_by_status_[status < attempts_by_status_.size() ? status : 0];
  }

  void bad_frame(const char* side, const std::string& peer, const Error& err);
  void log_stats(bool force);

  Options opts_;
  Logger log_;
  net::Context ctx_;                      // declared before the sockets: destroyed after them
  std::unique_ptr<net::ZapHandler> zap_;  // started before the sockets bind; stops before ctx_
  net::Socket client_sock_;
  net::Socket pool_sock_;
  // Watch the Curve sockets' unauthenticated connections; set by open_sockets, destroyed before
  // the sockets.
  std::unique_ptr<net::ConnectionGuard> client_guard_, pool_guard_;
  Endpoints eps_;  // bound before the store opens
  std::unique_ptr<store::TaskStore> store_;
  std::unique_ptr<ReportWriter> reports_;  // after store_: destroyed (and joined) first
  std::atomic<bool> stop_{false};
  // Jobs the store failed because their output file could not be written, and why, until the
  // loop or end_job() has ended each as failed (TaskStore::take_failed_jobs()).
  std::map<std::uint64_t, std::string> store_failed_{};
  // Jobs ended because their output failed: the store took results back, and their end is told
  // with the store's counts (finish_ended_job).
  std::set<std::uint64_t> output_failed_{};
  // Jobs ended whose end the store has not committed yet (TaskStore::flush_async()'s ticket),
  // oldest first: the client is told only what is durable.
  struct EndedJob {
    Job job{};
    std::string state{}, reason{};
    std::uint64_t ticket = 0;
  };
  std::deque<EndedJob> ended_{};
  // Jobs accepted whose creation the store has not committed yet, oldest first: the client
  // learns its job's id only once the job can be read from the store.
  struct PendingAccept {
    std::string peer{};
    proto::JobAccepted msg{};
    std::uint64_t ticket = 0;
  };
  std::deque<PendingAccept> accepts_{};

  PoolTable pools_;
  JobLedger ledger_;
  Dispatcher dispatcher_{};
  ClientSessions sessions_;
  TaskLeases leases_{};
  bool warned_window_ = false;
  std::uint64_t instance_ = 0;  // JobProgress::instance: random per process
  bool had_client_ = false;
  pid_t parent_ = 0;                      // at run(): the embedded interchange's client
  std::uint64_t run_dirs_made_ = 0;       // for clients that leave the run folder to us
  std::vector<std::string> write_roots_;  // Options::write_roots, resolved (job_checks.hpp)
  LoopStats stats_{}, logged_stats_{};
  Clock::time_point last_stats_{};
  bool warned_bad_ = false;
  std::unordered_set<std::string> warned_keys_{};  // mismatching pool keys already logged
  // Reused each loop turn, so dispatching and submitting allocate no more than they must.
  std::vector<Pick> picks_{};
  proto::TaskBatch batch_{};
  std::vector<proto::MiniBatch> accepted_{};
  // Metrics: null without --metrics-listen. The loop publishes a snapshot every kMetricsPeriod.
  std::unique_ptr<MetricsExporter> metrics_{};
  Clock::time_point next_metrics_{};
  Clock::time_point next_pools_seen_{};                // record_pools_seen()
  std::array<std::uint64_t, 9> attempts_by_status_{};  // by proto::AttemptStatus
  std::map<std::string, std::uint64_t> jobs_ended_{};  // by final state
  std::deque<MetricsSnapshot::JobRow> ended_rows_{};   // the last jobs ended, newest last
  // Per job: the counts at the start of the rate window, and when it began.
  struct RateMark {
    Clock::time_point at{};
    std::uint64_t done = 0, items = 0;
    double minibatches_per_s = 0, items_per_s = 0;
  };
  std::map<std::uint64_t, RateMark> rate_marks_{};
};

}  // namespace fanout::ix
