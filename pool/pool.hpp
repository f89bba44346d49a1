// fanout-pool's manager loop: registers with the interchange, holds up to workers + prefetch
// tasks, runs them in worker processes, restarts workers that crash or overrun their timeout, and
// returns results in batches. What to do with the tasks and workers is decided by PoolPlanner
// (pool_planner.hpp); this class reads the sockets and pipes, feeds it, and carries out its
// actions. See docs/architecture.md, and docs/performance.md section 4 for the batching and the
// tasks queued in a worker's pipe. Not thread-safe; stop() is async-signal-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fanout/net/security.hpp"
#include "fanout/net/socket.hpp"
#include "fanout/protocol/messages.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/log.hpp"
#include "pool/fork_server.hpp"
#include "pool/memory_guard.hpp"
#include "pool/pool_planner.hpp"
#include "pool/resource_monitor.hpp"
#include "pool/walltime.hpp"
#include "pool/worker.hpp"
#include "pool/worker_placement.hpp"

namespace fanout::pool {

struct Options {
  std::string interchange{};  // the interchange's pool endpoint
  net::Security security{};   // Curve on a tcp:// interchange; see docs/security.md
  std::string name{};         // default: <host>-<pid>
  std::string node{};         // default: host name
  std::uint32_t workers = 0;  // default: the accelerators' share, else the cores
  // Which devices and CPUs each worker gets, and its thread count (worker_placement.hpp).
  PlacementOptions placement{};
  // Number of the first worker (process001): several pools on one node number theirs apart so
  // their logs never share a file (the embedded client gives pool i i * workers + 1).
  std::uint32_t first_process = 1;
  // Local pools that count their own workers (the client cannot give first_process): this
  // pool's index among those started together on its node, 0-based; above 0, first_process is
  // first_process_of(pool_index, the count it plans).
  std::uint32_t pool_index = 0;
  std::uint32_t prefetch = 0;
  std::chrono::milliseconds poll{10};  // longest a result waits to share a frame with others
  std::chrono::milliseconds heartbeat_period{2000};
  std::chrono::milliseconds heartbeat_threshold{10000};
  std::chrono::milliseconds kill_grace{2000};      // SIGTERM -> SIGKILL for a timed-out worker
  std::chrono::milliseconds load_timeout{600000};  // bound on a worker's start + init()
  // Stopped by a signal: how long running tasks may finish before they are stopped and handed
  // back (with the unstarted ones) to the interchange. A second signal stops at once.
  std::chrono::milliseconds drain_grace{20000};
  std::string shim_dir{};    // folder of fanout_worker.py
  std::string python{};      // overrides the job's interpreter when set
  std::string worker_bin{};  // fanout-worker, for the command and native runtimes
  // Start an interpreter before any job, to become the first Python job's fork server
  // (fork_server.hpp, WarmInterpreter): `fanout run` asks for it when its job is Python.
  bool warm_python = false;
  bool exit_on_lost = false;  // embedded mode: exit when the interchange goes silent
  // Cap of each user log file a worker writes (logs/user/stdout, stderr, entry_script_log), in
  // MB; 0: none. What a worker writes beyond it is dropped, with a line saying so in the file.
  std::uint64_t max_user_log_mb = 100;
  // Resource monitor period in seconds; 0: only while running a job that asks for one
  // (JobSpec::resource_monitor_interval_s). The smallest non-zero period wins.
  double resource_monitor_interval_s = 0;
  // Memory and recycling (docs/resources.md). Each worker's share of MemAvailable in GiB: the
  // pool starts no more workers than it holds (0: no bound). The RSS of a worker's process group
  // past which it is stopped with SIGKILL and its task fails OUT_OF_MEMORY (0: none). Tasks a
  // worker runs before it is replaced by a fresh one (0: never).
  double mem_per_worker_gib = 0;
  std::uint64_t worker_memory_limit_bytes = 0;
  std::uint32_t max_minibatches_per_worker = 0;
  // When the allocation ends, in Unix seconds (the earlier of --walltime-end and
  // SLURM_JOB_END_TIME; 0: not known): the pool takes no mini-batch whose expected run() time
  // does not fit, and leaves walltime_margin before it, handing back what it holds
  // (pool/walltime.hpp).
  double walltime_end = 0;
  std::chrono::seconds walltime_margin{30};
};

struct PoolStats {
  std::uint64_t tasks = 0, results = 0, workers_started = 0, workers_lost = 0, timeouts = 0;
  std::uint64_t init_failures = 0, bad_frames = 0, registrations = 0, jobs_dropped = 0;
  std::uint64_t resource_samples = 0, out_of_memory = 0, workers_recycled = 0;
  bool operator==(const PoolStats&) const = default;
};

class Pool final {
 public:
  Pool(Options opts, Logger log);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Serves until Shutdown, stop(), or (exit_on_lost) the interchange goes silent.
  int run();
  // A signal: the first drains (running tasks finish within drain_grace, the rest is handed
  // back), the second stops at once. Async-signal-safe.
  void stop() noexcept { signals_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void send_register();
  // A Heartbeat with the capacity and the task ids held.
  [[nodiscard]] proto::Heartbeat heartbeat() const;
  // Registration was lost (interchange restarted or declared us lost): what we hold was requeued
  // there, so queued tasks are forgotten, and we register again.
  void reregister(const char* why);
  void drop_job(std::uint64_t job_id, const std::string& reason);
  // `l` rewritten to be forked from the job's fork server (started here on its first worker), or
  // left as it is: not a Python job, fanout.worker_start: spawn, or a server that failed.
  WorkerLaunch with_fork_server(WorkerLaunch l, std::uint64_t job_id);
  // The fork server of `job_id`, started with `first`: the warm interpreter when there is one and
  // it fits, else a fresh one.
  Expected<ForkServer> new_fork_server(const WorkerLaunch& first, std::uint64_t job_id);
  // Stops the retiring fork servers none of whose workers is left.
  void retire_fork_servers();
  // One turn of run(), in parts: waits for a frame, a worker's output or the nearest deadline
  // (returns the slots whose pipes were polled, in the poller's order); notices that this
  // process was frozen; reads the interchange's frames and the workers' pipes; reaps workers
  // whose process ended; keeps the registration (false: leave, the interchange is gone).
  std::vector<std::size_t> wait_for_events(net::Poller& poller);
  void note_freeze();
  void read_interchange();
  void read_workers(net::Poller& poller, const std::vector<std::size_t>& fd_slots);
  void reap_ended(Clock::time_point now);
  [[nodiscard]] bool keep_registered(Clock::time_point now);
  // Leaving after a signal: PoolLeaving hands back what we hold.
  void say_goodbye();
  // Asks every worker to exit, and waits a moment for them.
  void stop_workers();
  void on_message(const std::string& frame);
  void on_registered(const proto::Registered& m);
  void on_worker_events(std::size_t slot, std::vector<WorkerEvent>& events);
  // A Done frame: the result of the worker's running task.
  void on_task_done(Worker& w, WorkerEvent& ev);
  void on_worker_gone(std::size_t slot);
  // The worker ended before it was ready: the planner says which tasks of its job fail.
  void on_start_failed(const Worker& w, const std::string& how);
  // The error message of the task a worker ended with, for `cause`; `how` is its exit.
  [[nodiscard]] std::string lost_task_message(const Worker& w, StopCause cause,
                                              const std::string& how) const;
  // The worker slots as the planner sees them.
  [[nodiscard]] std::vector<SlotView> slot_views() const;
  // Asks the planner where queued tasks go and carries out its actions.
  void assign();
  // Carries out one action; true when a worker could not be started (a task was failed).
  bool execute(PoolAction& action);
  // Starts a worker in `slot`; "" on success, else why it could not be started.
  std::string start_worker(std::size_t slot, std::uint64_t job_id);
  // When the busy worker's task overruns, and whether the bound is the task overhead timeout
  // (else the run timeout). Nothing when the worker is not busy or its job has no such bound.
  struct TaskDeadline {
    Clock::time_point at{};
    bool overhead = false;
  };
  std::optional<TaskDeadline> task_deadline(const Worker& w) const;
  void check_deadlines(Clock::time_point now);
  void fail_task(const proto::Task& t, proto::AttemptStatus status, const std::string& category,
                 const std::string& message, const std::string& process, std::int64_t pid,
                 double start);
  void fail_task(const proto::Task& t, StopCause cause, const std::string& message,
                 const std::string& process, std::int64_t pid, double start);
  // A task that never reached a worker.
  void fail_task(const proto::Task& t, StopCause cause, const std::string& message);
  // Fills the result's device, cpus and threads from the slot of the worker named r.process.
  void add_placement(proto::TaskResult& r) const;
  void flush_results();
  void send(const std::string& frame);
  void log_stats(bool force);
  // Draining after a signal (see stop()) or before the walltime: whether to leave the loop now.
  bool drain_over(Clock::time_point now);
  // Whether the next mini-batch would not fit before the walltime (then the pool drains).
  [[nodiscard]] bool walltime_due();
  // The wall clock the pool reports, in the interchange's time (see wall_clock.hpp).
  [[nodiscard]] double reported_unix(double local_unix) const noexcept {
    return local_unix + clock_correction_;
  }
  // Every kUserLogCheckPeriod, and at once after a worker ended (user_logs_due_) or with
  // `at_once` (the pool's end): cuts each user log file over max_user_log_mb back to it.
  void cap_user_logs(Clock::time_point now, bool at_once = false);
  // The resource monitor's period now (0: off), from the option and the jobs held.
  double monitor_interval_s() const;
  // Starts, stops or samples the monitor as its period and deadline say.
  void run_monitor(Clock::time_point now);
  // Every MemoryGuard::kCheckPeriod while workers run: samples the node's memory and stops the
  // workers whose process group passed worker_memory_limit_bytes.
  void check_memory(Clock::time_point now);
  // The cause and message of the task a worker died with, not stopped by the pool: OUT_OF_MEMORY
  // when the memory guard's facts say the kernel's OOM killer, else WORKER_LOST.
  [[nodiscard]] std::pair<StopCause, std::string> classify_loss(const Worker& w,
                                                                const ExitStatus& st);

  Options opts_;
  Logger log_;
  // Each slot's device(s), CPUs and threads (fixes opts_.workers; see worker_placement.hpp),
  // and what the worker now in each slot got, which its results carry.
  PoolPlacement placement_;
  std::vector<Placed> placed_{};
  net::Context ctx_;
  net::Socket sock_;
  std::atomic<bool> stop_{false};
  std::atomic<int> signals_{0};
  Clock::time_point drain_until_{};
  bool walltime_drain_ = false;  // draining because the walltime is near, not for a signal
  RunTimes run_times_{};         // the run() durations seen, for the walltime
  // Interchange clock minus ours, measured at each Registered (0 before, or from an old
  // interchange): added to every wall time the pool reports.
  double clock_correction_ = 0;
  // The interchange told us to stop (Shutdown, Drain, a refused Register): we leave without a
  // PoolLeaving, since it knows.
  bool told_to_stop_ = false;
  bool registered_ = false;
  Clock::time_point last_register_{};
  // Wait before repeating an unanswered Register: doubles from the heartbeat period up to
  // kMaxRegisterBackoff (zguide Paranoid Pirate), reset once registered.
  std::chrono::milliseconds register_backoff_{1000};
  Clock::time_point last_heard_{};
  Clock::time_point last_turn_{};  // when the loop last woke (see run(): a frozen pool)
  Clock::time_point last_sent_{};
  std::chrono::milliseconds hb_period_;
  std::chrono::milliseconds hb_threshold_;

  // The specs of the jobs the interchange told us of (JobInfo), for launching and deadlines.
  std::map<std::uint64_t, proto::JobSpec> jobs_{};
  // The tasks held and every decision on them; see pool_planner.hpp.
  PoolPlanner planner_;
  // How often the loop looks for workers whose process ended (see run()).
  static constexpr std::chrono::milliseconds kExitCheckPeriod{100};
  Clock::time_point last_exit_check_{};
  // The user log files of the workers started, each with whether its cut was said (see
  // cap_user_logs()).
  static constexpr std::chrono::seconds kUserLogCheckPeriod{2};
  std::map<std::string, bool> user_logs_{};
  Clock::time_point last_log_check_{};
  // A worker ended since the last check: what it wrote in its last moments (a burst between two
  // periodic checks, before its job ended) is capped on the next loop turn, not left over.
  bool user_logs_due_ = false;
  // Worker slots: index i runs process<first_process + i>, also after a replacement.
  // The Python jobs' fork servers (fanout.worker_start: fork), declared before slots_ so that the
  // workers are stopped first; the jobs whose server ended, whose workers are spawned instead.
  std::map<std::uint64_t, ForkServer> fork_servers_{};
  std::set<std::uint64_t> spawned_jobs_{};
  // With Options::warm_python, until the fork server of the first Python job it fits is made of
  // it.
  std::optional<WarmInterpreter> warm_{};
  // The servers of dropped jobs, kept until the last of their workers is gone (a server relays
  // its workers' exit statuses).
  std::map<std::uint64_t, ForkServer> retiring_servers_{};
  std::vector<std::optional<Worker>> slots_{};
  std::vector<proto::TaskResult> results_{};
  Clock::time_point first_result_{};  // when the oldest unsent result was made
  PoolStats stats_{}, logged_stats_{};
  Clock::time_point last_stats_{};
  std::optional<ResourceMonitor> monitor_{};
  MemoryGuard memory_;
  bool no_gpus_said_ = false;  // the monitor's "no accelerators" line was logged
  // Test hook (test builds only): how many more tasks received are dropped unreported, as a
  // broken pool would (FANOUT_TEST_SWALLOW_TASKS=N in the environment).
  std::uint64_t swallow_ = 0;
  Clock::time_point next_sample_{};
  Clock::time_point last_sample_{};
  std::vector<std::uint64_t> monitor_busy_{};  // jobs with running or queued tasks, last turn
  std::set<std::uint64_t> monitor_seen_{};     // jobs sampled at their start here
};

}  // namespace fanout::pool
