// TaskStore: the writer connection and its pragmas, wired to the write queue, the writer, the
// checkpoint thread and recovery (store/detail/). See task_store.hpp.
#include "fanout/store/task_store.hpp"

#include <sqlite3.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <utility>

#include "fanout/store/db.hpp"
#include "fanout/store/detail/checkpointer.hpp"
#include "fanout/store/detail/ops.hpp"
#include "fanout/store/detail/recovery.hpp"
#include "fanout/store/detail/write_queue.hpp"
#include "fanout/store/detail/writer.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/fd.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::store {

namespace {

// WAL pages past which the writer asks the checkpoint thread for a checkpoint after a commit
// (16 MiB of 4 KiB pages): rarer checkpoints copy a page the hot path rewrites (the right edges
// of the b-trees) fewer times; SQLite's own default is 1,000 pages.
constexpr int kCheckpointPages = 4096;
// WAL pages past which the writer checkpoints by itself, inside the commit, should the
// checkpoint thread fall behind or be missing (what SQLite's wal_autocheckpoint would do).
constexpr int kWriterCheckpointPages = 16384;

// Creates the folder holding `path`, if it has one. Throws Failure{Io} naming it.
const std::string& with_parent_dirs(const std::string& path) {
  if (auto r = make_parent_dirs(path); !r) throw Failure(r.error());
  return path;
}

}  // namespace

struct TaskStore::Impl {
  Impl(const std::string& p, Logger l)
      : path(p),
        log(std::move(l)),
        db(with_parent_dirs(p), Db::Mode::ReadWriteCreate),
        committed_wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
        queue(path, log) {
    if (!committed_wake.valid()) {
      throw Failure(ErrorCode::Io, "store " + path + ": eventfd: " + std::strerror(errno));
    }
    queue.set_on_applied([this] {
      const std::uint64_t one = 1;
      (void)!::write(committed_wake.get(), &one, sizeof one);
    });
    db.exec("PRAGMA busy_timeout = 5000", "set busy_timeout");
    bool is_wal = false;
    {
      Statement wal(db, "PRAGMA journal_mode = WAL");
      is_wal = wal.step() && wal.column_text(0) == "wal";
      if (!is_wal) {
        log->warn("store {}: cannot use WAL journal mode; readers may block the writer", path);
      }
    }
    // synchronous=NORMAL: in WAL mode a commit is atomic and survives a process crash without
    // an fsync per commit (the output files are synced before every commit, see Writer). An
    // 8 MiB page cache (the default is 2 MiB) keeps the recently written pages of a job in
    // memory, where the updates that follow their inserts find them; with deferred submission
    // most rows are inserted with their final state, and 64 MiB cost 50-100 MB of the
    // interchange's peak memory through 1,000,000 mini-batches without adding rate
    // (docs/performance.md, section 4).
    db.exec("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = OFF; PRAGMA cache_size = -8192",
            "set pragmas");
    apply_migrations(db, log);
    writer = std::make_unique<detail::Writer>(db, log);
    // Checkpoints run on a thread of their own (see Checkpointer), asked for by the WAL hook
    // below, which replaces SQLite's automatic checkpoint. Without a WAL there is nothing to
    // checkpoint.
    if (is_wal) {
      checkpointer = std::make_unique<detail::Checkpointer>(p, log);
      sqlite3_wal_hook(db.get(), &Impl::on_wal_commit, this);
    }
    queue.start([this](std::span<detail::Op> ops) { return apply(ops); });
  }

  ~Impl() {
    queue.push(detail::WriteSubmitted{});
    queue.stop();
    // Closed before db, whose close then checkpoints what is left and removes the WAL.
    const std::uint64_t checkpoints = checkpointer ? checkpointer->checkpoints() : 0;
    checkpointer.reset();
    SPDLOG_LOGGER_DEBUG(log,
                        "store {}: closed after {} ops in {} transactions (largest {}), "
                        "writer CPU {:.3f} s wall {:.3f} s; {} checkpoints on their own thread",
                        path, stats_ops, stats_batches, stats_max_batch, stats_cpu_s, stats_wall_s,
                        checkpoints);
  }

