// The store's writer: applies queued operations in one transaction each. See writer.hpp.
#include "fanout/store/detail/writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "fanout/store/detail/encoding.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store::detail {

namespace {

// How long the writer may hold a submitted mini-batch's rows back, waiting for its first
// result to write them with (see "Deferred submission" below).
constexpr std::chrono::milliseconds kSubmittedRowsDelay{250};

}  // namespace

Writer::Writer(Db& db, Logger log)
    : log_(std::move(log)),
      db_(db),
      insert_job_(db, R"sql(
INSERT INTO jobs (id, name, state, reason, spec_path, runtime, entry_script, output_path,
                log_dir, settings, spec, created, started, output_start, owner_uid)
VALUES (?1, ?2, 'running', '', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11, ?12))sql"),
      // A row that exists (a mini-batch submitted again after a restart) keeps its state,
      // unless this one was dispatched: then it is marked running, as mark_running_ would.
      insert_minibatch_(db, "INSERT INTO minibatches (job_id, id, state, tries, items)", 5,
                        "ON CONFLICT (job_id, id) DO UPDATE SET state = excluded.state, "
                        "tries = excluded.tries WHERE excluded.state = 'running'"),
      insert_input_(db,
                    "INSERT OR IGNORE INTO minibatch_inputs (job_id, minibatch_id, detail, "
                    "descriptor)",
                    4, ""),
      submit_done_(db, "UPDATE jobs SET submit_done = 1, total = ?2 WHERE id = ?1"),
      mark_running_(db,
                    "UPDATE minibatches SET state = 'running', tries = ?3 "
                    "WHERE job_id = ?1 AND id = ?2"),
      insert_attempt_(db, R"sql(
INSERT INTO attempts (id, job_id, minibatch_id, attempt, status, pool_id, pool, node, process,
                    worker_pid, start, elapsed_s, cpu_s, run_s, items, succeeded, failed, rows,
                    error_category, error_message, device, cpus, threads))sql",
                      23, ""),
      // The row exists (added at submission), so the upsert acts as an UPDATE, in a form that
      // many rows share in one statement. A missing row would be created, not skipped.
      update_minibatch_(db, R"sql(
INSERT INTO minibatches (job_id, id, state, tries, items, succeeded, failed, rows, output_offset,
                       output_bytes))sql",
                        10, R"sql(
ON CONFLICT (job_id, id) DO UPDATE SET state = excluded.state, tries = excluded.tries,
     succeeded = excluded.succeeded, failed = excluded.failed, rows = excluded.rows,
     output_offset = coalesce(excluded.output_offset, output_offset),
     output_bytes = coalesce(excluded.output_bytes, output_bytes))sql"),
      finish_job_(db, "UPDATE jobs SET state = ?2, reason = ?3, ended = ?4 WHERE id = ?1"),
      // One row per pool name (schema version 4): a new registration of a known name updates
      // its row and counts it; a record of an older registration than the row's latest is
      // ignored. The row keeps the id of the name's first registration.
      upsert_pool_(db, R"sql(
INSERT INTO pools (id, name, node, workers, prefetch, pid, build, state, registered,
                   last_seen, key_fingerprint, registrations, last_registration)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 1, ?1)
ON CONFLICT (name) DO UPDATE SET
  registrations = registrations + (excluded.last_registration > last_registration),
  node = excluded.node, workers = excluded.workers, prefetch = excluded.prefetch,
  pid = excluded.pid, build = excluded.build, state = excluded.state,
  last_seen = excluded.last_seen, key_fingerprint = excluded.key_fingerprint,
  last_registration = excluded.last_registration
