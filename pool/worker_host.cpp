// fanout-worker's runtimes and pipe loop. Frames: pool/worker_pipe.hpp; native ABI:
// src/fanout/native/fanout_native.h; command runtime: docs/job-spec.md#runtimes-command-and-native.
#include "pool/worker_host.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "fanout/native/fanout_native.h"
#include "fanout/util/child_process.hpp"
#include "fanout/util/fd.hpp"
#include "fanout/util/fs.hpp"
#include "pool/cpu_shares.hpp"
#include "pool/worker_pipe.hpp"

namespace fanout::worker {

namespace {

// Rows beyond this would not fit a D frame (u32 length); the pool refuses larger ones anyway.
constexpr std::size_t kMaxOutput = 256u * 1024u * 1024u;
constexpr std::size_t kStderrTail = 4096;

double cpu_seconds_with_children() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  double s = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  rusage ru{};
  if (::getrusage(RUSAGE_CHILDREN, &ru) == 0) {
    s += static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  }
  return s;
}

// ---------------------------------------------------------------- native

// builtin:noop: the benchmark library. It keeps no rows and reports every item as succeeded;
// `--sleep-ms N` makes each mini-batch sleep N ms (fanout perf --sleep-ms).
long g_noop_sleep_ms = 0;
int noop_init(int argc, const char* const* argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--sleep-ms") == 0) g_noop_sleep_ms = std::atol(argv[i + 1]);
  }
  return 0;
}
std::int64_t noop_run(const fanout_batch* b, fanout_emit_fn, void*) {
  if (g_noop_sleep_ms > 0) {
    timespec ts{g_noop_sleep_ms / 1000, (g_noop_sleep_ms % 1000) * 1000000L};
    while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  return static_cast<std::int64_t>(b->n_items);
}

using InitFn = int (*)(int, const char* const*);
using RunFn = std::int64_t (*)(const fanout_batch*, fanout_emit_fn, void*);
using ShutdownFn = void (*)();
using ErrorFn = const char* (*)();
using VersionFn = std::uint32_t (*)();

struct EmitSink {
  std::string* out;
  std::uint64_t rows = 0;
  bool keep = true;
  bool full = false;
};

int emit_row(void* ctx, const char* row, std::size_t len) {
  auto* s = static_cast<EmitSink*>(ctx);
  ++s->rows;
  if (!s->keep) return 0;
  if (s->out->size() + len + 1 > kMaxOutput) {
    s->full = true;
    return -1;
  }
  s->out->append(row, len);
  s->out->push_back('\n');
  return 0;
}

class NativeRuntime final : public Runtime {
 public:
  explicit NativeRuntime(RuntimeOptions opts) : opts_(std::move(opts)) {}
  ~NativeRuntime() override {
    if (handle_ != nullptr) ::dlclose(handle_);
  }

  Expected<void> init() override {
    if (is_builtin_library(opts_.target)) {
      if (opts_.target != "builtin:noop") {
        return make_error(ErrorCode::InvalidArgument, "LoadError: unknown built-in library '" +
                                                          opts_.target + "' (known: builtin:noop)");
      }
      init_ = noop_init;
      run_ = noop_run;
    } else {
      handle_ = ::dlopen(opts_.target.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle_ == nullptr) {
        const char* why = ::dlerror();
        return make_error(ErrorCode::Io, fmt::format("LoadError: cannot load {}: {}", opts_.target,
                                                     why != nullptr ? why : "unknown error"));
      }
      init_ = reinterpret_cast<InitFn>(::dlsym(handle_, "fanout_init"));
      run_ = reinterpret_cast<RunFn>(::dlsym(handle_, "fanout_run"));
      shutdown_ = reinterpret_cast<ShutdownFn>(::dlsym(handle_, "fanout_shutdown"));
      error_ = reinterpret_cast<ErrorFn>(::dlsym(handle_, "fanout_last_error"));
      auto version = reinterpret_cast<VersionFn>(::dlsym(handle_, "fanout_abi_version"));
      if (init_ == nullptr || run_ == nullptr) {
        return make_error(ErrorCode::InvalidArgument,
                          fmt::format("LoadError: {} does not export {}", opts_.target,
                                      init_ == nullptr ? "fanout_init" : "fanout_run"));
      }
      if (version != nullptr && version() != FANOUT_NATIVE_ABI_VERSION) {
        return make_error(ErrorCode::InvalidArgument,
                          fmt::format("LoadError: {} implements native ABI {}, this fanout {}",
                                      opts_.target, version(), FANOUT_NATIVE_ABI_VERSION));
      }
    }
    std::vector<const char*> argv;
    argv.push_back(opts_.target.c_str());
    for (const auto& a : opts_.args) argv.push_back(a.c_str());
    argv.push_back(nullptr);
    const int rc = init_(static_cast<int>(argv.size() - 1), argv.data());
    if (rc != 0) {
      return make_error(ErrorCode::Runtime, with_category(fmt::format("{}: fanout_init returned {}",
                                                                      opts_.target, rc)));
    }
    return {};
  }

  void run(const Batch& b, Outcome& out) override {
    detail_.assign(b.detail.data(), b.detail.size());
    fanout_batch batch{b.index, b.items.data(), b.items.size(), detail_.c_str()};
    EmitSink sink{&out.output, 0, opts_.append_row, false};
    const std::int64_t r = run_(&batch, emit_row, &sink);
    if (sink.full) {
      out.status = pipe::DoneStatus::Raised;
      out.output.clear();
      out.error = fmt::format("OutputTooLarge: the rows of mini-batch {} exceed {} bytes", b.index,
                              kMaxOutput);
      return;
    }
    if (r < 0) {
      out.status = pipe::DoneStatus::Raised;
      out.output.clear();
      out.error = with_category(fmt::format("fanout_run returned {}", r));
      return;
    }
    out.n_result = static_cast<std::uint64_t>(r);
  }

  void shutdown() override {
    if (shutdown_ != nullptr) shutdown_();
  }

  std::string describe() const override { return "native " + opts_.target; }

 private:
  // The library's own message when it gave one, else "NativeError: <fallback>".
  std::string with_category(const std::string& fallback) const {
    const char* e = error_ != nullptr ? error_() : nullptr;
    if (e != nullptr && *e != '\0') {
      std::string s(e);
      const auto nl = s.find('\n');
      const auto colon = s.find(": ");
      if (colon != std::string::npos && colon < nl && colon <= 80) return s;
      return "NativeError: " + s;
    }
    return "NativeError: " + fallback;
  }

  RuntimeOptions opts_;
  void* handle_ = nullptr;
  InitFn init_ = nullptr;
  RunFn run_ = nullptr;
  ShutdownFn shutdown_ = nullptr;
  ErrorFn error_ = nullptr;
  std::string detail_{};
};

// ---------------------------------------------------------------- command

// The command running now, for the SIGTERM handler: the pool stops a worker whose run()
// overran its timeout with SIGTERM, and the command (its own process group) must go too.
std::atomic<pid_t> g_command_pgid{0};
char g_batch_file[4096] = {0};
char g_batch_nul_file[4096] = {0};
char g_tmp_dir[4096] = {0};

void on_term(int sig) {
  const pid_t pg = g_command_pgid.load();
  if (pg > 0) ::kill(-pg, SIGKILL);
  if (g_batch_file[0] != '\0') ::unlink(g_batch_file);
  if (g_batch_nul_file[0] != '\0') ::unlink(g_batch_nul_file);
  if (g_tmp_dir[0] != '\0') {
    // The output files are named in the folder; remove what we know, then the folder.
    char path[4200];
    for (const char* name : {"/stdout", "/stderr"}) {
      std::size_t n = std::strlen(g_tmp_dir);
      std::memcpy(path, g_tmp_dir, n);
      std::memcpy(path + n, name, std::strlen(name) + 1);
      ::unlink(path);
    }
    ::rmdir(g_tmp_dir);
  }
  ::_exit(128 + sig);
}

// 'it'"'"'s' quoting for /bin/sh.
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q.push_back(c);
    }
  }
  q.push_back('\'');
  return q;
}

