// The job reports (the logs/ folder of docs/store.md section 8), written off the interchange's
// poll loop: a report reads every attempt of its job, which takes seconds for a large job, and
// the loop must keep dispatching other jobs' tasks meanwhile.
// While a job runs, the thread builds its report from the attempts the store's writer hands it
// after each commit (committed(), in attempt id order: attempt_order.hpp), so that at the job's
// end only the small files are left: the end of a job costs about what its middle does.
// Thread rules: watch(), skip(), submit(), take_done() and fd() are called by the interchange
// loop only, committed() by the store's writer thread; the report thread reads the store
// through its own read-only connection.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fanout/report/job_report.hpp"
#include "fanout/store/committed_attempt.hpp"
#include "fanout/store/report_source.hpp"
#include "fanout/util/fd.hpp"
#include "interchange/attempt_order.hpp"

namespace fanout::ix {

class ReportWriter final {
 public:
  struct Done {
    std::uint64_t job_id = 0;
    bool ok = false;
    std::string error{};    // when !ok: why the report could not be written
    std::size_t files = 0;  // files written
    double wall_s = 0;      // from submit() (the job's final commit) to the report written
    double cpu_s = 0;       // CPU the writer thread used for it
    bool built_while_running = false;  // false: written in one pass at the end
  };

  // When the thread stops building reports as jobs run (they are then written in one pass at
  // their end).
  struct Limits {
    // Attempts held above a hole (a task that runs very long holds every attempt after it).
    std::size_t max_held = 200000;
    // Attempts handed on but not yet taken by the thread (it is writing another job's report in
    // one pass, or is starved of CPU).
    std::size_t max_inbox = 131072;
  };

  // Starts the writer thread. Throws Failure{Io} when the wake-up descriptor cannot be made.
  explicit ReportWriter(std::string db_path, Limits limits);
  explicit ReportWriter(std::string db_path) : ReportWriter(std::move(db_path), Limits{}) {}
  // Writes the reports still queued, then joins the thread.
  ~ReportWriter();
  ReportWriter(const ReportWriter&) = delete;
  ReportWriter& operator=(const ReportWriter&) = delete;

  // Starts building the report of `job_id` (just accepted, none of its tasks handed out yet)
  // into `log_dir` while it runs. `next_task_id`: the id the next task handed out gets.
  void watch(std::uint64_t job_id, std::string log_dir, std::uint64_t next_task_id);
  // Task ids taken but never handed out, or handed back unstarted: no attempt will have them.
  void skip(const std::vector<std::uint64_t>& task_ids);
  // The attempts a store transaction just committed (store::AttemptListener, on the store's
  // writer thread): taken when a report is being built, else left.
  void committed(std::vector<store::CommittedAttempt>& batch);
  // Queues the report of `job_id` into `log_dir`. The job's final state must already be
  // committed to the store.
  void submit(std::uint64_t job_id, std::string log_dir);
  // Readable (an eventfd) while take_done() has something to return.
  [[nodiscard]] int fd() const noexcept { return wake_.get(); }
  // The reports finished since the last call, in the order they were submitted.
  [[nodiscard]] std::vector<Done> take_done();
  // Blocks until every submitted report is done (used when the interchange stops).
  void wait_idle();

 private:
  struct Request {
    std::uint64_t job_id = 0;
    std::string log_dir{};
    std::chrono::steady_clock::time_point submitted{};
  };
  struct Watch {
    std::uint64_t job_id = 0;
    std::string log_dir{};
    std::uint64_t next_task_id = 0;
  };
  struct Watched {
    std::string log_dir{};
    std::unique_ptr<report::JobReportBuilder> builder{};  // null: one pass at the end
  };
  using Batches = std::vector<std::vector<store::CommittedAttempt>>;
  void run();
  void take_watches(std::vector<Watch> watches);
  void feed(const std::vector<std::uint64_t>& skips, Batches batches, bool overflow);
  void add(store::CommittedAttempt& a, report::JobReportBuilder& b, bool& reading);
  [[nodiscard]] bool building() const;
  void give_up();
  Done write(const Request& req);

  std::string db_path_;
  Limits limits_;
  UniqueFd wake_;
  std::mutex mu_;  // guards everything below up to the thread's own
  std::condition_variable work_cv_, idle_cv_;
  std::deque<Request> queue_{};
  std::vector<Watch> watch_queue_{};
  std::vector<std::uint64_t> skip_queue_{};
  Batches inbox_{};              // committed attempts not yet fed to the order
  std::size_t inbox_count_ = 0;  // attempts in inbox_
  bool overflow_ = false;        // inbox_ was full: some attempts were dropped
  bool feeding_ = false;         // a report is being built (or about to be): keep what commits
  std::vector<Done> done_{};
  bool busy_ = false;
  bool stop_ = false;
  // The report thread's own (no lock): reports being built, the order, the connection.
  std::map<std::uint64_t, std::unique_ptr<Watched>> watched_{};
  std::unique_ptr<AttemptOrder> order_{};
  std::unique_ptr<store::ReportSource> src_{};
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace fanout::ix