WHERE excluded.last_registration >= last_registration)sql"),
      pool_row_(db, "SELECT id FROM pools WHERE name = ?1"),
      // Only the row's current registration, while connected: a record of its loss or leaving
      // queued before this one keeps its state and time.
      pool_seen_(db,
                 "UPDATE pools SET last_seen = max(coalesce(last_seen, 0), ?3) "
                 "WHERE id = ?1 AND last_registration = ?2 AND state = 'connected'"),
      mark_reported_(db, "UPDATE jobs SET reported = ?2 WHERE id = ?1"),
      job_output_(db, "SELECT output_path FROM jobs WHERE id = ?1"),
      insert_node_sample_(db, R"sql(
INSERT INTO node_resource_samples (job_id, pool_id, pool, node, time, interval_s, cpu_percent,
                                 mem_total_mb, mem_available_mb, mem_used_mb, disk_reads,
                                 disk_writes, disk_read_mb, disk_write_mb, net_sent_mb,
                                 net_recv_mb, tcp_connections, udp_connections)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18))sql"),
      insert_process_sample_(db, R"sql(
INSERT INTO process_resource_samples (job_id, pool_id, pool, node, time, process, pid,
                                    cpu_percent, rss_mb, reads, writes, read_mb, write_mb)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13))sql"),
      insert_disk_sample_(db, R"sql(
INSERT INTO disk_usage_samples (job_id, pool_id, pool, node, time, mount, total_mb, used_mb,
                              free_mb, used_percent)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10))sql"),
      insert_gpu_sample_(db, R"sql(
INSERT INTO gpu_samples (job_id, pool_id, pool, node, time, device_index, uuid, name,
                         util_percent, mem_used_mb, mem_total_mb)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11))sql"),
      drop_attempt_(db, "DELETE FROM attempts WHERE id = ?1"),
      reopen_minibatch_(db, R"sql(
UPDATE minibatches SET state = 'pending', tries = ?3, succeeded = 0, failed = 0, rows = 0,
                     output_offset = NULL, output_bytes = NULL
WHERE job_id = ?1 AND id = ?2)sql"),
      fail_job_(db,
                "UPDATE jobs SET state = 'failed', reason = ?2, ended = coalesce(ended, ?3) "
                "WHERE id = ?1"),
      tallies_(db) {}

// ---- A job's storage failure ----
// A job's output file that cannot be written (ENOSPC, EIO, EDQUOT, EROFS, ...) fails that job
// only: the other jobs of the transaction commit as usual. The job's results of the
// transaction that had rows are taken back (their attempts rows deleted, their mini-batches
// pending again, the file cut back to its committed end), so that the store and the file agree
// and a resume of the job runs them again; the job is marked failed with the file and
// the errno, in the same transaction. Its later results with rows are not recorded. A failure of
// the store database itself still fails the whole transaction (and the store).

void Writer::apply(std::span<Op> ops) {
  skip_superseded(ops);
  output_attempts_.clear();
  pending_failed_.clear();
  try {
    Transaction tx(db_);
    for (auto& op : ops) {
      // Consecutive results are queued to share multi-row statements. Any other operation
      // first writes the results queued before it, so that every row is written in the order
      // it was queued (a MarkRunning does so itself, only when it writes a row).
      if (!std::holds_alternative<std::unique_ptr<AttemptRecord>>(op) &&
          !std::holds_alternative<MarkRunning>(op)) {
        flush_attempts();
      }
      std::visit([this](auto& o) { do_op(o); }, op);
    }
    flush_attempts();
    write_due_submitted();
    for (const auto& f : outputs_.write_and_sync()) fail_job_output(f.job_id, f.reason);
    const double now = unix_now();
    for (const auto& [job_id, reason] : pending_failed_) {
      fail_job_.bind(1, job_id).bind(2, reason).bind(3, now);
      fail_job_.run();
    }
    tallies_.apply();
    tx.commit();
  } catch (...) {
    tallies_.discard();
    attempts_.clear();
    committed_.clear();
    committed_recs_.clear();
    outputs_.discard();
    throw;
  }
  outputs_.commit();
  newly_failed_.insert(newly_failed_.end(), pending_failed_.begin(), pending_failed_.end());
  hand_on_committed();
}