class CommandRuntime final : public Runtime {
 public:
  explicit CommandRuntime(RuntimeOptions opts) : opts_(std::move(opts)) {}
  ~CommandRuntime() override { cleanup(); }

  Expected<void> init() override {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t != nullptr && *t != '\0' ? t : "/tmp") + "/fanout-cmd-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return make_error(ErrorCode::Io, fmt::format("LoadError: cannot create a folder {}: {}", tmpl,
                                                   std::strerror(errno)));
    }
    dir_ = tmpl;
    batch_file_ = dir_ + "/mini_batch.txt";
    batch_nul_file_ = dir_ + "/mini_batch.nul";
    out_file_ = dir_ + "/stdout";
    err_file_ = dir_ + "/stderr";
    if (dir_.size() < sizeof g_tmp_dir - 32) {
      std::memcpy(g_tmp_dir, dir_.c_str(), dir_.size() + 1);
      std::memcpy(g_batch_file, batch_file_.c_str(), batch_file_.size() + 1);
      std::memcpy(g_batch_nul_file, batch_nul_file_.c_str(), batch_nul_file_.size() + 1);
    }
    struct sigaction sa {};
    sa.sa_handler = on_term;
    ::sigaction(SIGTERM, &sa, nullptr);
    return {};
  }

  void run(const Batch& b, Outcome& out) override {
    if (auto r = write_lists(b); !r) return fail(out, "CommandError", r.error().message);
    for (const auto& f : {out_file_, err_file_}) {
      if (auto r = write_new(f, {}); !r) return fail(out, "CommandError", r.error().message);
    }
    auto child = ChildProcess::spawn(spawn_options(b));
    if (!child) return fail(out, "CommandError", child.error().message);
    g_command_pgid.store(child->pid());
    const ExitStatus st = child->wait();
    g_command_pgid.store(0);
    collect(st, b.items.size(), out);
  }

  void shutdown() override { cleanup(); }
  std::string describe() const override { return "command"; }

 private:
  // Two lists (docs/job-spec.md): the exact names, each ended by a NUL, and the documented
  // one-per-line list, where a newline inside a name would make two items of one (a file named
  // "x\nVICTIM" would hand the command a VICTIM). There each such newline is written as the two
  // characters `\n`: one line per item always, and such a name is exact only in the NUL list.
  [[nodiscard]] Expected<void> write_lists(const Batch& b) const {
    std::string list, nul_list;
    for (const char* it : b.items) {
      nul_list += it;
      nul_list.push_back('\0');
      for (const char* c = it; *c != '\0'; ++c) {
        if (*c == '\n') {
          list += "\\n";
        } else {
          list.push_back(*c);
        }
      }
      list.push_back('\n');
    }
    if (auto r = write_new(batch_file_, list); !r) return r;
    return write_new(batch_nul_file_, nul_list);
  }

  // The command line with the list files put in, under /bin/sh, its output to our files.
  [[nodiscard]] SpawnOptions spawn_options(const Batch& b) const {
    std::string line = opts_.target;
    auto replace_all = [&line](const std::string& token, const std::string& file) {
      const std::string quoted = shell_quote(file);
      for (auto pos = line.find(token); pos != std::string::npos;
           pos = line.find(token, pos + quoted.size())) {
        line.replace(pos, token.size(), quoted);
      }
    };
    replace_all("{mini_batch}", batch_file_);
    replace_all("{mini_batch_nul}", batch_nul_file_);
    SpawnOptions so;
    so.argv = {"/bin/sh", "-c", line, "sh"};
    so.argv.insert(so.argv.end(), opts_.args.begin(), opts_.args.end());
    so.env_set = {{"FANOUT_MINI_BATCH", batch_file_},
                  {"FANOUT_MINI_BATCH_NUL", batch_nul_file_},
                  {"FANOUT_MINI_BATCH_INDEX", std::to_string(b.index)},
                  {"FANOUT_MINI_BATCH_SIZE", std::to_string(b.items.size())}};
    so.stdin_file = "null";
    so.stdout_file = out_file_;
    so.stderr_file = err_file_;
    // Its own group, killed when the command ends: what it left running in the background
    // does not outlive the mini-batch.
    so.kill_group = true;
    return so;
  }

  // The outcome of the command that ended with `st` on `items` items: its rows, or why it failed.
  void collect(const ExitStatus& st, std::size_t items, Outcome& out) const {
    auto err_text = read_file(err_file_);
    const std::string err = err_text ? std::move(*err_text) : std::string();
    if (!err.empty()) {
      // The command's stderr also goes to the worker's own stderr log (logs/user/stderr/...).
      (void)write_all(2, err);
    }
    if (!st.success()) {
      std::string tail = err.size() > kStderrTail ? err.substr(err.size() - kStderrTail) : err;
      std::string what = st.signal > 0 ? st.describe() : fmt::format("exit code {}", st.code);
      if (st.code == 127) what += " (command not found?)";
      return fail(out, "CommandFailed",
                  fmt::format("command exited with {}\nstderr (tail):\n{}", what, tail));
    }
    auto out_text = read_file(out_file_);
    std::string rows = out_text ? std::move(*out_text) : std::string();
    std::uint64_t n = 0;
    for (char c : rows) n += c == '\n' ? 1 : 0;
    if (!rows.empty() && rows.back() != '\n') {
      rows.push_back('\n');
      ++n;
    }
    if (rows.size() > kMaxOutput) {
      return fail(out, "OutputTooLarge",
                  fmt::format("the command wrote more than {} bytes", kMaxOutput));
    }
    out.n_result = opts_.items_by_exit_status ? items : n;
    if (opts_.append_row) out.output = std::move(rows);
  }

  static void fail(Outcome& out, const char* category, const std::string& message) {
    out.status = pipe::DoneStatus::Raised;
    out.output.clear();
    out.error = fmt::format("{}: {}", category, message);
  }

  static Expected<void> write_new(const std::string& path, std::string_view text) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd.valid()) {
      return make_error(ErrorCode::Io, fmt::format("{}: {}", path, std::strerror(errno)));
    }
    return write_all(fd.get(), text);
  }

  void cleanup() {
    if (dir_.empty()) return;
    for (const auto& f : {batch_file_, batch_nul_file_, out_file_, err_file_}) ::unlink(f.c_str());
    ::rmdir(dir_.c_str());
    dir_.clear();
    g_tmp_dir[0] = '\0';
    g_batch_file[0] = '\0';
    g_batch_nul_file[0] = '\0';
  }

  RuntimeOptions opts_;
  std::string dir_{}, batch_file_{}, batch_nul_file_{}, out_file_{}, err_file_{};
};

