// Recovery after a restart. See recovery.hpp and docs/store.md, section 5.
#include "fanout/store/detail/recovery.hpp"

#include <unistd.h>

#include <string>
#include <utility>

#include "fanout/store/detail/encoding.hpp"
#include "fanout/store/detail/output_file.hpp"
#include "fanout/store/detail/tallies.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store::detail {

std::uint64_t reopen_failed(Db& db, std::uint64_t job_id) {
  Transaction tx(db);
  Statement job(db, "SELECT state FROM jobs WHERE id = ?1");
  job.bind(1, job_id);
  if (!job.step()) {
    throw Failure(ErrorCode::NotFound, db.path() + ": no job " + std::to_string(job_id));
  }
  job.reset();
  Statement reopen(db,
                   "UPDATE minibatches SET state = 'pending', tries = 0 "
                   "WHERE job_id = ?1 AND state = 'failed'");
  reopen.bind(1, job_id).run();
  const auto n = static_cast<std::uint64_t>(db.query_int("SELECT changes()"));
  if (n > 0) recount_tallies(db, job_id);
  Statement rerun(db,
                  "UPDATE jobs SET state = 'running', reason = '', ended = NULL "
                  "WHERE id = ?1 AND state != 'running'");
  rerun.bind(1, job_id).run();
  tx.commit();
  return n;
}

namespace {

// The remaining mini-batches of `u.job_id` in `states` (an SQL list), by index, into u: their
// items, detail and the tries used. False when stored items cannot be decoded.
bool load_remaining(Db& db, UnfinishedJob& u, const char* states) {
  Statement remaining(db, std::string("SELECT m.id, m.tries, i.descriptor, i.detail "
                                      "FROM minibatches m JOIN minibatch_inputs i "
                                      "ON i.job_id = m.job_id AND i.minibatch_id = m.id "
                                      "WHERE m.job_id = ?1 AND m.state IN (") +
                              states + ") ORDER BY m.id");
  remaining.bind(1, u.job_id);
  std::string detail;
  while (remaining.step()) {
    proto::MiniBatch mb;
    mb.index = remaining.column_uint64(0);
    if (!unpack_from(remaining.column_blob(2), mb.items)) return false;
    mb.detail = remaining.column_text(3);
    // A detail the store made up (the client sent none) is not handed on as the client's.
    detail.clear();
    append_default_detail(detail, mb.items);
    if (mb.detail == detail) mb.detail.clear();
    u.remaining.push_back(std::move(mb));
    u.remaining_tries.push_back(static_cast<std::uint32_t>(remaining.column_int64(1)));
  }
  return true;
}

}  // namespace