void Writer::note_failed(std::uint64_t job_id, const std::string& reason) {
  if (!failed_outputs_.emplace(job_id, reason).second) return;
  log_->error("job {} failed: {}", job_id, reason);
  pending_failed_.emplace_back(job_id, reason);
}

void Writer::fail_job_output(std::uint64_t job_id, const std::string& reason) {
  note_failed(job_id, "cannot write its output file " + reason);
  std::unordered_set<std::uint64_t> taken_back;
  for (const OutputAttempt& a : output_attempts_) {
    if (a.job_id != job_id) continue;
    drop_attempt_.bind(1, a.task_id);
    drop_attempt_.run();
    reopen_minibatch_.bind(1, job_id).bind(2, a.index).bind(3, a.attempt > 0 ? a.attempt - 1 : 0);
    reopen_minibatch_.run();
    tallies_.reopened(job_id, a.index);
    taken_back.insert(a.task_id);
  }
  // Nor do the reports see them.
  std::size_t keep = 0;
  for (std::size_t i = 0; i < committed_.size(); ++i) {
    if (committed_[i].job_id == job_id && taken_back.contains(committed_[i].id)) continue;
    if (keep != i) {
      committed_[keep] = std::move(committed_[i]);
      committed_recs_[keep] = committed_recs_[i];
    }
    ++keep;
  }
  committed_.resize(keep);
  committed_recs_.resize(keep);
}

// For listener_: the attempts being written (flush_attempts()), with what is at hand only now:
// the pools row and, for a mini-batch written with its first result, its detail, which
// write_inputs() just left in rows_ / detail_.
void Writer::keep_committed() {
  std::size_t row = 0;  // into rows_: the attempts with a held mini-batch, in order
  for (const QueuedAttempt& q : attempts_) {
    const auto& r = q.rec->result;
    CommittedAttempt& c = committed_.emplace_back();
    committed_recs_.push_back(q.rec);
    c.id = r.task_id;
    c.job_id = r.job_id;
    c.minibatch_id = r.index;
    c.pool_id = pool_row(q.rec->pool_id);
    c.attempt = r.attempt;
    c.worker_pid = r.worker_pid;
    c.device = r.device;
    c.cpus = r.cpus;
    c.threads = r.threads;
    c.items = static_cast<std::int64_t>(r.items);
    c.succeeded = static_cast<std::int64_t>(r.succeeded);
    c.failed = static_cast<std::int64_t>(r.failed);
    c.start = r.start;
    c.elapsed_s = r.elapsed_s;
    c.cpu_s = r.cpu_s;
    c.run_s = r.run_s;
    c.status = proto::to_string(static_cast<proto::AttemptStatus>(r.status));
    if (q.held != nullptr) {
      c.detail_known = c.has_detail = true;
      if (!q.held->detail.empty()) {
        c.detail = q.held->detail;
      } else {
        const std::size_t begin = row == 0 ? 0 : ends_[row - 1].second;
        c.detail.assign(detail_, begin, ends_[row].second - begin);
      }
      ++row;
    }
  }
}

// After the commit: the attempts' text is moved from their records (whose rows are written),
// and listener_ gets them.
void Writer::hand_on_committed() {
  if (committed_.empty() || !listener_) return;
  for (std::size_t i = 0; i < committed_.size(); ++i) {
    CommittedAttempt& c = committed_[i];
    AttemptRecord& rec = *committed_recs_[i];
    c.pool = std::move(rec.pool_name);
    c.node = std::move(rec.result.node);
    c.process = std::move(rec.result.process);
    c.error_category = std::move(rec.result.error_category);
    c.error_message = std::move(rec.result.error_message);
  }
  committed_recs_.clear();
  listener_(committed_);
  committed_.clear();
}

