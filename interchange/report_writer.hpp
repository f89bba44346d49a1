// The job reports (the logs/ folder of docs/store.md section 8), written off the interchange's
// poll loop: a report reads every attempt of its job, which takes seconds for a large job, and
// the loop must keep dispatching other jobs' tasks meanwhile.
// Thread rules: submit(), take_done() and fd() are called by the interchange loop only; the
// writer thread reads the store through its own read-only connection.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fanout/util/fd.hpp"

namespace fanout::ix {

class ReportWriter final {
 public:
  struct Done {
    std::uint64_t job_id = 0;
    bool ok = false;
    std::string error{};    // when !ok: why the report could not be written
    std::size_t files = 0;  // files written
    double wall_s = 0;      // time the report took
    double cpu_s = 0;       // CPU the writer thread used for it
  };

  // Starts the writer thread. Throws Failure{Io} when the wake-up descriptor cannot be made.
  explicit ReportWriter(std::string db_path);
  // Writes the reports still queued, then joins the thread.
  ~ReportWriter();
  ReportWriter(const ReportWriter&) = delete;
  ReportWriter& operator=(const ReportWriter&) = delete;

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
  };
  void run();

  std::string db_path_;
  UniqueFd wake_;
  std::mutex mu_;  // guards everything below
  std::condition_variable work_cv_, idle_cv_;
  std::deque<Request> queue_{};
  std::vector<Done> done_{};
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace fanout::ix
