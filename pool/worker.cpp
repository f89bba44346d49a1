// A worker process and the pool's side of its pipe. Frames: pool/worker_pipe.hpp.
#include "pool/worker.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

namespace fanout::pool {

Expected<Worker> Worker::start(const WorkerLaunch& launch, std::uint64_t job_id, std::string name) {
  auto to = make_pipe();
  if (!to) return Unexpected{to.error()};
  auto from = make_pipe();
  if (!from) return Unexpected{from.error()};
  SpawnOptions so;
  so.argv = launch.argv;
  so.env_set = launch.env;
  so.cwd = launch.cwd;
  so.stdin_file = "null";
  so.stdout_file = launch.stdout_file;
  so.stderr_file = launch.stderr_file;
  so.fd_map = {{to->read.get(), 3}, {from->write.get(), 4}};
  // Its own process group: what run() starts goes with the worker when it is stopped or ends
  // (see ChildProcess), instead of outliving the job under init.
  so.kill_group = true;
  so.cpus = launch.cpus;
  auto child = ChildProcess::spawn(so);
  if (!child) return Unexpected{child.error()};
  Worker w;
  w.proc_ = std::move(*child);
  w.proc_.set_grace(std::chrono::milliseconds(0));  // the pool manages grace itself
  w.pid_ = w.proc_.pid();
  w.to_ = std::move(to->write);
  w.from_ = std::move(from->read);
  set_nonblocking(w.from_.get());
  w.job_id_ = job_id;
  w.name_ = std::move(name);
  w.started_ = Clock::now();
  return w;
}

Expected<void> Worker::start_task(proto::Task&& task, Clock::time_point now) {
  std::string f;
  pipe::append_task(f, task.task_id, task.index, task.detail, task.items);
  if (auto r = write_all(to_.get(), f); !r) return r;
  tasks_.start(std::move(task), now);
  return {};
}

void Worker::enqueue(proto::Task task) {
  pipe::append_task(out_, task.task_id, task.index, task.detail, task.items);
  tasks_.enqueue(std::move(task));
}

Expected<void> Worker::flush_queued() {
  if (out_.empty()) return {};
  auto r = write_all(to_.get(), out_);
  out_.clear();
  return r;
}

void Worker::forget_tasks() noexcept {
  tasks_.forget_tasks();
  out_.clear();
}

std::deque<proto::Task> Worker::take_queued() {
  out_.clear();
  return tasks_.take_queued();
}

void Worker::cancel(Clock::time_point kill_at) {
  out_.clear();
  if (tasks_.cancel(kill_at)) {
    proc_.signal(SIGTERM);
  } else {
    send_quit();
  }
}

void Worker::retire(Clock::time_point kill_at) {
  send_quit();
  tasks_.retire(kill_at);
}

void Worker::time_out(StopCause why, Clock::time_point kill_at) {
  tasks_.time_out(why, kill_at);
  proc_.signal(SIGTERM);
}

void Worker::stop_for_memory(std::string note, Clock::time_point now) {
  if (state() == State::Starting) {
    abort_start("OUT_OF_MEMORY: " + note);
    return;
  }
  memory_note_ = std::move(note);
  // SIGKILL at once: a worker over its memory may take the node down in a grace period.
  tasks_.time_out(StopCause::OutOfMemory, now);
  kill_hard();
}

void Worker::abort_start(std::string why) {
  tasks_.load_failed(std::move(why));
  kill_hard();
}

void Worker::send_quit() {
  std::string f;
  pipe::append_frame(f, pipe::FrameKind::Quit, {});
  (void)write_all(to_.get(), f);
  to_.reset();
}

void Worker::kill_hard() {
  proc_.signal(SIGKILL);
  tasks_.killed();
}

bool Worker::read_events(std::vector<WorkerEvent>& out) {
  char tmp[65536];
  bool eof = false;
  while (true) {
    ssize_t n = ::read(from_.get(), tmp, sizeof tmp);
    if (n > 0) {
      buf_.append(tmp, static_cast<std::size_t>(n));
      if (static_cast<std::size_t>(n) < sizeof tmp) break;
      continue;
    }
    if (n == 0) {
      eof = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    eof = true;
    break;
  }
  std::size_t off = 0;
  while (true) {
    const pipe::Cut c = pipe::cut_frame(std::string_view(buf_).substr(off), pipe::kMaxReplyLength);
    if (c.status == pipe::Cut::Status::Partial) break;
    if (c.status == pipe::Cut::Status::BadLength) {
      broken_ = "worker sent a frame of length " + std::to_string(c.length);
      return false;
    }
    WorkerEvent ev;
    switch (c.kind) {
      case pipe::FrameKind::Ready:
        ev.kind = WorkerEvent::Kind::Ready;
        ev.text = std::string(c.payload);
        break;
      case pipe::FrameKind::LoadError:
        ev.kind = WorkerEvent::Kind::LoadError;
        ev.text = std::string(c.payload);
        break;
      case pipe::FrameKind::Done: {
        auto d = pipe::decode_done(c.payload);
        if (!d) {
          broken_ = "worker sent a bad frame: " + d.error().message;
          return false;
        }
        ev.kind = WorkerEvent::Kind::Done;
        ev.task_id = d->head.task_id;
        ev.status = d->head.status;
        ev.n_result = d->head.n_result;
        ev.run_s = d->head.run_s;
        ev.cpu_s = d->head.cpu_s;
        ev.output.assign(d->output);
        ev.error.assign(d->error);
        break;
      }
      case pipe::FrameKind::RunStarted:
      case pipe::FrameKind::RunEnded: {
        auto id = pipe::decode_marker(c.payload);
        if (!id) {
          broken_ = "worker sent a bad frame: " + id.error().message;
          return false;
        }
        ev.kind = c.kind == pipe::FrameKind::RunStarted ? WorkerEvent::Kind::RunStarted
                                                        : WorkerEvent::Kind::RunEnded;
        ev.task_id = *id;
        break;
      }
      default:  // T, Q, or no kind at all: not something a worker sends
        broken_ =
            std::string("worker sent an unknown frame kind '") + static_cast<char>(c.kind) + "'";
        return false;
    }
    out.push_back(std::move(ev));
    off += c.frame_bytes();
  }
  buf_.erase(0, off);
  if (eof) broken_ = "worker closed its pipe";
  return !eof;
}

}  // namespace fanout::pool