std::chrono::steady_clock::time_point Writer::held_due() const {
  auto due = std::chrono::steady_clock::time_point::max();
  for (const auto& [job_id, job] : held_) {
    if (!job.entries.empty()) due = std::min(due, job.entries.front().added + kSubmittedRowsDelay);
  }
  return due;
}

void Writer::do_op(std::unique_ptr<CreateJob>& op) {
  const auto& s = op->spec;
  // Opened first: its size now is where this job's rows start, below which recovery never cuts.
  std::uint64_t output_start = 0;
  if (!s.output_path.empty()) {
    try {
      output_start = outputs_.open(op->job_id, s.output_path).end;
    } catch (const Failure& f) {
      // The job is created, and failed at the end of this transaction.
      note_failed(op->job_id, std::string("cannot open its output file: ") + f.what());
    }
  }
  pack_into(buf_, s);
  insert_job_.bind(1, op->job_id)
      .bind(2, s.name)
      .bind_text_or_null(3, s.spec_path)
      .bind_text_or_null(4, s.runtime)
      .bind_text_or_null(5, s.entry_script)
      .bind_text_or_null(6, s.output_path)
      .bind_text_or_null(7, s.log_dir)
      .bind_text_or_null(8, s.settings_json)
      .bind_blob(9, {buf_.data(), buf_.size()})
      .bind(10, op->created)
      // Who runs the job: recovery resumes only this user's jobs.
      .bind(12, static_cast<std::int64_t>(::geteuid()));
  if (s.output_path.empty()) {
    insert_job_.bind_null(11);
  } else {
    insert_job_.bind(11, output_start);
  }
  insert_job_.run();
  tallies_.job_created(op->job_id);
}

// ---- Deferred submission ----
// A submitted mini-batch's rows (minibatches, minibatch_inputs) are held back for up to
// kSubmittedRowsDelay. When its first result comes within that time, which under load is the
// rule, the minibatches row is inserted once with its final state: the UPDATE of a row
// written moments earlier (a b-tree descent and a rewrite, a third of the writer's cost per
// mini-batch) is saved. Otherwise it is written as before, pending or running.
// What a crash loses is what a client resubmits: it resubmits from the interchange's count of
// a job's mini-batches, so the committed rows of a job must stay a prefix of its indexes. At
// the end of every transaction, every held mini-batch below the highest one written with a
// result is written too; SetSubmitDone (after which no client resubmits), FinishJob and
// flush() write all of the job's, or everyone's.

void Writer::do_op(AddMiniBatches& op) {
  HeldJob& job = held_[op.job_id];
  const auto now = std::chrono::steady_clock::now();
  for (auto& mb : op.batches) {
    // Held mini-batches are consecutive; any other order (a resubmission) writes them first.
    if (!job.entries.empty() && mb.index != job.first + job.entries.size()) {
      write_held(op.job_id, job, job.entries.size());
    }
    if (job.entries.empty()) job.first = mb.index;
    job.entries.push_back(HeldMiniBatch{std::move(mb), now});
  }
  SPDLOG_LOGGER_TRACE(log_, "job {}: {} mini-batches added", op.job_id, op.batches.size());
}

void Writer::do_op(WriteSubmitted&) {
  for (auto& [job_id, job] : held_) write_held(job_id, job, job.entries.size());
}

// The held, not yet written mini-batch (job_id, index), or null.
HeldMiniBatch* Writer::find_held(std::uint64_t job_id, std::uint64_t index) {
  auto it = held_.find(job_id);
  if (it == held_.end()) return nullptr;
  HeldJob& job = it->second;
  if (index < job.first || index - job.first >= job.entries.size()) return nullptr;
  HeldMiniBatch& e = job.entries[index - job.first];
  return e.written ? nullptr : &e;
}

