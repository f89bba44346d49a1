// The report writer thread. See report_writer.hpp.
#include "interchange/report_writer.hpp"

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "fanout/report/job_report.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/error.hpp"

namespace fanout::ix {

ReportWriter::ReportWriter(std::string db_path)
    : db_path_(std::move(db_path)), wake_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!wake_.valid()) {
    throw Failure(
        Error{ErrorCode::Io, std::string("report writer: eventfd: ") + std::strerror(errno)});
  }
  thread_ = std::thread([this] {
    ::pthread_setname_np(::pthread_self(), "fanout-report");  // as top -H and perf show it
    run();
  });
}

ReportWriter::~ReportWriter() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_one();
  thread_.join();
}

void ReportWriter::submit(std::uint64_t job_id, std::string log_dir) {
  {
    std::lock_guard lk(mu_);
    queue_.push_back(Request{job_id, std::move(log_dir)});
  }
  work_cv_.notify_one();
}

std::vector<ReportWriter::Done> ReportWriter::take_done() {
  std::uint64_t count = 0;
  // Reset the eventfd before taking the list: a report finishing in between wakes us again.
  while (::read(wake_.get(), &count, sizeof count) < 0 && errno == EINTR) {
  }
  std::lock_guard lk(mu_);
  std::vector<Done> out;
  out.swap(done_);
  return out;
}

void ReportWriter::wait_idle() {
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [this] { return queue_.empty() && !busy_; });
}

void ReportWriter::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    work_cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stop requested and nothing left
    Request req = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();

    Done d;
    d.job_id = req.job_id;
    const double cpu0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    // The CSVs and report.html (docs/tuning.md) from one pass over the job's attempts.
    auto r = report::write_job_report(db_path_, req.job_id, req.log_dir, {.html = true});
    d.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    d.cpu_s = thread_cpu_seconds() - cpu0;
    if (r) {
      d.ok = true;
      d.files = r->size();
    } else {
      d.error = r.error().message;
    }

    lk.lock();
    done_.push_back(std::move(d));
    busy_ = false;
    const std::uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
    idle_cv_.notify_all();
  }
}

}  // namespace fanout::ix
