// The store's writer: applies a run of queued operations as one SQLite transaction, holding
// submitted mini-batches back to write them with their first result, writing results many rows
// per statement, and appending succeeded mini-batches' rows to their job's output file before
// the commit. Private to the store. Schema and the output file's rules: docs/store.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fanout/protocol/messages.hpp"
#include "fanout/store/committed_attempt.hpp"
#include "fanout/store/db.hpp"
#include "fanout/store/detail/multi_row.hpp"
#include "fanout/store/detail/ops.hpp"
#include "fanout/store/detail/output_file.hpp"
#include "fanout/store/detail/tallies.hpp"
#include "fanout/store/records.hpp"
#include "fanout/util/log.hpp"

namespace fanout::store::detail {

// A submitted mini-batch whose rows the writer holds back (see Writer, "Deferred submission").
struct HeldMiniBatch {
  proto::MiniBatch mb{};
  std::chrono::steady_clock::time_point added{};
  std::uint32_t tries = 0;
  bool running = false;  // dispatched (a MarkRunning came for it)
  bool written = false;  // its rows went in with its first result
};

// One job's held mini-batches: consecutive indexes from `first`, in submission order.
struct HeldJob {
  std::uint64_t first = 0;
  std::deque<HeldMiniBatch> entries{};
  std::uint64_t written_end = 0;  // 1 + the highest index written with a result this transaction
};

// A mini-batch whose minibatches and minibatch_inputs rows are being written.
struct SubmittedRow {
  std::uint64_t job_id = 0;
  const proto::MiniBatch* mb = nullptr;
  std::uint32_t tries = 0;
  bool running = false;
};

struct MiniBatchKey {
  std::uint64_t job_id = 0;
  std::uint64_t index = 0;
  bool operator==(const MiniBatchKey&) const = default;
};
struct MiniBatchKeyHash {
  std::size_t operator()(const MiniBatchKey& k) const noexcept {
    return std::hash<std::uint64_t>{}(k.index * 0x9e3779b97f4a7c15ULL ^ k.job_id);
  }
};

// The writer's state: statements prepared once on the writer connection, reusable buffers, the
// held submissions and the open output files. Borrows `db` (a migrated store), which must
// outlive it. Not thread-safe: TaskStore uses it only with its connection's mutex held.
class Writer final {
 public:
  // Prepares the statements. Throws Failure{Database}.
  Writer(Db& db, Logger log);
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Applies `ops` in one transaction: rows first, then the output bytes are written and synced,
  // then the transaction commits, so a committed offset always points at durable bytes. An
  // empty `ops` writes only the held mini-batches that are due. `ops` must stay alive until the
  // call returns (results are bound, not copied). Throws Failure on any error; the transaction
  // is then rolled back and the output files are cut back to where the batch began.
  void apply(std::span<Op> ops);

  // After each commit, `listener` gets the attempts committed (none when null).
  void set_listener(AttemptListener listener) { listener_ = std::move(listener); }

  // Jobs whose output file failed (see "A job's storage failure" in writer.cpp) since the last
  // call, with the reason recorded for each; the store marked each failed in the transaction
  // that committed last.
  [[nodiscard]] std::vector<std::pair<std::uint64_t, std::string>> take_failed_jobs() {
    return std::exchange(newly_failed_, {});
  }

  // Rows were changed by statements of another part of the store (recovery, resume
  // --failed), which counted their jobs in full: what the writer knew of them is forgotten.
  void forget_rows() { tallies_.forget_all(); }
  // Job `job_id` was reopened (detail::reopen_job): its rows are forgotten as above, and an
  // output file that had failed is tried again.
  void reopened(std::uint64_t job_id) {
    tallies_.forget_all();
    failed_outputs_.erase(job_id);
  }

  // When the oldest held mini-batch is due to be written without a result (max: none held);
  // apply({}) at that time writes it.
  [[nodiscard]] std::chrono::steady_clock::time_point held_due() const;

 private:
  struct QueuedAttempt {
    AttemptRecord* rec = nullptr;
    const proto::MiniBatch* held = nullptr;  // its rows go in with this result (held_)
    bool has_output = false;
    std::uint64_t output_offset = 0;
  };