// Writes the rows of the first `n` held mini-batches of `job` (those not written with a
// result already) and forgets them.
void Writer::write_held(std::uint64_t job_id, HeldJob& job, std::size_t n) {
  rows_.clear();
  for (std::size_t i = 0; i < n; ++i) {
    const HeldMiniBatch& e = job.entries[i];
    if (e.written) continue;
    rows_.push_back(SubmittedRow{job_id, &e.mb, e.tries, e.running});
    tallies_.submitted(job_id, e.mb.index, e.running ? RowState::Running : RowState::Pending,
                       e.mb.items.size());
  }
  insert_minibatch_.run(rows_.size(), [this](Statement& st, int b, std::size_t i) {
    const SubmittedRow& r = rows_[i];
    st.bind(b + 1, r.job_id)
        .bind(b + 2, r.mb->index)
        .bind(b + 3, r.running ? "running" : "pending")
        .bind(b + 4, r.tries)
        .bind(b + 5, static_cast<std::uint64_t>(r.mb->items.size()));
  });
  write_inputs();
  job.entries.erase(job.entries.begin(), job.entries.begin() + static_cast<std::ptrdiff_t>(n));
  job.first += n;
}

// At the end of a transaction: writes each job's held mini-batches that were written with a
// result, lie below one that was (the prefix rule), or were held for kSubmittedRowsDelay.
void Writer::write_due_submitted() {
  const auto cutoff = std::chrono::steady_clock::now() - kSubmittedRowsDelay;
  for (auto& [job_id, job] : held_) {
    std::size_t n = 0;
    while (n < job.entries.size()) {
      const HeldMiniBatch& e = job.entries[n];
      if (!e.written && job.first + n >= job.written_end && e.added > cutoff) break;
      ++n;
    }
    if (n > 0) write_held(job_id, job, n);
    job.written_end = 0;
  }
}

// Writes the minibatch_inputs rows of rows_. Every descriptor and default detail is encoded
// first, into one buffer each, so that the multi-row statement can bind views into them
// (binds do not copy).
void Writer::write_inputs() {
  buf_.clear();
  detail_.clear();
  ends_.clear();
  for (const SubmittedRow& r : rows_) {
    msgpack::pack(buf_, r.mb->items);
    if (r.mb->detail.empty()) append_default_detail(detail_, r.mb->items);
    ends_.emplace_back(buf_.size(), detail_.size());
  }
  insert_input_.run(rows_.size(), [this](Statement& st, int b, std::size_t i) {
    const auto [desc_begin, detail_begin] =
        i == 0 ? std::pair<std::size_t, std::size_t>{} : ends_[i - 1];
    const auto [desc_end, detail_end] = ends_[i];
    const proto::MiniBatch& mb = *rows_[i].mb;
    std::string_view detail = mb.detail;
    if (detail.empty()) {
      detail = std::string_view(detail_).substr(detail_begin, detail_end - detail_begin);
    }
    st.bind(b + 1, rows_[i].job_id)
        .bind(b + 2, mb.index)
        .bind(b + 3, detail)
        .bind_blob(b + 4, {buf_.data() + desc_begin, desc_end - desc_begin});
  });
}

void Writer::do_op(SetSubmitDone& op) {
  if (auto it = held_.find(op.job_id); it != held_.end()) {
    write_held(op.job_id, it->second, it->second.entries.size());
  }
  submit_done_.bind(1, op.job_id).bind(2, op.total);
  submit_done_.run();
}

// Under load a mini-batch's dispatch and its result often fall in the same transaction. The
// result's UPDATE sets every column mark_running sets (state, tries), so the earlier UPDATE
// changes nothing that is committed and is skipped: one statement less per mini-batch, the
// same committed rows. An AttemptRecord *before* a MarkRunning (a retry) does not count.
void Writer::skip_superseded(std::span<Op> ops) {
  recorded_.clear();
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    if (auto* rec = std::get_if<std::unique_ptr<AttemptRecord>>(&*it)) {
      recorded_.insert(MiniBatchKey{(*rec)->result.job_id, (*rec)->result.index});
    } else if (auto* run = std::get_if<MarkRunning>(&*it)) {
      run->superseded = recorded_.contains(MiniBatchKey{run->job_id, run->index});
    }
  }
}

