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

ReportWriter::ReportWriter(std::string db_path, Limits limits)
    : db_path_(std::move(db_path)),
      limits_(limits),
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

void ReportWriter::watch(std::uint64_t job_id, std::string log_dir, std::uint64_t next_task_id) {
  {
    std::lock_guard lk(mu_);
    watch_queue_.push_back(Watch{job_id, std::move(log_dir), next_task_id});
    feeding_ = true;  // its attempts are all committed after this
  }
  work_cv_.notify_one();
}

void ReportWriter::skip(const std::vector<std::uint64_t>& task_ids) {
  std::lock_guard lk(mu_);
  if (feeding_) skip_queue_.insert(skip_queue_.end(), task_ids.begin(), task_ids.end());
}

void ReportWriter::committed(std::vector<store::CommittedAttempt>& batch) {
  {
    std::lock_guard lk(mu_);
    if (!feeding_ || overflow_) return;
    if (inbox_count_ + batch.size() > limits_.max_inbox) {
      overflow_ = true;
    } else {
      inbox_count_ += batch.size();
      inbox_.push_back(std::move(batch));
    }
  }
  work_cv_.notify_one();
}

bool ReportWriter::building() const {
  for (const auto& [id, w] : watched_) {
    if (w->builder) return true;
  }
  return false;
}

void ReportWriter::give_up() {
  // Every report being built is dropped (its temporary file removed) and written in one pass
  // at its job's end; the order starts again with the next job watched.
  for (auto& [id, w] : watched_) w->builder.reset();
  order_.reset();
}

void ReportWriter::take_watches(std::vector<Watch> watches) {
  for (auto& wa : watches) {
    auto w = std::make_unique<Watched>();
    w->log_dir = wa.log_dir;
    try {
      if (!src_) {
        src_ = std::make_unique<store::ReportSource>(db_path_);
        src_->finish();  // the thread reads in short transactions of its own
      }
      // Every task id from here on is handed out after this job was accepted: each will be
      // committed or skipped. With an order under way, the ids since are in it already.
      if (!order_) order_ = std::make_unique<AttemptOrder>(wa.next_task_id);
      w->builder = std::make_unique<report::JobReportBuilder>(wa.job_id, wa.log_dir);
    } catch (const Failure&) {
      w->builder.reset();  // written in one pass at the end
    }
    watched_[wa.job_id] = std::move(w);
  }
}

// One attempt to its report; the detail of a mini-batch whose inputs were written before its
// result (a task that ran longer than the writer holds a submission back, or a retry) is read
// from the store, in a read transaction begun on first need (`reading`).
void ReportWriter::add(store::CommittedAttempt& a, report::JobReportBuilder& b, bool& reading) {
  if (!a.detail_known) {
    if (!reading) {
      src_->begin();
      reading = true;
    }
    a.has_detail = src_->minibatch_detail(a.job_id, a.minibatch_id, a.detail);
    a.detail_known = true;
  }
  b.add(a.row());
}

void ReportWriter::feed(const std::vector<std::uint64_t>& skips, Batches batches, bool overflow) {
  if (overflow) give_up();
  if (!order_ || !src_) return;
  bool reading = false;
  try {
    auto to_report = [&](store::CommittedAttempt& a) {
      auto it = watched_.find(a.job_id);
      if (it == watched_.end() || !it->second->builder) return;
      try {
        add(a, *it->second->builder, reading);
      } catch (const Failure&) {
        it->second->builder.reset();  // written in one pass at the end
      }
    };
    for (auto id : skips) order_->skip(id);
    order_->release(to_report);  // what the skips alone let through
    // One commit at a time, as they came: what is held is measured after each, however many
    // commits waited for the thread.
    for (auto& batch : batches) {
      for (auto& a : batch) {
        auto it = watched_.find(a.job_id);
        order_->arrive_and_release(a, it != watched_.end() && it->second->builder != nullptr,
                                   to_report);
      }
      if (order_->held() > limits_.max_held) {
        give_up();
        break;
      }
    }
    if (reading) src_->finish();
  } catch (const Failure&) {
    if (reading) {
      try {
        src_->finish();
      } catch (const Failure&) {
      }
    }
    give_up();
  }
}

ReportWriter::Done ReportWriter::write(const Request& req) {
  Done d;
  d.job_id = req.job_id;
  const double cpu0 = thread_cpu_seconds();
  const auto t0 = req.submitted;  // time spent behind other work is counted
  Expected<std::vector<std::string>> r = std::vector<std::string>{};
  bool done = false;
  if (auto it = watched_.find(req.job_id);
      it != watched_.end() && it->second->builder && it->second->log_dir == req.log_dir) {
    // The job's final state is committed, and the store's writer handed its last attempts on
    // before that (they were fed with this request): every attempt of it held above another
    // job's hole can go.
    auto& b = it->second->builder;
    if (b && order_ && src_) {
      bool reading = false;
      try {
        order_->release_job(req.job_id, [&](store::CommittedAttempt& a) { add(a, *b, reading); });
        if (!reading) src_->begin();
        r = b->finish(*src_, true);
        src_->finish();
        done = true;
        d.built_while_running = true;
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
    work_cv_.wait(lk, [this] {
      return stop_ || !queue_.empty() || !watch_queue_.empty() || !inbox_.empty() || overflow_;
    });
    if (stop_ && queue_.empty()) break;  // stop requested and nothing left
    auto watches = std::move(watch_queue_);
    watch_queue_.clear();
    auto skips = std::move(skip_queue_);
    skip_queue_.clear();
    Batches batches = std::move(inbox_);
    inbox_.clear();
    inbox_count_ = 0;
    const bool overflow = overflow_;
    overflow_ = false;
    // A request's attempts were all committed, and so handed on, before it was submitted: they
    // are in `batches`.
    std::optional<Request> req;
    if (!queue_.empty()) {
      req = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    lk.unlock();

    take_watches(std::move(watches));
    feed(skips, std::move(batches), overflow);
    std::optional<Done> d;
    if (req) d = write(*req);
    const bool building_any = building();
    if (!building_any) order_.reset();

    lk.lock();
    feeding_ = building_any || !watch_queue_.empty();
    if (!feeding_) {
      inbox_.clear();
      inbox_count_ = 0;
      skip_queue_.clear();
    }
    if (!d) continue;
    done_.push_back(std::move(*d));
    busy_ = false;
    const std::uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
    idle_cv_.notify_all();
  }
}

}  // namespace fanout::ix
