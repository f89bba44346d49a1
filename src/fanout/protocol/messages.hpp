// The message catalogue: the only place where a message type, a field or the protocol version is
// defined. docs/protocol.md is the normative description of the frames.
//
// Rules, so peers of other builds decode each other: MsgType's values are append-only; new
// fields go at the end of a struct only; removing, reordering or retyping one bumps the version.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <msgpack.hpp>

namespace fanout::proto {

inline constexpr std::uint8_t kProtocolVersion = 1;
// Frames larger than this are refused before decoding (a result batch carries output rows).
inline constexpr std::size_t kMaxFrameBytes = 256u * 1024u * 1024u;

enum class MsgType : std::uint8_t {  // wire values: append only, never renumber or reuse
  Register = 1,                      // pool -> interchange
  Registered,                        // interchange -> pool
  Reject,                            // interchange -> pool or client
  Heartbeat,                         // both ways
  TaskBatch,                         // interchange -> pool
  ResultBatch,                       // pool -> interchange
  Drain,                             // retired: never sent; a pool treats one as Shutdown
  Shutdown,                          // interchange -> pool, client -> interchange (embedded mode)
  JobInfo,       // interchange -> pool: what a job's tasks need, sent before its first task
  SubmitJob,     // client -> interchange
  JobAccepted,   // interchange -> client
  SubmitTasks,   // client -> interchange
  SubmitEnd,     // client -> interchange: no more mini-batches for this job
  JobProgress,   // interchange -> client
  JobEnded,      // interchange -> client
  Attach,        // client -> interchange: follow an existing job
  CancelJob,     // client -> interchange
  DropJob = 18,  // interchange -> pool: a job ended; stop its running tasks, drop its queued ones
  // 19..21 are reserved for other messages.
  ResourceSample = 22,  // pool -> interchange: the resource monitor's sample of its node
  PoolLeaving = 23,     // pool -> interchange: stopping on its own; run what it holds elsewhere
  ReopenJob = 24,       // client -> interchange: `fanout resume --failed` on a store it owns
};

// Outcome of one attempt, as recorded in attempts.status (see to_string below).
enum class AttemptStatus : std::uint8_t {
  RunDone = 1,
  RunException,
  RunTimeout,
  LoadException,
  LoadTimeout,
  WorkerLost,
  PoolLost,
  Cancelled,
};
const char* to_string(AttemptStatus s) noexcept;

// Everything a pool needs to run a job's tasks and the interchange needs to decide retries.
struct JobSpec {
  std::string name{};
  std::string spec_path{};            // the job file, for messages
  std::string runtime{};              // "python" | "command" | "native"
  std::string code_dir{};             // absolute; the worker's working directory
  std::string entry_script{};         // relative to code_dir (python), command line, or library
  std::string python{};               // interpreter for the python runtime
  std::vector<std::string> args{};    // passed to the entry script's sys.argv
  std::vector<std::string> env{};     // "KEY=VALUE" set for workers
  std::string output_path{};          // append_row file; empty means summary_only
  std::string log_dir{};              // the job's logs/ folder
  std::uint32_t max_tries = 4;        // tries per mini-batch (retries + 1)
  double run_timeout_s = 0;           // bound on one run(); 0: none
  std::int64_t error_threshold = -1;  // failed items that abort the job; -1 ignores
  std::int64_t mini_batch_error_threshold = -1;  // failed mini-batches; -1 ignores
  double allowed_failed_percent = 100;           // failed share once all are scheduled
  std::string settings_json{};                   // all settings, recorded with the job
  std::string input_name{};                      // the input's name (mini_batch_context.dataset)
  // ParallelRunStep's other timeouts; 0: none. The pool enforces the first, the interchange the
  // other two.
  // Bound on a mini-batch's worker time outside run() (python runtime): taking it to run()'s
  // start, plus run()'s end to its reply. See docs/worker-pipe.md (S and E frames).
  double task_overhead_timeout_s = 0;
  double first_task_creation_timeout_s = 0;  // job accepted to its first task dispatched
  double progress_update_timeout_s = 0;      // no attempt finished for this long
  double resource_monitor_interval_s = 0;    // pools sample resources this often while running
                                             // the job's tasks; 0: off
  // The job's weight in the interchange's fair share of the pools between running jobs
  // (fanout.priority, --priority); 0 counts as 1. A frame from an older client has none: 1.
  std::uint32_t priority = 1;
  // With log_dir empty: the interchange makes the job's run folder beside its store (a client of
  // a shared interchange, whose paths are the interchange's) and names it in JobAccepted. False,
  // and from an older client: an empty log_dir means no reports.
  bool interchange_run_dir = false;
  MSGPACK_DEFINE_ARRAY(name, spec_path, runtime, code_dir, entry_script, python, args, env,
                       output_path, log_dir, max_tries, run_timeout_s, error_threshold,
                       mini_batch_error_threshold, allowed_failed_percent, settings_json,
                       input_name, task_overhead_timeout_s, first_task_creation_timeout_s,
                       progress_update_timeout_s, resource_monitor_interval_s, priority,
                       interchange_run_dir)
};

// One mini-batch as described by the client: never the data, only where to find it.
struct MiniBatch {
  std::uint64_t index = 0;           // stable id: position in the input
  std::vector<std::string> items{};  // file paths (or descriptors for tabular input)
  std::string detail{};              // JSON "Mini-batch Detail"; may be empty
  // Not an input: an entry the client's listing met and could not make one (a folder it cannot
  // open, a path too long, a FIFO, a link to nothing), said as "PATH: call: strerror (ERRNO)".
  // Its one item is the path. The interchange fails it at once (INPUT_UNREADABLE), with no pool
  // and no retry; empty for every real input (and from an older client).
  std::string refused{};
  MSGPACK_DEFINE_ARRAY(index, items, detail, refused)
};

// One try of one mini-batch, as sent to a pool.
struct Task {
  std::uint64_t task_id = 0;  // unique per attempt within the interchange
  std::uint64_t job_id = 0;
  std::uint64_t index = 0;    // mini-batch id
  std::uint32_t attempt = 1;  // 1-based try number
  std::vector<std::string> items{};
  std::string detail{};
  MSGPACK_DEFINE_ARRAY(task_id, job_id, index, attempt, items, detail)
};

struct TaskResult {
  std::uint64_t task_id = 0;
  std::uint64_t job_id = 0;
  std::uint64_t index = 0;
  std::uint32_t attempt = 1;
  std::uint8_t status = 0;      // AttemptStatus
  std::uint64_t items = 0;      // items in the mini-batch
  std::uint64_t succeeded = 0;  // min(len(result), items)
  std::uint64_t failed = 0;     // items - succeeded
  std::uint64_t rows = 0;       // rows in `output`
  std::string output{};         // the append_row bytes of this mini-batch, newline-terminated
  std::string error_category{};
  std::string error_message{};
  std::string node{};
  std::string process{};  // worker name, e.g. "process003"
  std::int64_t worker_pid = 0;
  double start = 0;  // Unix seconds
  double elapsed_s = 0;
  double cpu_s = 0;
  double run_s = 0;
  // Where the worker was placed (docs/resources.md); empty / 0 from an older pool.
  std::string device{};       // the device list its CUDA_VISIBLE_DEVICES (or kind's variable) got
  std::string cpus{};         // its CPU list as Cpus_allowed_list writes it; empty: not pinned
  std::uint32_t threads = 0;  // the OMP_NUM_THREADS it got; 0: not set by the pool
  MSGPACK_DEFINE_ARRAY(task_id, job_id, index, attempt, status, items, succeeded, failed, rows,
                       output, error_category, error_message, node, process, worker_pid, start,
                       elapsed_s, cpu_s, run_s, device, cpus, threads)
};

// The result of an attempt that failed as a whole: every one of the task's items failed, with
// `status` and the error given, and no rows. Where it happened (node, process, pid, start,
// elapsed) is the caller's to fill in.
[[nodiscard]] inline TaskResult failed_result(const Task& task, AttemptStatus status,
                                              std::string category, std::string message) {
  TaskResult r;
  r.task_id = task.task_id;
  r.job_id = task.job_id;
  r.index = task.index;
  r.attempt = task.attempt;
  r.status = static_cast<std::uint8_t>(status);
  r.items = task.items.size();
  r.failed = r.items;
  r.error_category = std::move(category);
  r.error_message = std::move(message);
  return r;
}

// ---- pool <-> interchange ----

struct Register {
  static constexpr MsgType kType = MsgType::Register;
  std::string pool_name{};  // chosen by the pool; unique per connection
  std::string node{};       // host name
  std::uint32_t workers = 0;
  std::uint32_t prefetch = 0;
  std::string build{};  // software version, for logs only
  std::int64_t pid = 0;
  MSGPACK_DEFINE_ARRAY(pool_name, node, workers, prefetch, build, pid)
};

struct Registered {
  static constexpr MsgType kType = MsgType::Registered;
  std::uint64_t pool_id = 0;
  std::uint32_t heartbeat_period_ms = 0;
  std::uint32_t heartbeat_threshold_ms = 0;
  double now_unix = 0;  // the interchange's clock when it answered: pools correct theirs by it
  MSGPACK_DEFINE_ARRAY(pool_id, heartbeat_period_ms, heartbeat_threshold_ms, now_unix)
};

// Why a request was refused, for the peer to act on (the reason is for people and logs).
// Wire values: append only, never renumber or reuse.
enum class RejectCode : std::uint8_t {
  Unspecified = 0,       // none of the below, or a peer from before the code field
  Version = 1,           // the frame's protocol version is not the interchange's
  JobRefused = 2,        // SubmitJob: a field of the job is refused (a path, an output in use)
  UnknownJob = 3,        // Attach: the interchange does not know the job
  JobNotRunning = 4,     // SubmitTasks: the job is not running
  ShutdownDeferred = 5,  // Shutdown: jobs of other clients run here; it exits once idle
  NotRegistered = 6,     // a pool's frame before its Register
  PoolRefused = 7,       // Register refused (its routing id or name is another key's, ...)
  ReopenRefused = 8,     // ReopenJob: the job cannot be reopened (unknown, its output lost, ...)
};

struct Reject {
  static constexpr MsgType kType = MsgType::Reject;
  std::string reason{};
  std::uint8_t code = 0;  // a RejectCode: read it with reject_code()
  MSGPACK_DEFINE_ARRAY(reason, code)
};

inline Reject make_reject(RejectCode code, std::string reason) {
  return Reject{.reason = std::move(reason), .code = static_cast<std::uint8_t>(code)};
}

// The code of `m`. A peer from before the code field sends none (0): its code is then told from
// the reason's prefix, as those peers spelled it. A code newer than this build is Unspecified.
[[nodiscard]] RejectCode reject_code(const Reject& m) noexcept;

struct Heartbeat {
  static constexpr MsgType kType = MsgType::Heartbeat;
  std::uint32_t capacity = 0;  // pool -> interchange: tasks it can hold now (workers + prefetch)
  // pool -> interchange: the task ids it holds (queued, running, results not yet sent), which
  // renew their leases; a task not listed for heartbeat_threshold_ms is requeued. A pool that
  // sets lists_held false (an older one) is not judged.
  bool lists_held = false;
  std::vector<std::uint64_t> held{};
  MSGPACK_DEFINE_ARRAY(capacity, lists_held, held)
};

struct JobInfo {
  static constexpr MsgType kType = MsgType::JobInfo;
  std::uint64_t job_id = 0;
  JobSpec spec{};
  MSGPACK_DEFINE_ARRAY(job_id, spec)
};

struct TaskBatch {
  static constexpr MsgType kType = MsgType::TaskBatch;
  std::vector<Task> tasks{};
  MSGPACK_DEFINE_ARRAY(tasks)
};

struct ResultBatch {
  static constexpr MsgType kType = MsgType::ResultBatch;
  std::vector<TaskResult> results{};
  std::uint32_t capacity = 0;  // as in Heartbeat
  MSGPACK_DEFINE_ARRAY(results, capacity)
};

struct Drain {  // retired: never sent; a pool treats one (from an older peer) as Shutdown
  static constexpr MsgType kType = MsgType::Drain;
  std::string reason{};
  MSGPACK_DEFINE_ARRAY(reason)
};

struct Shutdown {
  static constexpr MsgType kType = MsgType::Shutdown;
  std::string reason{};
  // client -> interchange: must equal the interchange's shutdown token (FANOUT_SHUTDOWN_TOKEN in
  // its environment); a Shutdown without the right token is refused, so no peer can stop it.
  std::string token{};
  MSGPACK_DEFINE_ARRAY(reason, token)
};

// Node-wide usage over one resource-monitor interval (see ResourceSample).
struct NodeUsage {
  double cpu_percent = 0;  // all cores busy = 100
  double mem_total_mb = 0;
  double mem_available_mb = 0;
  double mem_used_mb = 0;        // total - available
  std::uint64_t disk_reads = 0;  // completed during the interval, whole disks
  std::uint64_t disk_writes = 0;
  double disk_read_mb = 0;
  double disk_write_mb = 0;
  double net_sent_mb = 0;  // during the interval, every interface but loopback
  double net_recv_mb = 0;
  std::uint32_t tcp_connections = 0;  // sockets listed in /proc/net/tcp and tcp6 now
  std::uint32_t udp_connections = 0;  // sockets listed in /proc/net/udp and udp6 now
  MSGPACK_DEFINE_ARRAY(cpu_percent, mem_total_mb, mem_available_mb, mem_used_mb, disk_reads,
                       disk_writes, disk_read_mb, disk_write_mb, net_sent_mb, net_recv_mb,
                       tcp_connections, udp_connections)
};

// One worker process's usage over the interval.
struct ProcessUsage {
  std::uint64_t job_id = 0;  // the job the worker runs
  std::string process{};     // worker name, e.g. "process003"
  std::int64_t pid = 0;
  double cpu_percent = 0;  // of one core: a process busy on two cores shows 200
  double rss_mb = 0;
  std::uint64_t reads = 0;  // read syscalls during the interval
  std::uint64_t writes = 0;
  double read_mb = 0;  // bytes read from storage during the interval
  double write_mb = 0;
  MSGPACK_DEFINE_ARRAY(job_id, process, pid, cpu_percent, rss_mb, reads, writes, read_mb, write_mb)
};

// Usage of one mounted file system, now.
struct DiskUsage {
  std::string mount{};
  double total_mb = 0;
  double used_mb = 0;
  double free_mb = 0;  // available to unprivileged users
  double used_percent = 0;
  MSGPACK_DEFINE_ARRAY(mount, total_mb, used_mb, free_mb, used_percent)
};

// One accelerator's usage, now (NVML).
struct GpuUsage {
  std::uint32_t index = 0;  // NVML's device index
  std::string uuid{};
  std::string name{};
  double util_percent = 0;  // busy share over NVML's last sample period
  double mem_used_mb = 0;
  double mem_total_mb = 0;
  MSGPACK_DEFINE_ARRAY(index, uuid, name, util_percent, mem_used_mb, mem_total_mb)
};

struct ResourceSample {
  static constexpr MsgType kType = MsgType::ResourceSample;
  double time = 0;                       // Unix seconds: the end of the interval
  double interval_s = 0;                 // seconds since the previous sample (0 for the first)
  std::vector<std::uint64_t> job_ids{};  // jobs the pool held workers or tasks of
  NodeUsage node{};
  std::vector<ProcessUsage> processes{};
  std::vector<DiskUsage> disks{};
  std::vector<GpuUsage> gpus{};  // empty without NVML (and from an older pool)
  MSGPACK_DEFINE_ARRAY(time, interval_s, job_ids, node, processes, disks, gpus)
};

// ---- client <-> interchange ----

struct SubmitJob {
  static constexpr MsgType kType = MsgType::SubmitJob;
  JobSpec spec{};
  MSGPACK_DEFINE_ARRAY(spec)
};

struct JobAccepted {
  static constexpr MsgType kType = MsgType::JobAccepted;
  std::uint64_t job_id = 0;
  std::uint32_t window = 0;  // mini-batches the client may have submitted beyond those finished
  // The interchange's own paths (absolute, on its host): its store and the job's logs folder.
  // Empty from an older interchange.
  std::string db_path{};
  std::string log_dir{};
  MSGPACK_DEFINE_ARRAY(job_id, window, db_path, log_dir)
};

struct SubmitTasks {
  static constexpr MsgType kType = MsgType::SubmitTasks;
  std::uint64_t job_id = 0;
  std::vector<MiniBatch> batches{};
  MSGPACK_DEFINE_ARRAY(job_id, batches)
};

struct SubmitEnd {
  static constexpr MsgType kType = MsgType::SubmitEnd;
  std::uint64_t job_id = 0;
  std::uint64_t total = 0;  // mini-batches submitted in all
  MSGPACK_DEFINE_ARRAY(job_id, total)
};

// A pool that holds no task, in JobProgress: what a launcher scaling its pool jobs needs.
struct IdlePool {
  std::string name{};  // Register.pool_name (a batch launcher's holds the scheduler's job id)
  double idle_s = 0;   // seconds it has held nothing
  MSGPACK_DEFINE_ARRAY(name, idle_s)
};

struct JobProgress {
  static constexpr MsgType kType = MsgType::JobProgress;
  std::uint64_t job_id = 0;
  std::uint64_t total = 0;      // 0 while the client is still submitting
  std::uint64_t submitted = 0;  // mini-batches known to the interchange
  std::uint64_t succeeded = 0;  // mini-batches
  std::uint64_t failed = 0;     // mini-batches out of tries
  std::uint64_t items_succeeded = 0;
  std::uint64_t items_failed = 0;
  std::uint64_t attempts_failed = 0;
  std::uint32_t pools = 0;
  std::uint32_t workers = 0;
  std::uint64_t instance = 0;  // random per interchange process: a change means it restarted
  // For elastic pool jobs (docs/cluster.md, section 6); 0 / empty from an older interchange.
  std::uint64_t in_flight = 0;         // mini-batches of this job held by pools now
  std::vector<IdlePool> idle_pools{};  // every pool that holds no task of any job
  MSGPACK_DEFINE_ARRAY(job_id, total, submitted, succeeded, failed, items_succeeded, items_failed,
                       attempts_failed, pools, workers, instance, in_flight, idle_pools)
};

struct JobEnded {
  static constexpr MsgType kType = MsgType::JobEnded;
  std::uint64_t job_id = 0;
  std::string state{};  // "succeeded" | "failed" | "cancelled"
  std::string reason{};
  JobProgress progress{};
  // The logs/ report, written after the final state was committed and before JobEnded is sent:
  // its wall and CPU seconds (0 when the job has no logs folder). fanout perf subtracts them.
  double report_s = 0;
  double report_cpu_s = 0;
  MSGPACK_DEFINE_ARRAY(job_id, state, reason, progress, report_s, report_cpu_s)
};

struct Attach {
  static constexpr MsgType kType = MsgType::Attach;
  std::uint64_t job_id = 0;
  MSGPACK_DEFINE_ARRAY(job_id)
};

struct CancelJob {
  static constexpr MsgType kType = MsgType::CancelJob;
  std::uint64_t job_id = 0;
  std::string reason{};
  MSGPACK_DEFINE_ARRAY(job_id, reason)
};

// `fanout resume JOB --failed` on a store this interchange owns: do what an interchange started
// with --reopen-failed JOB does, on the live store: the job's failed mini-batches go back to
// pending with no try used, and an ended job (failed, partial, cancelled) runs again with them
// and the ones it never finished. The client then follows it with Attach (sent after this frame,
// so it finds the job live). Refused with Reject{ReopenRefused} naming why.
struct ReopenJob {
  static constexpr MsgType kType = MsgType::ReopenJob;
  std::uint64_t job_id = 0;
  MSGPACK_DEFINE_ARRAY(job_id)
};

// ---- interchange -> pool, job control ----

// A job ended (failed a threshold, was cancelled): the pool stops the job's busy workers, drops
// its queued tasks and forgets its JobInfo. It reports nothing for them: the interchange has
// already recorded them as CANCELLED attempts.
struct DropJob {
  static constexpr MsgType kType = MsgType::DropJob;
  std::uint64_t job_id = 0;
  std::string reason{};  // for logs
  MSGPACK_DEFINE_ARRAY(job_id, reason)
};

// The pool's last frame when it stops on its own (a signal), not when the interchange told it
// to: the interchange records it `gone` and requeues what it held at once, instead of waiting
// out the heartbeat threshold.
struct PoolLeaving {
  static constexpr MsgType kType = MsgType::PoolLeaving;
  std::string reason{};  // for logs and the POOL_LOST attempts' message
  MSGPACK_DEFINE_ARRAY(reason)
};

}  // namespace fanout::proto