void Writer::do_op(MarkRunning& op) {
  if (op.superseded) return;
  if (HeldMiniBatch* e = find_held(op.job_id, op.index)) {
    e->running = true;
    e->tries = op.tries;
    return;
  }
  flush_attempts();  // a retry's earlier result must not overwrite this
  tallies_.running(op.job_id, op.index);
  mark_running_.bind(1, op.job_id).bind(2, op.index).bind(3, op.tries);
  mark_running_.run();
}

// Queues a result's two rows (its attempt, its mini-batch's new state) for flush_attempts(),
// and its output bytes for outputs_.write_and_sync(); `rec` must stay alive until then.
void Writer::do_op(AttemptRecord& rec) {
  QueuedAttempt q{&rec};
  const auto& r = rec.result;
  OutputFile* out = nullptr;
  if (rec.write_output) {
    const bool failed = !failed_outputs_.empty() && failed_outputs_.contains(r.job_id);
    if (!failed) out = output_for(r.job_id);
    // Rows its failed output file cannot take: the result is not recorded (the job has failed).
    if (out == nullptr && failed_outputs_.contains(r.job_id)) {
      drop_result(r);
      return;
    }
  }
  if (HeldMiniBatch* e = find_held(r.job_id, r.index)) {
    e->written = true;
    q.held = &e->mb;
    HeldJob& job = held_.find(r.job_id)->second;
    job.written_end = std::max(job.written_end, r.index + 1);
  }
  if (out != nullptr) {
    q.has_output = true;
    q.output_offset = outputs_.append(*out, rec.result.output);
  }
  attempts_.push_back(q);
}

// A result of a job whose output failed is not recorded: its mini-batch, marked running when it
// was dispatched, goes back to pending with the try given back, as the results taken back do,
// so that no mini-batch stays running in the ended job.
void Writer::drop_result(const proto::TaskResult& r) {
  const std::uint32_t tries = r.attempt > 0 ? r.attempt - 1 : 0;
  if (HeldMiniBatch* e = find_held(r.job_id, r.index)) {
    e->running = false;
    e->tries = tries;
    return;
  }
  flush_attempts();  // an earlier result of this mini-batch must not overwrite this
  reopen_minibatch_.bind(1, r.job_id).bind(2, r.index).bind(3, tries);
  reopen_minibatch_.run();
  tallies_.reopened(r.job_id, r.index);
}