// Over 80 lines: its steps share one transaction, in an order that matters.
ReopenedJob reopen_job(Db& db, std::uint64_t job_id, const Logger& log) {
  Transaction tx(db);
  ReopenedJob out;
  UnfinishedJob& u = out.job;
  u.job_id = job_id;
  std::string output_path;
  {
    Statement job(db,
                  "SELECT state, spec, submit_done, total, output_path FROM jobs WHERE id = ?1");
    job.bind(1, job_id);
    if (!job.step()) {
      throw Failure(ErrorCode::NotFound, db.path() + ": no job " + std::to_string(job_id));
    }
    const std::string state(job.column_text(0));
    if (state == "succeeded") {
      throw Failure(ErrorCode::State,
                    "job " + std::to_string(job_id) + " succeeded: nothing failed to run again");
    }
    out.was_ended = state != "running" && state != "pending";
    if (!unpack_from(job.column_blob(1), u.spec)) {
      throw Failure(ErrorCode::State,
                    "job " + std::to_string(job_id) + ": the stored job spec cannot be decoded");
    }
    u.submit_done = job.column_int64(2) != 0;
    u.total = job.column_uint64(3);
    output_path = job.column_text(4);
  }
  // A live job's running mini-batches are in flight at its pools; an ended job's are not (its
  // end stopped them), and they go back to pending with the try given back, as recover() does.
  // The failed ones are marked 'reopening' first, so that a live job hands back only them.
  Statement mark(db,
                 "UPDATE minibatches SET state = 'reopening', tries = 0 "
                 "WHERE job_id = ?1 AND state = 'failed'");
  mark.bind(1, job_id).run();
  out.reopened = static_cast<std::uint64_t>(db.query_int("SELECT changes()"));
  if (out.was_ended) {
    Statement requeue(db,
                      "UPDATE minibatches SET state = 'pending', tries = max(tries - 1, 0) "
                      "WHERE job_id = ?1 AND state = 'running'");
    requeue.bind(1, job_id).run();
  }
  if (!load_remaining(db, u, out.was_ended ? "'pending', 'reopening'" : "'reopening'")) {
    throw Failure(ErrorCode::State, "job " + std::to_string(job_id) +
                                        ": the stored items of a mini-batch cannot be decoded");
  }
  Statement pend(db,
                 "UPDATE minibatches SET state = 'pending' "
                 "WHERE job_id = ?1 AND state = 'reopening'");
  pend.bind(1, job_id).run();
  recount_tallies(db, job_id);
  Statement rerun(db,
                  "UPDATE jobs SET state = 'running', reason = '', ended = NULL "
                  "WHERE id = ?1 AND state != 'running'");
  rerun.bind(1, job_id).run();
  Statement counts(db,
                   "SELECT succeeded, failed, items_succeeded, items_failed, attempts_failed "
                   "FROM job_counts WHERE job_id = ?1");
  counts.bind(1, job_id);
  if (counts.step()) {
    u.succeeded = counts.column_uint64(0);
    u.failed = counts.column_uint64(1);
    u.items_succeeded = counts.column_uint64(2);
    u.items_failed = counts.column_uint64(3);
    u.attempts_failed = counts.column_uint64(4);
  }
  counts.reset();
  if (out.was_ended && !output_path.empty()) {
    // What a failed write left past the committed rows goes, as at a restart (recover()).
    Statement output_end(db, R"sql(
SELECT max(coalesce((SELECT max(m.output_offset + m.output_bytes)
                     FROM jobs j JOIN minibatches m ON m.job_id = j.id
                     WHERE j.output_path = ?2 AND m.output_offset IS NOT NULL), 0),
           coalesce((SELECT output_start FROM jobs WHERE id = ?1), 0)))sql");
    output_end.bind(1, job_id).bind(2, output_path);
    const std::uint64_t end = output_end.step() ? output_end.column_uint64(0) : 0;
    output_end.reset();
    restore_output(output_path, end, log);
  }
  tx.commit();
  return out;
}

