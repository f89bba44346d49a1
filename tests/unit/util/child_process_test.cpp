// Tests for ChildProcess (src/fanout/util/child_process.hpp): exit codes and signals, stop() with
// its grace period, redirections, environment, fd mapping, and reaping (never a zombie).
#include "fanout/util/child_process.hpp"

#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fanout/util/fd.hpp"

#include "scratch_dir.hpp"

using fanout::ChildProcess;
using fanout::ExitStatus;
using fanout::SpawnOptions;
using namespace std::chrono_literals;

using fanout::test::ScratchDir;
using fanout::test::slurp;

namespace {

namespace fs = std::filesystem;

// Polls `pred` every few milliseconds until it holds or `timeout` passes.
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

ChildProcess spawn(SpawnOptions opts) {
  auto c = ChildProcess::spawn(opts);
  if (!c) FAIL(c.error().message);
  REQUIRE(c->valid());
  return std::move(c).value();
}

ChildProcess spawn_argv(std::vector<std::string> argv) {
  SpawnOptions opts;
  opts.argv = std::move(argv);
  return spawn(std::move(opts));
}

// Waits a bounded time; a child still running after it fails the test (and is stopped).
ExitStatus finish(ChildProcess& c, std::chrono::milliseconds timeout = 10s) {
  auto st = c.wait_for(timeout);
  REQUIRE_MESSAGE(st.has_value(), "child still running after ", timeout.count(), " ms");
  return *st;
}

// True when `pid` is a child of ours that has not been reaped (still running, or a zombie).
// WNOWAIT leaves it unreaped.
bool is_our_child(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

// The state letter of /proc/<pid>/stat ('Z' for a zombie), or '\0' when there is no such process.
char proc_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return '\0';
  auto close = line.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos || close + 2 >= line.size()) return '\0';
  return line[close + 2];
}

// Waits until the child runs `comm` (its exec is done). Signalling a child between fork and exec
// is a separate case, tested in stop_right_after_spawn_uses_sigterm.
void wait_exec(const ChildProcess& c, const std::string& comm) {
  const std::string path = "/proc/" + std::to_string(c.pid()) + "/comm";
  REQUIRE(wait_until([&] { return slurp(path) == comm + "\n"; }, 10s));
}

int g_handler_pipe = -1;  // written by note_sigterm

extern "C" void note_sigterm(int /*sig*/) {
  const char c = 'x';
  ssize_t r = ::write(g_handler_pipe, &c, 1);
  (void)r;
}

}  // namespace

TEST_CASE("util.child_process.true_exits_zero") {
  auto c = spawn_argv({"true"});
  CHECK(c.pid() > 0);
  auto st = finish(c);
  CHECK(st.code == 0);
  CHECK(st.signal == 0);
  CHECK(st.success());
  CHECK(st.describe() == "exit code 0");
  CHECK_FALSE(c.valid());  // reaped
}

TEST_CASE("util.child_process.exit_code") {
  auto c = spawn_argv({"sh", "-c", "exit 7"});
  auto st = finish(c);
  CHECK(st.code == 7);
  CHECK(st.signal == 0);
  CHECK_FALSE(st.success());
  CHECK(st.describe() == "exit code 7");
  // The status is kept: asking again gives the same answer.
  CHECK(c.poll()->code == 7);
  CHECK(c.wait().code == 7);
  CHECK(c.stop().code == 7);
}

TEST_CASE("util.child_process.killed_by_signal") {
  auto c = spawn_argv({"sleep", "30"});
  wait_exec(c, "sleep");
  c.signal(SIGKILL);
  auto st = finish(c);
  CHECK(st.signal == SIGKILL);
  CHECK(st.code == -1);
  CHECK_FALSE(st.success());
  const std::string d = st.describe();
  CHECK(d.find("signal 9") != std::string::npos);
  CHECK(d.find("Killed") != std::string::npos);
}