// Writes the queued results' rows, up to 64 per statement.
void Writer::flush_attempts() {
  if (attempts_.empty()) return;
  for (const QueuedAttempt& q : attempts_) {
    const auto& r = q.rec->result;
    tallies_.attempt(r.job_id,
                     static_cast<proto::AttemptStatus>(r.status) != proto::AttemptStatus::RunDone);
    tallies_.result(r.job_id, r.index, row_state(q.rec->minibatch_state),
                    q.held != nullptr ? q.held->items.size() : r.items, r.succeeded, r.failed);
  }
  insert_attempt_.run(attempts_.size(), [this](Statement& st, int b, std::size_t i) {
    const AttemptRecord& rec = *attempts_[i].rec;
    const auto& r = rec.result;
    st.bind(b + 1, r.task_id)
        .bind(b + 2, r.job_id)
        .bind(b + 3, r.index)
        .bind(b + 4, r.attempt)
        .bind(b + 5, proto::to_string(static_cast<proto::AttemptStatus>(r.status)))
        .bind(b + 6, pool_row(rec.pool_id))
        .bind_text_or_null(b + 7, rec.pool_name)
        .bind_text_or_null(b + 8, r.node)
        .bind_text_or_null(b + 9, r.process)
        .bind(b + 10, r.worker_pid)
        .bind(b + 11, r.start)
        .bind(b + 12, r.elapsed_s)
        .bind(b + 13, r.cpu_s)
        .bind(b + 14, r.run_s)
        .bind(b + 15, r.items)
        .bind(b + 16, r.succeeded)
        .bind(b + 17, r.failed)
        .bind(b + 18, r.rows)
        .bind_text_or_null(b + 19, r.error_category)
        .bind_text_or_null(b + 20, r.error_message)
        .bind_text_or_null(b + 21, r.device)
        .bind_text_or_null(b + 22, r.cpus)
        .bind(b + 23, r.threads);
  });
  update_minibatch_.run(attempts_.size(), [this](Statement& st, int b, std::size_t i) {
    const QueuedAttempt& q = attempts_[i];
    const auto& r = q.rec->result;
    st.bind(b + 1, r.job_id)
        .bind(b + 2, r.index)
        .bind(b + 3, q.rec->minibatch_state)
        .bind(b + 4, r.attempt)
        .bind(b + 5, q.held != nullptr ? static_cast<std::uint64_t>(q.held->items.size())
                                       : static_cast<std::uint64_t>(r.items))
        .bind(b + 6, r.succeeded)
        .bind(b + 7, r.failed)
        .bind(b + 8, r.rows);
    if (q.has_output) {
      st.bind(b + 9, q.output_offset).bind(b + 10, static_cast<std::uint64_t>(r.output.size()));
    } else {
      st.bind_null(b + 9).bind_null(b + 10);
    }
  });
  // The inputs rows of the mini-batches whose first result this is.
  rows_.clear();
  for (const QueuedAttempt& q : attempts_) {
    if (q.held != nullptr) rows_.push_back(SubmittedRow{q.rec->result.job_id, q.held});
    if (q.has_output) {
      const auto& r = q.rec->result;
      output_attempts_.push_back(OutputAttempt{r.job_id, r.task_id, r.index, r.attempt});
    }
  }
  if (!rows_.empty()) write_inputs();
  if (listener_) keep_committed();
  SPDLOG_LOGGER_TRACE(log_, "{} attempts recorded", attempts_.size());
  attempts_.clear();
}

void Writer::do_op(FinishJob& op) {
  if (auto it = held_.find(op.job_id); it != held_.end()) {
    write_held(op.job_id, it->second, it->second.entries.size());
    held_.erase(it);
  }
  tallies_.job_finished(op.job_id);
  // A job whose output failed ends failed, for that reason, whatever else ended it meanwhile.
  if (auto f = failed_outputs_.find(op.job_id); f != failed_outputs_.end()) {
    finish_job_.bind(1, op.job_id).bind(2, "failed").bind(3, f->second).bind(4, op.ended);
  } else {
    finish_job_.bind(1, op.job_id).bind(2, op.state).bind(3, op.reason).bind(4, op.ended);
  }
  finish_job_.run();
  // Closed only after this batch's bytes are written and synced (see apply()).
  outputs_.close_after_batch(op.job_id);
}

void Writer::do_op(PoolRecord& p) {
  upsert_pool_.bind(1, p.id)
      .bind_text_or_null(2, p.name)
      .bind_text_or_null(3, p.node)
      .bind(4, p.workers)
      .bind(5, p.prefetch)
      .bind(6, p.pid)
      .bind_text_or_null(7, p.build)
      .bind_text_or_null(8, p.state)
      .bind(9, p.registered)
      .bind(10, p.last_seen)
      .bind_text_or_null(11, p.key_fingerprint);
  upsert_pool_.run();
  pool_row_.bind_text_or_null(1, p.name);
  if (pool_row_.step()) pool_rows_[p.id] = pool_row_.column_uint64(0);
  pool_row_.reset();
}

void Writer::do_op(PoolsSeen& op) {
  for (const auto& p : op.pools) {
    pool_seen_.bind(1, pool_row(p.id)).bind(2, p.id).bind(3, p.last_seen);
    pool_seen_.run();
  }
}

void Writer::do_op(MarkReported& op) {
  mark_reported_.bind(1, op.job_id).bind(2, op.when);
  mark_reported_.run();
}