// ---------------------------------------------------------------- pipe

void send_frame(int fd, pipe::FrameKind kind, std::string_view payload) {
  std::string f;
  pipe::append_frame(f, kind, payload);
  (void)write_all(fd, f);
}

}  // namespace

bool is_builtin_library(std::string_view target) { return target.rfind("builtin:", 0) == 0; }

Expected<std::unique_ptr<Runtime>> make_runtime(const RuntimeOptions& opts) {
  if (opts.kind == "native") return std::unique_ptr<Runtime>(new NativeRuntime(opts));
  if (opts.kind == "command") return std::unique_ptr<Runtime>(new CommandRuntime(opts));
  return make_error(ErrorCode::InvalidArgument,
                    "fanout-worker: runtime: expected command or native (got '" + opts.kind + "')");
}

namespace {

// Runs one task frame's mini-batch: its items, each ended by '\0' for the C ABI, are cut out of
// `items` (kept by the caller, as `batch` points into it). Returns run()'s seconds (0 when the
// frame was refused and `outcome` says why).
double run_one(Runtime& rt, const pipe::TaskView& task, Batch& batch, std::string& items,
               Outcome& outcome) {
  batch.task_id = task.task_id;
  batch.index = task.index;
  outcome = Outcome{};
  batch.items.clear();
  if (!task.detail_fits) {
    outcome.status = pipe::DoneStatus::Raised;
    outcome.error = "ProtocolError: the detail overruns the task frame";
    return 0;
  }
  // One copy of the items, so that each can end in its own '\0' for the C ABI.
  batch.detail = task.detail;
  items.assign(task.items);
  items.push_back('\0');
  if (task.n_items > 0) {
    batch.items.push_back(items.data());
    for (std::size_t i = 0; i + 1 < items.size(); ++i) {
      if (items[i] == '\0') batch.items.push_back(items.data() + i + 1);
    }
  }
  if (batch.items.size() != task.n_items) {
    outcome.status = pipe::DoneStatus::Raised;
    outcome.error =
        fmt::format("ProtocolError: expected {} items, found {}", task.n_items, batch.items.size());
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  rt.run(batch, outcome);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int serve(Runtime& rt, int in_fd, int out_fd) {
  if (auto r = rt.init(); !r) {
    send_frame(out_fd, pipe::FrameKind::LoadError, r.error().message);
    return 3;
  }
  send_frame(out_fd, pipe::FrameKind::Ready,
             fmt::format("{} fanout-worker {}", ::getpid(), rt.describe()));
  std::string buf;
  std::string replies;
  std::vector<char> chunk(1 << 16);
  Outcome outcome;
  Batch batch;
  std::string items;
  CpuShares cpu(cpu_seconds_with_children);
  bool quit = false;
  while (!quit) {
    ssize_t n = ::read(in_fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF (or a broken pipe): the pool went away or closed fd 3
    buf.append(chunk.data(), static_cast<std::size_t>(n));
    // Every complete frame in the buffer is answered, and the replies leave in one write.
    std::size_t off = 0;
    while (true) {
      // Any N a u32 holds is accepted: the pool writes the frames.
      const pipe::Cut c = pipe::cut_frame(std::string_view(buf).substr(off), UINT32_MAX);
      if (c.status == pipe::Cut::Status::Partial) break;
      if (c.status == pipe::Cut::Status::BadLength) {
        std::fprintf(stderr, "fanout-worker: protocol error: a frame of length 0\n");
        return 5;
      }
      if (c.kind == pipe::FrameKind::Quit) {
        quit = true;
        off += c.frame_bytes();
        break;
      }
      auto task = pipe::decode_task(c.payload);  // refused below unless it is a T frame
      if (c.kind != pipe::FrameKind::Task || !task) {
        std::fprintf(stderr, "fanout-worker: protocol error: unexpected frame '%c' of %u bytes\n",
                     static_cast<char>(c.kind), c.length);
        return 5;
      }
      const double run_s = run_one(rt, *task, batch, items, outcome);
      const std::size_t at = replies.size();
      pipe::append_done(replies,
                        pipe::DoneHead{batch.task_id, outcome.status, outcome.n_result, run_s, 0},
                        outcome.output, outcome.error);
      cpu.add(replies, at, run_s);
      off += c.frame_bytes();
    }
    if (off == buf.size()) {
      buf.clear();
    } else {
      buf.erase(0, off);
    }
    if (!replies.empty()) {
      cpu.settle(replies);
      if (!write_all(out_fd, replies)) break;  // the pool went away
      replies.clear();
    }
  }
  rt.shutdown();
  return 0;
}

}  // namespace fanout::worker