  // SQLite's WAL hook: after each commit of the writer connection, with the pages the WAL now
  // holds. A checkpoint that copied everything lets the next transaction start the WAL over.
  static int on_wal_commit(void* self, sqlite3* db, const char* name, int pages) {
    auto* impl = static_cast<Impl*>(self);
    if (pages >= kCheckpointPages && impl->checkpointer) impl->checkpointer->request();
    if (pages >= kWriterCheckpointPages) {
      // The backstop, as wal_autocheckpoint would run it (errors leave the WAL to grow, and the
      // next commit tries again).
      (void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    }
    return SQLITE_OK;
  }

  // One transaction of the writer thread (WriteQueue::ApplyFn).
  detail::WriteQueue::TimePoint apply(std::span<detail::Op> ops) {
    std::lock_guard db_lk(db_mu);
    const double cpu0 = thread_cpu_seconds();
    const auto w0 = std::chrono::steady_clock::now();
    writer->apply(ops);
    if (auto failed = writer->take_failed_jobs(); !failed.empty()) {
      std::lock_guard lk(failed_mu);
      failed_jobs.insert(failed_jobs.end(), failed.begin(), failed.end());
    }
    stats_cpu_s += thread_cpu_seconds() - cpu0;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    stats_wall_s += wall;
    // Read by write_stats() on another thread: one relaxed store each per transaction.
    commits_seen.fetch_add(1, std::memory_order_relaxed);
    commit_ns.fetch_add(static_cast<std::uint64_t>(wall * 1e9), std::memory_order_relaxed);
    last_commit_ns.store(static_cast<std::uint64_t>(wall * 1e9), std::memory_order_relaxed);
    ++stats_batches;
    stats_ops += ops.size();
    stats_max_batch = std::max<std::uint64_t>(stats_max_batch, ops.size());
    SPDLOG_LOGGER_TRACE(log, "store: committed {} ops", ops.size());
    return writer->held_due();
  }

  std::string path;
  Logger log;
  Db db;
  std::mutex db_mu;  // serialises the connection between startup calls and the writer thread
  std::unique_ptr<detail::Writer> writer;
  std::unique_ptr<detail::Checkpointer> checkpointer;              // absent without a WAL
  std::mutex failed_mu;                                            // guards failed_jobs
  std::vector<std::pair<std::uint64_t, std::string>> failed_jobs;  // for take_failed_jobs()

  std::atomic<std::uint64_t> commits_seen{0}, commit_ns{0}, last_commit_ns{0};  // write_stats()
  // Writer thread only; read once the queue has stopped.
  std::uint64_t stats_batches = 0, stats_ops = 0, stats_max_batch = 0;
  double stats_cpu_s = 0;
  double stats_wall_s = 0;

  UniqueFd committed_wake;   // written when a wake_when_committed() ticket is committed
  detail::WriteQueue queue;  // last: destroyed (stopped) first
};

TaskStore::TaskStore(const std::string& path, Logger log)
    : impl_(std::make_unique<Impl>(path, std::move(log))) {}

TaskStore::~TaskStore() = default;

std::uint64_t TaskStore::max_job_id() {
  std::lock_guard lk(impl_->db_mu);
  return static_cast<std::uint64_t>(impl_->db.query_int("SELECT coalesce(max(id), 0) FROM jobs"));
}

std::uint64_t TaskStore::max_attempt_id() {
  std::lock_guard lk(impl_->db_mu);
  return static_cast<std::uint64_t>(
      impl_->db.query_int("SELECT coalesce(max(id), 0) FROM attempts"));
}

std::uint64_t TaskStore::max_pool_id() {
  std::lock_guard lk(impl_->db_mu);
  // A row keeps its first registration's id; later ones are counted in last_registration.
  return static_cast<std::uint64_t>(impl_->db.query_int(
      "SELECT coalesce(max(max(id, coalesce(last_registration, id))), 0) FROM pools"));
}

std::vector<UnfinishedJob> TaskStore::recover() {
  std::lock_guard lk(impl_->db_mu);
  auto out = detail::recover(impl_->db, impl_->log);
  impl_->writer->forget_rows();
  return out;
}

std::vector<std::pair<std::uint64_t, std::string>> TaskStore::unreported_jobs() {
  std::lock_guard lk(impl_->db_mu);
  std::vector<std::pair<std::uint64_t, std::string>> out;
  Statement q(impl_->db,
              "SELECT id, log_dir FROM jobs WHERE ended IS NOT NULL AND reported IS NULL "
              "AND coalesce(log_dir, '') != '' ORDER BY id");
  while (q.step()) out.emplace_back(q.column_uint64(0), std::string(q.column_text(1)));
  return out;
}

std::uint64_t TaskStore::reopen_failed(std::uint64_t job_id) {
  std::lock_guard lk(impl_->db_mu);
  const auto n = detail::reopen_failed(impl_->db, job_id);
  impl_->writer->forget_rows();
  return n;
}

ReopenedJob TaskStore::reopen_job(std::uint64_t job_id) {
  flush();
  std::lock_guard lk(impl_->db_mu);
  auto out = detail::reopen_job(impl_->db, job_id, impl_->log);
  impl_->writer->reopened(job_id);
  return out;
}

std::optional<JobCounts> TaskStore::job_counts(std::uint64_t job_id) {
  std::lock_guard lk(impl_->db_mu);
  Statement q(impl_->db,
              "SELECT succeeded, failed, items_succeeded, items_failed, attempts_failed "
              "FROM job_counts WHERE job_id = ?1");
  q.bind(1, job_id);
  if (!q.step()) return std::nullopt;
  return JobCounts{q.column_uint64(0), q.column_uint64(1), q.column_uint64(2), q.column_uint64(3),
                   q.column_uint64(4)};
}

void TaskStore::on_attempts_committed(AttemptListener listener) {
  std::lock_guard lk(impl_->db_mu);  // held by the writer through each transaction
  impl_->writer->set_listener(std::move(listener));
}

void TaskStore::create_job(std::uint64_t job_id, const proto::JobSpec& spec, double created) {
  impl_->queue.push(std::make_unique<detail::CreateJob>(detail::CreateJob{job_id, spec, created}));
}

void TaskStore::add_minibatches(std::uint64_t job_id, std::vector<proto::MiniBatch> batches) {
  impl_->queue.push(detail::AddMiniBatches{job_id, std::move(batches)});
}

void TaskStore::set_submit_done(std::uint64_t job_id, std::uint64_t total) {
  impl_->queue.push(detail::SetSubmitDone{job_id, total});
}

void TaskStore::mark_running(std::uint64_t job_id, std::uint64_t index, std::uint32_t tries) {
  impl_->queue.push(detail::MarkRunning{job_id, index, tries});
}

void TaskStore::record_attempt(AttemptRecord rec) {
  impl_->queue.push(std::make_unique<AttemptRecord>(std::move(rec)));
}

void TaskStore::finish_job(std::uint64_t job_id, const std::string& state,
                           const std::string& reason, double ended) {
  impl_->queue.push(detail::FinishJob{job_id, state, reason, ended});
}

void TaskStore::upsert_pool(const PoolRecord& pool) {
  impl_->queue.push(std::make_unique<PoolRecord>(pool));
}

void TaskStore::record_pools_seen(std::vector<PoolSeen> pools) {
  if (pools.empty()) return;
  impl_->queue.push(detail::PoolsSeen{std::move(pools)});
}

void TaskStore::mark_reported(std::uint64_t job_id, double when) {
  impl_->queue.push(detail::MarkReported{job_id, when});
}

void TaskStore::record_resources(ResourceRecord rec) {
  if (rec.job_ids.empty()) return;
  impl_->queue.push(std::make_unique<ResourceRecord>(std::move(rec)));
}

void TaskStore::flush() {
  // What the writer holds back is part of what must be durable.
  impl_->queue.push(detail::WriteSubmitted{});
  impl_->queue.wait_applied();
}

std::uint64_t TaskStore::flush_async() {
  impl_->queue.push(detail::WriteSubmitted{});
  return impl_->queue.ticket();
}

bool TaskStore::committed(std::uint64_t ticket) { return impl_->queue.applied(ticket); }

void TaskStore::wake_when_committed(std::uint64_t ticket) {
  impl_->queue.wake_when_applied(ticket);
}

int TaskStore::committed_fd() const noexcept { return impl_->committed_wake.get(); }

bool TaskStore::ok() const noexcept { return impl_->queue.ok(); }

std::vector<std::pair<std::uint64_t, std::string>> TaskStore::take_failed_jobs() {
  std::lock_guard lk(impl_->failed_mu);
  return std::exchange(impl_->failed_jobs, {});
}

const std::string& TaskStore::path() const noexcept { return impl_->path; }

TaskStore::WriteStats TaskStore::write_stats() const {
  return WriteStats{
      .queue_depth = impl_->queue.backlog(),
      .commits = impl_->commits_seen.load(std::memory_order_relaxed),
      .commit_seconds =
          1e-9 * static_cast<double>(impl_->commit_ns.load(std::memory_order_relaxed)),
      .last_commit_seconds =
          1e-9 * static_cast<double>(impl_->last_commit_ns.load(std::memory_order_relaxed))};
}

}  // namespace fanout::store