TEST_CASE("util.child_process.stop_sends_sigterm_first") {
  auto c = spawn_argv({"sleep", "30"});
  wait_exec(c, "sleep");
  c.set_grace(100ms);
  const auto t0 = std::chrono::steady_clock::now();
  auto st = c.stop();
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(st.signal == SIGTERM);
  CHECK(took < 2s);
  CHECK_FALSE(c.valid());
  // Idempotent.
  CHECK(c.stop().signal == SIGTERM);
}

TEST_CASE("util.child_process.stop_kills_after_grace") {
  ScratchDir dir;
  SpawnOptions opts;
  // Ignores SIGTERM (the ignored disposition survives exec), then says so.
  opts.argv = {"sh", "-c", "trap '' TERM; echo ready; exec sleep 30"};
  opts.stdout_file = dir.file("out.txt");
  auto c = spawn(opts);
  REQUIRE(wait_until([&] { return slurp(opts.stdout_file) == "ready\n"; }, 10s));
  c.set_grace(100ms);
  const auto t0 = std::chrono::steady_clock::now();
  auto st = c.stop();
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(st.signal == SIGKILL);
  CHECK(took >= 100ms);  // the grace period was given
  CHECK(took < 3s);
}

TEST_CASE("util.child_process.missing_program_is_an_error") {
  // posix_spawnp reports it: nothing runs, and the error names the program.
  auto c = ChildProcess::spawn(SpawnOptions{.argv = {"fanout-no-such-program-4b1f"}});
  REQUIRE_FALSE(c.has_value());
  CHECK(c.error().code == fanout::ErrorCode::Io);
  CHECK(c.error().message == "cannot run fanout-no-such-program-4b1f: No such file or directory");
}

TEST_CASE("util.child_process.rejects_empty_argv") {
  auto c = ChildProcess::spawn(SpawnOptions{});
  REQUIRE_FALSE(c.has_value());
  CHECK(c.error().code == fanout::ErrorCode::InvalidArgument);
  CHECK(c.error().message.find("argv") != std::string::npos);
}

TEST_CASE("util.child_process.redirects_output") {
  ScratchDir dir;
  SpawnOptions opts;
  opts.argv = {"sh", "-c", "echo out; echo err >&2"};
  opts.stdout_file = dir.file("stdout.txt");
  opts.stderr_file = dir.file("stderr.txt");
  for (int i = 0; i < 2; ++i) {
    auto c = spawn(opts);
    CHECK(finish(c).success());
  }
  // Files are appended to, not truncated.
  CHECK(slurp(opts.stdout_file) == "out\nout\n");
  CHECK(slurp(opts.stderr_file) == "err\nerr\n");
}

TEST_CASE("util.child_process.stdin_null") {
  ScratchDir dir;
  SpawnOptions opts;
  opts.argv = {"sh", "-c", "cat; echo done"};
  opts.stdin_file = "null";
  opts.stdout_file = dir.file("out.txt");
  auto c = spawn(opts);
  CHECK(finish(c).success());  // cat sees EOF at once
  CHECK(slurp(opts.stdout_file) == "done\n");
}

TEST_CASE("util.child_process.env_set_reaches_child") {
  ScratchDir dir;
  REQUIRE(::setenv("FANOUT_TEST_OVERRIDE", "parent", 1) == 0);
  SpawnOptions opts;
  opts.argv = {"sh", "-c",
               "echo \"$FANOUT_TEST_NEW|$FANOUT_TEST_OVERRIDE\"; "
               "env | grep -c '^FANOUT_TEST_OVERRIDE='"};
  opts.env_set = {{"FANOUT_TEST_NEW", "a b=c"}, {"FANOUT_TEST_OVERRIDE", "child"}};
  opts.stdout_file = dir.file("out.txt");
  auto c = spawn(opts);
  CHECK(finish(c).success());
  ::unsetenv("FANOUT_TEST_OVERRIDE");
  // The override replaces the parent's value: one definition, the child's.
  CHECK(slurp(opts.stdout_file) == "a b=c|child\n1\n");
}