  void do_op(std::unique_ptr<CreateJob>& op);
  void do_op(AddMiniBatches& op);
  void do_op(WriteSubmitted&);
  void do_op(SetSubmitDone& op);
  void do_op(MarkRunning& op);
  void do_op(std::unique_ptr<AttemptRecord>& rec) { do_op(*rec); }
  void do_op(AttemptRecord& rec);
  void do_op(FinishJob& op);
  void do_op(std::unique_ptr<PoolRecord>& p) { do_op(*p); }
  void do_op(PoolRecord& p);
  void do_op(MarkReported& op);
  void do_op(PoolsSeen& op);
  void do_op(std::unique_ptr<ResourceRecord>& rec);

  HeldMiniBatch* find_held(std::uint64_t job_id, std::uint64_t index);
  void write_held(std::uint64_t job_id, HeldJob& job, std::size_t n);
  void write_due_submitted();
  void write_inputs();
  void skip_superseded(std::span<Op> ops);
  void flush_attempts();
  void drop_result(const proto::TaskResult& r);
  void keep_committed();
  void hand_on_committed();
  OutputFile* output_for(std::uint64_t job_id);
  // The job's output file cannot be written: its rows of this transaction are taken back and
  // the job is marked failed with `reason` (see writer.cpp).
  void fail_job_output(std::uint64_t job_id, const std::string& reason);
  // Records `reason` as the job's storage failure, once.
  void note_failed(std::uint64_t job_id, const std::string& reason);
  // The pools row of a registration id (itself when unknown, e.g. 0).
  [[nodiscard]] std::uint64_t pool_row(std::uint64_t registration) const;

  Logger log_;
  Db& db_;
  Statement insert_job_;
  MultiRow insert_minibatch_;
  MultiRow insert_input_;
  Statement submit_done_;
  Statement mark_running_;
  MultiRow insert_attempt_;
  MultiRow update_minibatch_;
  Statement finish_job_;
  Statement upsert_pool_;
  Statement pool_row_;
  Statement pool_seen_;
  Statement mark_reported_;
  Statement job_output_;
  Statement insert_node_sample_;
  Statement insert_process_sample_;
  Statement insert_disk_sample_;
  Statement insert_gpu_sample_;
  msgpack::sbuffer buf_{1024};
  std::string detail_;
  std::vector<std::pair<std::size_t, std::size_t>> ends_;  // AddMiniBatches: buf_, detail_ ends
  std::vector<QueuedAttempt> attempts_;              // results of the current run of AttemptRecords
  std::unordered_map<std::uint64_t, HeldJob> held_;  // by job id: see "Deferred submission"
  std::vector<SubmittedRow> rows_;                   // write_held() and write_inputs() scratch
  OutputFiles outputs_;
  // Registration id (what the interchange calls the pool id) -> its pools row's id.
  std::unordered_map<std::uint64_t, std::uint64_t> pool_rows_;
  std::unordered_set<MiniBatchKey, MiniBatchKeyHash> recorded_;  // skip_superseded() scratch
  AttemptListener listener_{};
  // This transaction's attempts for listener_, and the records their text is moved from once
  // committed (parallel).
  std::vector<CommittedAttempt> committed_;
  std::vector<AttemptRecord*> committed_recs_;
  // This transaction's results with output bytes (task id, mini-batch, try), by job.
  struct OutputAttempt {
    std::uint64_t job_id = 0, task_id = 0, index = 0;
    std::uint32_t attempt = 0;
  };
  std::vector<OutputAttempt> output_attempts_;
  // Jobs whose output file failed, and why: their later results with rows are not recorded.
  std::unordered_map<std::uint64_t, std::string> failed_outputs_;
  std::vector<std::pair<std::uint64_t, std::string>> pending_failed_;  // this transaction
  std::vector<std::pair<std::uint64_t, std::string>> newly_failed_;    // for take_failed_jobs()
  Statement drop_attempt_;
  Statement reopen_minibatch_;
  Statement fail_job_;
  Tallies tallies_;  // job_tallies, counted as rows are written
};

}  // namespace fanout::store::detail
