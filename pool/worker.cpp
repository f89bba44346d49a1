// Worker process and pipe protocol. Frame: u32 little-endian length N, then N bytes: u8 kind +
// payload. See docs/worker-pipe.md.
#include "pool/worker.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fanout::pool {

namespace {

constexpr std::size_t kDoneHeader = 8 + 1 + 8 + 8 + 8 + 8;  // '<QBQQdd'
constexpr std::size_t kMarkerPayload = 8;                   // S and E: '<Q' task_id
constexpr std::uint32_t kMaxWorkerFrame = 512u * 1024u * 1024u;

template <typename T>
void put(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // x86-64 and aarch64 are little-endian
  s.append(b, sizeof(T));
}

template <typename T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

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
  w.started = Clock::now();
  return w;
}

namespace {

// Appends the T frame of `task` to `f` (docs/worker-pipe.md).
void append_task_frame(std::string& f, const proto::Task& task) {
  const std::size_t at = f.size();
  f.reserve(at + task_frame_bytes(task));
  put<std::uint32_t>(f, 0);  // length, patched below
  f.push_back('T');
  put<std::uint64_t>(f, task.task_id);
  put<std::uint64_t>(f, task.index);
  put<std::uint32_t>(f, static_cast<std::uint32_t>(task.detail.size()));
  put<std::uint32_t>(f, static_cast<std::uint32_t>(task.items.size()));
  f += task.detail;
  for (std::size_t i = 0; i < task.items.size(); ++i) {
    if (i > 0) f.push_back('\0');
    f += task.items[i];
  }
  auto len = static_cast<std::uint32_t>(f.size() - at - 4);
  std::memcpy(f.data() + at, &len, 4);
}

}  // namespace

std::size_t task_frame_bytes(const proto::Task& task) noexcept {
  std::size_t n = 4 + 1 + 8 + 8 + 4 + 4 + task.detail.size();
  for (const auto& it : task.items) n += it.size() + 1;
  return n - (task.items.empty() ? 0 : 1);
}

Expected<void> Worker::send_task(const proto::Task& task) {
  std::string f;
  append_task_frame(f, task);
  return write_all(to_.get(), f);
}

void Worker::enqueue(proto::Task task) {
  const std::size_t at = out_.size();
  append_task_frame(out_, task);
  queued_bytes_ += out_.size() - at;
  queued.push_back(std::move(task));
}

Expected<void> Worker::flush_queued() {
  if (out_.empty()) return {};
  auto r = write_all(to_.get(), out_);
  out_.clear();
  return r;
}

proto::Task Worker::pop_queued() {
  proto::Task t = std::move(queued.front());
  queued.pop_front();
  const std::size_t n = task_frame_bytes(t);
  queued_bytes_ = queued_bytes_ > n ? queued_bytes_ - n : 0;
  return t;
}

void Worker::clear_queued() noexcept {
  queued.clear();
  out_.clear();
  queued_bytes_ = 0;
}

void Worker::send_quit() {
  std::string f;
  put<std::uint32_t>(f, 1);
  f.push_back('Q');
  (void)write_all(to_.get(), f);
  to_.reset();
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
  while (buf_.size() - off >= 4) {
    auto len = get<std::uint32_t>(buf_.data() + off);
    if (len == 0 || len > kMaxWorkerFrame) {
      broken_ = "worker sent a frame of length " + std::to_string(len);
      return false;
    }
    if (buf_.size() - off - 4 < len) break;
    const char* p = buf_.data() + off + 4;
    const char kind = p[0];
    std::string_view payload(p + 1, len - 1);
    WorkerEvent ev;
    if (kind == 'R') {
      ev.kind = WorkerEvent::Kind::Ready;
      ev.text = std::string(payload);
    } else if (kind == 'L') {
      ev.kind = WorkerEvent::Kind::LoadError;
      ev.text = std::string(payload);
    } else if (kind == 'D' && payload.size() >= kDoneHeader) {
      ev.kind = WorkerEvent::Kind::Done;
      const char* q = payload.data();
      ev.task_id = get<std::uint64_t>(q);
      ev.status = static_cast<std::uint8_t>(q[8]);
      ev.n_result = get<std::uint64_t>(q + 9);
      auto out_len = get<std::uint64_t>(q + 17);
      ev.run_s = get<double>(q + 25);
      ev.cpu_s = get<double>(q + 33);
      if (out_len > payload.size() - kDoneHeader) {
        broken_ = "worker sent a done frame whose output overruns it";
        return false;
      }
      ev.output.assign(q + kDoneHeader, out_len);
      ev.error.assign(q + kDoneHeader + out_len, payload.size() - kDoneHeader - out_len);
    } else if (kind == 'S' || kind == 'E') {
      if (payload.size() != kMarkerPayload) {
        broken_ = std::string("worker sent a '") + kind + "' frame of " +
                  std::to_string(payload.size()) + " payload bytes (expected 8)";
        return false;
      }
      ev.kind = kind == 'S' ? WorkerEvent::Kind::RunStarted : WorkerEvent::Kind::RunEnded;
      ev.task_id = get<std::uint64_t>(payload.data());
    } else {
      broken_ = std::string("worker sent an unknown frame kind '") + kind + "'";
      return false;
    }
    out.push_back(std::move(ev));
    off += 4 + len;
  }
  buf_.erase(0, off);
  if (eof) broken_ = "worker closed its pipe";
  return !eof;
}

void Worker::begin_task(Clock::time_point now) {
  task_start = now;
  task_start_unix = unix_now();
  run_started = false;
  in_run = false;
  phase_start = now;
  overhead_used = Clock::duration::zero();
}

void Worker::terminate() { proc_.signal(SIGTERM); }
void Worker::kill_hard() { proc_.signal(SIGKILL); }

}  // namespace fanout::pool