TEST_CASE("util.child_process.fd_map_passes_pipe") {
  auto p = fanout::make_pipe();
  REQUIRE(p.has_value());
  SpawnOptions opts;
  opts.argv = {"sh", "-c", "echo hi >&3"};
  opts.fd_map = {{p->write.get(), 3}};
  auto c = spawn(opts);
  p->write.reset();  // the child holds the only write end now: EOF when it exits
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{p->read.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) continue;
    char buf[64];
    ssize_t n = ::read(p->read.get(), buf, sizeof buf);
    if (n <= 0) break;  // EOF
    got.append(buf, static_cast<std::size_t>(n));
  }
  CHECK(got == "hi\n");
  CHECK(finish(c).success());
}

TEST_CASE("util.child_process.cwd") {
  ScratchDir dir;
  SpawnOptions opts;
  opts.argv = {"sh", "-c", "pwd -P"};
  opts.cwd = dir.path();
  opts.stdout_file = dir.file("out.txt");
  auto c = spawn(opts);
  CHECK(finish(c).success());
  CHECK(slurp(opts.stdout_file) == dir.path() + "\n");

  SUBCASE("missing folder is an error") {
    SpawnOptions bad;
    bad.argv = {"true"};
    bad.cwd = dir.path("missing");
    auto b = ChildProcess::spawn(bad);
    REQUIRE_FALSE(b.has_value());
    CHECK(b.error().message.find("cannot run true in " + bad.cwd) == 0);
  }
}