// Over 80 lines: its steps share one transaction and its statements, in an order that matters.
std::vector<UnfinishedJob> recover(Db& db, const Logger& log) {
  Transaction tx(db);
  Statement jobs(db,
                 "SELECT id, spec, submit_done, total, output_path, owner_uid FROM jobs "
                 "WHERE state IN ('pending', 'running') ORDER BY id");
  Statement counts(db,
                   "SELECT succeeded, failed, items_succeeded, items_failed, attempts_failed "
                   "FROM job_counts WHERE job_id = ?1");
  Statement remaining(db,
                      "SELECT m.id, m.state, m.tries, i.descriptor, i.detail FROM minibatches m "
                      "JOIN minibatch_inputs i ON i.job_id = m.job_id AND i.minibatch_id = m.id "
                      "WHERE m.job_id = ?1 AND m.state IN ('pending', 'running') ORDER BY m.id");
  // Where the file is cut back to: never below the end of rows that any job sharing the file
  // committed (another job's rows may follow this one's), nor below the size the file had when
  // this job started (what was there before is not this job's to remove).
  Statement output_end(db, R"sql(
SELECT max(coalesce((SELECT max(m.output_offset + m.output_bytes)
                     FROM jobs j JOIN minibatches m ON m.job_id = j.id
                     WHERE j.output_path = ?2 AND m.output_offset IS NOT NULL), 0),
           coalesce((SELECT output_start FROM jobs WHERE id = ?1), 0)))sql");
  Statement requeue(db,
                    "UPDATE minibatches SET state = 'pending', tries = max(tries - 1, 0) "
                    "WHERE job_id = ?1 AND state = 'running'");
  Statement fail_job(db, "UPDATE jobs SET state = 'failed', reason = ?2, ended = ?3 WHERE id = ?1");

  std::vector<UnfinishedJob> out;
  std::vector<std::pair<std::uint64_t, std::string>> broken;  // job id, reason
  struct Output {
    std::uint64_t job_id = 0;
    std::string path{};
    std::uint64_t end = 0;  // committed end
  };
  std::vector<Output> outputs;
  std::string detail;
  const auto me = static_cast<std::int64_t>(::geteuid());
  while (jobs.step()) {
    UnfinishedJob u;
    u.job_id = jobs.column_uint64(0);
    // Another user's job is not ours to run: left as it is, for its own user's interchange.
    // (NULL: recorded before owner_uid existed, in this store whose files are ours.)
    if (!jobs.is_null(5) && jobs.column_int64(5) != me) {
      log->warn(
          "job {}: not resumed: it was submitted to an interchange running as uid {}, and "
          "this one runs as uid {}; only that user's interchange resumes it",
          u.job_id, jobs.column_int64(5), me);
      continue;
    }
    if (!unpack_from(jobs.column_blob(1), u.spec)) {
      broken.emplace_back(u.job_id, "cannot resume: the stored job spec cannot be decoded");
      continue;
    }
    u.submit_done = jobs.column_int64(2) != 0;
    u.total = jobs.column_uint64(3);
    const std::string output_path(jobs.column_text(4));

    counts.bind(1, u.job_id);
    if (counts.step()) {
      u.succeeded = counts.column_uint64(0);
      u.failed = counts.column_uint64(1);
      u.items_succeeded = counts.column_uint64(2);
      u.items_failed = counts.column_uint64(3);
      u.attempts_failed = counts.column_uint64(4);
    }
    counts.reset();

    bool ok = true;
    remaining.bind(1, u.job_id);
    while (remaining.step()) {
      proto::MiniBatch mb;
      mb.index = remaining.column_uint64(0);
      auto tries = static_cast<std::uint32_t>(remaining.column_int64(2));
      // A running mini-batch's last try was dispatched but never recorded: it is given back.
      if (remaining.column_text(1) == "running" && tries > 0) --tries;
      if (!unpack_from(remaining.column_blob(3), mb.items)) {
        broken.emplace_back(u.job_id, "cannot resume: the stored items of mini-batch " +
                                          std::to_string(mb.index) + " cannot be decoded");
        ok = false;
        break;
      }
      mb.detail = remaining.column_text(4);
      // A detail the store made up (the client sent none) is not handed on as the client's.
      detail.clear();
      append_default_detail(detail, mb.items);
      if (mb.detail == detail) mb.detail.clear();
      u.remaining.push_back(std::move(mb));
      u.remaining_tries.push_back(tries);
    }
    remaining.reset();
    if (!ok) continue;

    if (!output_path.empty()) {
      output_end.bind(1, u.job_id).bind(2, output_path);
      const std::uint64_t end = output_end.step() ? output_end.column_uint64(0) : 0;
      output_end.reset();
      outputs.push_back(Output{u.job_id, output_path, end});
    }
    out.push_back(std::move(u));
  }
  jobs.reset();

  for (const auto& u : out) {
    requeue.bind(1, u.job_id);
    requeue.run();
    if (db.query_int("SELECT changes()") > 0) recount_tallies(db, u.job_id);
  }
  const double now = unix_now();
  for (const auto& [id, reason] : broken) {
    log->error("store {}: job {} {}; marked failed", db.path(), id, reason);
    fail_job.bind(1, id).bind(2, reason).bind(3, now);
    fail_job.run();
  }
  for (const auto& o : outputs) {
    try {
      restore_output(o.path, o.end, log);
    } catch (const Failure& f) {
      // A job whose output file cannot be restored (a full or read-only disk) is not resumed:
      // it is marked failed, and the interchange starts with the others instead of stopping
      // at every start.
      const std::string reason = std::string("cannot resume: its output file: ") + f.what();
      log->error("store {}: job {} {}; marked failed", db.path(), o.job_id, reason);
      fail_job.bind(1, o.job_id).bind(2, reason).bind(3, now);
      fail_job.run();
      std::erase_if(out, [&](const UnfinishedJob& u) { return u.job_id == o.job_id; });
    }
  }
  // Pools connected to the previous interchange process are gone with it: one that is still
  // alive registers again, as a new row.
  Statement stale(db, "UPDATE pools SET state = 'lost', last_seen = ?1 WHERE state = 'connected'");
  stale.bind(1, now);
  stale.run();
  tx.commit();
  return out;
}

}  // namespace fanout::store::detail
