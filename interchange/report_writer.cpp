// The report writer thread. See report_writer.hpp.
#include "interchange/report_writer.hpp"

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <optional>

#include "fanout/report/job_report.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/error.hpp"

namespace fanout::ix {

ReportWriter::ReportWriter(std::string db_path, std::uint64_t first_task_id)
    : db_path_(std::move(db_path)),
      first_task_id_(first_task_id),
      wake_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
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
    queue_.push_back(Request{job_id, std::move(log_dir), std::chrono::steady_clock::now()});
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

namespace {

constexpr auto kTick = std::chrono::milliseconds(50);
// Rows held above a hole before the thread stops building reports as jobs run (a task that
// runs very long holds every row after it); those jobs' reports are then written in one pass
// at their end.
constexpr std::size_t kMaxHeld = 200000;
constexpr std::size_t kMaxLookups = 20000;  // holes looked up per tick

}  // namespace

void ReportWriter::watch(std::uint64_t job_id, std::string log_dir) {
  {
    std::lock_guard lk(mu_);
    watch_queue_.emplace_back(job_id, std::move(log_dir));
  }
  work_cv_.notify_one();
}

void ReportWriter::skip(const std::vector<std::uint64_t>& task_ids) {
  std::lock_guard lk(mu_);
  skip_queue_.insert(skip_queue_.end(), task_ids.begin(), task_ids.end());
}

void ReportWriter::give_up(const std::string& why) {
  // Every report being built is dropped (its temporary file removed) and written in one pass
  // at its job's end.
  for (auto& [id, w] : watched_) w->builder.reset();
  // Jobs accepted later start after the ids seen.
  first_task_id_ = order_ ? order_->max_seen() + 1 : first_task_id_;
  order_.reset();
  src_.reset();
  (void)why;
}

void ReportWriter::take_watches(std::vector<std::pair<std::uint64_t, std::string>> watches) {
  for (auto& [job_id, dir] : watches) {
    auto w = std::make_unique<Watched>();
    w->log_dir = dir;
    try {
      if (!src_) {
        src_ = std::make_unique<store::ReportSource>(db_path_);
        src_->finish();  // each tick reads in a transaction of its own
      }
      if (!order_) order_ = std::make_unique<AttemptOrder>(first_task_id_);
      w->builder = std::make_unique<report::JobReportBuilder>(job_id, dir);
    } catch (const Failure&) {
      w->builder.reset();  // written in one pass at the end
    }
    watched_[job_id] = std::move(w);
  }
}

void ReportWriter::tick() {
  if (!order_ || !src_) return;
  std::vector<std::uint64_t> skips;
  {
    std::lock_guard lk(mu_);
    skips.swap(skip_queue_);
  }
  try {
    src_->begin();
    for (auto id : skips) order_->skip(id);
    auto wanted = [this](const store::AttemptRow& a) {
      auto it = watched_.find(a.job_id);
      return it != watched_.end() && it->second->builder != nullptr;
    };
    for (auto id : order_->missing(kMaxLookups)) {
      (void)src_->attempt_by_id(id,
                                [&](const store::AttemptRow& a) { order_->arrive(a, wanted(a)); });
    }
    src_->each_attempt_after(order_->max_seen(),
                             [&](const store::AttemptRow& a) { order_->arrive(a, wanted(a)); });
    order_->release([&](const store::AttemptRow& a) {
      auto it = watched_.find(a.job_id);
      if (it == watched_.end() || !it->second->builder) return;
      try {
        it->second->builder->add(a);
      } catch (const Failure&) {
        it->second->builder.reset();
      }
    });
    src_->finish();
    if (order_->held() > kMaxHeld) give_up("too many attempts held above a hole");
  } catch (const Failure& f) {
    give_up(f.what());
  }
}

ReportWriter::Done ReportWriter::write(const Request& req) {
  Done d;
  d.job_id = req.job_id;
  const double cpu0 = thread_cpu_seconds();
  const auto t0 = req.submitted;  // a tick under way delays the report: counted
  Expected<std::vector<std::string>> r = std::vector<std::string>{};
  bool done = false;
  if (auto it = watched_.find(req.job_id);
      it != watched_.end() && it->second->builder && it->second->log_dir == req.log_dir) {
    // The job's final state is committed: its last attempts are in (this tick reads them), and
    // every row of it held above another job's hole can go.
    tick();
    auto& b = it->second->builder;  // reset by tick() if it gave up
    if (b && order_ && src_) {
      try {
        order_->release_job(req.job_id, [&](const store::AttemptRow& a) { b->add(a); });
        src_->begin();
        r = b->finish(*src_, true);
        src_->finish();
        done = true;
      } catch (const Failure& f) {
        try {
          src_->finish();
        } catch (const Failure&) {
        }
      }
    }
  }
  watched_.erase(req.job_id);  // a builder not finished removes its temporary file
  if (!done) {
    // The CSVs and report.html (docs/tuning.md) from one pass over the job's attempts. A job
    // not built while it ran may have been resumed here: the temporary files of an interchange
    // killed while building its report go too (a job built here from its start has none).
    r = report::write_job_report(db_path_, req.job_id, req.log_dir, {.html = true});
    if (r) (void)remove_stale_temporaries(req.log_dir);
  }
  d.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  d.cpu_s = thread_cpu_seconds() - cpu0;
  if (r) {
    d.ok = true;
    d.files = r->size();
  } else {
    d.error = r.error().message;
  }
  return d;
}

void ReportWriter::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    auto ready = [this] { return stop_ || !queue_.empty() || !watch_queue_.empty(); };
    if (watched_.empty()) {
      work_cv_.wait(lk, ready);
    } else {
      work_cv_.wait_for(lk, kTick, ready);
    }
    if (stop_ && queue_.empty()) break;  // stop requested and nothing left
    auto watches = std::move(watch_queue_);
    watch_queue_.clear();
    std::optional<Request> req;
    if (!queue_.empty()) {
      req = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    lk.unlock();

    take_watches(std::move(watches));
    if (!req) {
      tick();
      lk.lock();
      continue;
    }
    Done d = write(*req);

    lk.lock();
    done_.push_back(std::move(d));
    busy_ = false;
    const std::uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
    idle_cv_.notify_all();
  }
}

}  // namespace fanout::ix