std::uint64_t Writer::pool_row(std::uint64_t registration) const {
  auto it = pool_rows_.find(registration);
  return it == pool_rows_.end() ? registration : it->second;
}

void Writer::do_op(std::unique_ptr<ResourceRecord>& rec) {
  const auto& smp = rec->sample;
  const auto& n = smp.node;
  const std::uint64_t pool_id = pool_row(rec->pool_id);
  for (const std::uint64_t job_id : rec->job_ids) {
    insert_node_sample_.bind(1, job_id)
        .bind(2, pool_id)
        .bind_text_or_null(3, rec->pool_name)
        .bind_text_or_null(4, rec->node)
        .bind(5, smp.time)
        .bind(6, smp.interval_s)
        .bind(7, n.cpu_percent)
        .bind(8, n.mem_total_mb)
        .bind(9, n.mem_available_mb)
        .bind(10, n.mem_used_mb)
        .bind(11, n.disk_reads)
        .bind(12, n.disk_writes)
        .bind(13, n.disk_read_mb)
        .bind(14, n.disk_write_mb)
        .bind(15, n.net_sent_mb)
        .bind(16, n.net_recv_mb)
        .bind(17, n.tcp_connections)
        .bind(18, n.udp_connections);
    insert_node_sample_.run();
    for (const auto& d : smp.disks) {
      insert_disk_sample_.bind(1, job_id)
          .bind(2, pool_id)
          .bind_text_or_null(3, rec->pool_name)
          .bind_text_or_null(4, rec->node)
          .bind(5, smp.time)
          .bind(6, d.mount)
          .bind(7, d.total_mb)
          .bind(8, d.used_mb)
          .bind(9, d.free_mb)
          .bind(10, d.used_percent);
      insert_disk_sample_.run();
    }
    for (const auto& g : smp.gpus) {
      insert_gpu_sample_.bind(1, job_id)
          .bind(2, pool_id)
          .bind_text_or_null(3, rec->pool_name)
          .bind_text_or_null(4, rec->node)
          .bind(5, smp.time)
          .bind(6, g.index)
          .bind_text_or_null(7, g.uuid)
          .bind_text_or_null(8, g.name)
          .bind(9, g.util_percent)
          .bind(10, g.mem_used_mb)
          .bind(11, g.mem_total_mb);
      insert_gpu_sample_.run();
    }
  }
  for (const auto& p : smp.processes) {
    // A worker belongs to one job: its rows go to that job, if the sample counts for it.
    if (std::find(rec->job_ids.begin(), rec->job_ids.end(), p.job_id) == rec->job_ids.end()) {
      continue;
    }
    insert_process_sample_.bind(1, p.job_id)
        .bind(2, pool_id)
        .bind_text_or_null(3, rec->pool_name)
        .bind_text_or_null(4, rec->node)
        .bind(5, smp.time)
        .bind(6, p.process)
        .bind(7, p.pid)
        .bind(8, p.cpu_percent)
        .bind(9, p.rss_mb)
        .bind(10, p.reads)
        .bind(11, p.writes)
        .bind(12, p.read_mb)
        .bind(13, p.write_mb);
    insert_process_sample_.run();
  }
}

// The job's output file, opened on first use when the job was created before this process
// started (a resumed job). Null when the job has no output file (summary_only).
OutputFile* Writer::output_for(std::uint64_t job_id) {
  if (OutputFile* f = outputs_.find(job_id)) return f;
  job_output_.bind(1, job_id);
  std::string path;
  if (job_output_.step()) path = job_output_.column_text(0);
  job_output_.reset();
  if (path.empty()) return nullptr;
  try {
    return &outputs_.open(job_id, path);
  } catch (const Failure& f) {
    note_failed(job_id, std::string("cannot open its output file: ") + f.what());
    return nullptr;
  }
}

}  // namespace fanout::store::detail