TEST_CASE("util.child_process.destructor_reaps_running_child") {
  pid_t pid = -1;
  const auto t0 = std::chrono::steady_clock::now();
  {
    auto c = spawn_argv({"sleep", "30"});
    wait_exec(c, "sleep");
    c.set_grace(100ms);
    pid = c.pid();
    REQUIRE(is_our_child(pid));
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  errno = 0;
  int st = 0;
  CHECK(::waitpid(pid, &st, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}

TEST_CASE("util.child_process.destructor_reaps_exited_child") {
  pid_t pid = -1;
  {
    auto c = spawn_argv({"true"});
    pid = c.pid();
    // Let it exit without being waited for: a zombie until reaped.
    REQUIRE(wait_until([&] { return proc_state(pid) == 'Z'; }, 10s));
  }
  errno = 0;
  int st = 0;
  CHECK(::waitpid(pid, &st, WNOHANG) == -1);
  CHECK(errno == ECHILD);
  CHECK(proc_state(pid) != 'Z');
}

TEST_CASE("util.child_process.move") {
  auto a = spawn_argv({"sleep", "30"});
  wait_exec(a, "sleep");
  a.set_grace(100ms);
  const pid_t pid = a.pid();
  ChildProcess b(std::move(a));
  CHECK_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  CHECK(b.valid());
  CHECK(b.pid() == pid);

  // Assigning over a running child stops and reaps it first.
  b = spawn_argv({"true"});
  errno = 0;
  int st = 0;
  CHECK(::waitpid(pid, &st, WNOHANG) == -1);
  CHECK(errno == ECHILD);
  CHECK(finish(b).success());
}

TEST_CASE("util.child_process.release") {
  pid_t pid = -1;
  {
    auto c = spawn_argv({"sh", "-c", "exit 3"});
    pid = c.release();
    CHECK_FALSE(c.valid());
  }
  // Not reaped by the destructor: ours to wait for.
  int st = 0;
  pid_t r = -1;
  REQUIRE(wait_until([&] { return (r = ::waitpid(pid, &st, WNOHANG)) != 0; }, 10s));
  CHECK(r == pid);
  CHECK(fanout::decode_wait_status(st).code == 3);
}

// A SIGTERM that reaches the child between fork() and exec() must not run the parent's handler
// there (the pool and the interchange install one): the child would swallow the signal, and
// stop() would fall back to SIGKILL after the whole grace period. spawn() blocks signals across
// fork() and resets the handlers in the child for this reason.
TEST_CASE("util.child_process.stop_right_after_spawn_uses_sigterm") {
  auto p = fanout::make_pipe();
  REQUIRE(p.has_value());
  fanout::set_nonblocking(p->read.get());
  fanout::set_nonblocking(p->write.get());
  struct sigaction sa {};
  sa.sa_handler = note_sigterm;
  sigemptyset(&sa.sa_mask);
  int not_sigterm = 0;
  {
    // Restores the test runner's handler however this block is left.
    struct Installed {
      struct sigaction old {};
      ~Installed() {
        ::sigaction(SIGTERM, &old, nullptr);
        g_handler_pipe = -1;
      }
    } installed;
    g_handler_pipe = p->write.get();
    REQUIRE(::sigaction(SIGTERM, &sa, &installed.old) == 0);
    for (int i = 0; i < 10; ++i) {
      auto c = spawn_argv({"sleep", "30"});
      c.set_grace(150ms);
      if (c.stop().signal != SIGTERM) ++not_sigterm;  // no wait_exec: signalled at once
    }
  }
  int handler_runs = 0;
  char buf[64];
  for (ssize_t n; (n = ::read(p->read.get(), buf, sizeof buf)) > 0;) {
    handler_runs += static_cast<int>(n);
  }
  CHECK_MESSAGE(handler_runs == 0, "the parent's SIGTERM handler ran in a child");
  CHECK_MESSAGE(not_sigterm == 0, "stop() needed SIGKILL for a child that honours SIGTERM");
}

TEST_CASE("util.child_process.child_starts_with_default_signals_in_its_own_group") {
  // The parent ignores SIGPIPE and SIGUSR1 and blocks SIGUSR2; the child (posix_spawn's
  // attributes) has none of that, and leads its own process group.
  ScratchDir dir;
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  struct sigaction old_pipe {
  }, old_usr1{};
  ::sigaction(SIGPIPE, &ign, &old_pipe);
  ::sigaction(SIGUSR1, &ign, &old_usr1);
  sigset_t usr2, saved;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &usr2, &saved);
  SpawnOptions opts;
  opts.argv = {"cat", "/proc/self/status"};
  opts.stdout_file = dir.file("status.txt");
  opts.new_process_group = true;
  auto c = spawn(opts);
  const pid_t pid = c.pid();
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  ::sigaction(SIGPIPE, &old_pipe, nullptr);
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  const pid_t group = ::getpgid(pid);  // while it runs or is a zombie
  CHECK(finish(c).success());
  if (group >= 0) CHECK(group == pid);
  const std::string status = slurp(opts.stdout_file);
  auto mask = [&](const std::string& key) {
    const auto at = status.find(key + ":\t");
    REQUIRE(at != std::string::npos);
    return std::stoull(status.substr(at + key.size() + 2, 16), nullptr, 16);
  };
  auto bit = [](int sig) { return 1ULL << (sig - 1); };
  CHECK(mask("SigBlk") == 0);
  CHECK((mask("SigIgn") & (bit(SIGPIPE) | bit(SIGUSR1))) == 0);
}

// kill_group: what the child left running in its group goes once the child is reaped, and
// signal() reaches the whole group.
TEST_CASE("util.child_process.kill_group_takes_what_the_child_left") {
  ScratchDir dir;
  auto running = [](long pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(in, line)) return false;
    const auto close = line.rfind(')');
    return close != std::string::npos && line.substr(close + 2, 1) != "Z";
  };
  auto wait_gone = [&](long pid) {
    for (int i = 0; i < 500 && running(pid); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return !running(pid);
  };
  SpawnOptions opts;
  opts.kill_group = true;
  opts.argv = {"/bin/sh", "-c", "sleep 30 & echo $! > \"$1\"; exit 0", "sh", dir.file("left.txt")};
  auto c = spawn(opts);
  CHECK(finish(c).success());
  const long left = std::stol(slurp(dir.file("left.txt")));
  CHECK(wait_gone(left));

  opts.argv = {"/bin/sh", "-c", "sleep 30 & echo $! > \"$1\"; wait", "sh", dir.file("kept.txt")};
  auto d = spawn(opts);
  for (int i = 0; i < 500 && slurp(dir.file("kept.txt")).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const long kept = std::stol(slurp(dir.file("kept.txt")));
  d.signal(SIGKILL);  // the shell and its sleep alike
  CHECK(d.wait().signal == SIGKILL);
  CHECK(wait_gone(kept));
}
