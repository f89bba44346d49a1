// Through the real binaries, the live progress line of `fanout run` under a
// pseudo-terminal (carriage-return updates and the final counts), the plain line when stderr is
// a file, --json events, and logging discipline: logging_level from the spec reaches fanout's
// processes, and at INFO their logs do not grow with the number of mini-batches.
#include <doctest/doctest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "job_fixture.hpp"

using namespace fanout::test;

namespace {

namespace fs = std::filesystem;

void make_job(const TempDir& dir, unsigned files, const std::string& level, double sleep_s) {
  make_files(dir / "data", files);
  write_file(dir / "src/score.py", echo_script(std::to_string(sleep_s)));
  JobSpec job;
  job.name = "progress-demo";
  job.output_key = "scores";
  job.output = "./out/scores.txt";
  job.instance_count = 1;
  job.top = "logging_level: " + level + "\n";
  write_file(dir / "job.yaml", job_yaml(job));
}

struct PtyRun {
  int status = -1;
  std::string output;  // everything the terminal received
};

// Runs argv with its stdin, stdout and stderr on a new pseudo-terminal; collects the output
// until the child exits (or `timeout`, after which it is killed).
PtyRun run_in_pty(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  PtyRun r;
  int master = -1;
  winsize ws{};
  ws.ws_col = 200;
  ws.ws_row = 40;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, &ws);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{master, POLLIN, 0};
    const int n = ::poll(&p, 1, 200);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) {
      const ssize_t got = ::read(master, buf, sizeof buf);
      if (got > 0) {
        r.output.append(buf, static_cast<std::size_t>(got));
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      break;  // EIO: the child side closed (the child exited)
    }
  }
  // The terminal closes while the child exits, a moment before it can be reaped.
  int st = 0;
  const bool exited =
      wait_until([&] { return ::waitpid(pid, &st, WNOHANG) == pid; },
                 std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::max(deadline - std::chrono::steady_clock::now(),
                              std::chrono::steady_clock::duration(std::chrono::seconds(30)))));
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &st, 0);
    r.status = -2;
  } else {
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  ::close(master);
  return r;
}

std::size_t line_count(const std::string& path) { return read_lines(path).size(); }

// Lines of every fanout process log of the job (interchange and pools).
std::size_t fanout_log_lines(const std::string& logs) {
  std::size_t n = line_count(logs + "/sys/interchange.log");
  for (const auto& e : fs::recursive_directory_iterator(logs + "/sys/node")) {
    if (e.path().extension() == ".log") n += line_count(e.path().string());
  }
  return n;
}

std::string python() { return python_bin(); }

}  // namespace

TEST_CASE("integration.progress.updating_line_under_a_pseudo_terminal") {
  TempDir dir("progress-pty");
  make_job(dir, 30, "INFO", 0.05);
  const std::string db = dir / "fanout.db";
  auto r = run_in_pty({fanout_bin(), "run", dir / "job.yaml", "--db", db, "--python", python()},
                      std::chrono::seconds(240));
  INFO("terminal output:\n" << r.output);
  REQUIRE(r.status == 0);
  // Each update starts with a carriage return and erases the rest of the old line.
  CHECK(count_of(r.output, "\rmini-batches ") >= 1);
  CHECK(count_of(r.output, "\033[K") == count_of(r.output, "\rmini-batches "));
  // The last update shows the final counts, then the line is ended before the summary.
  const auto last = r.output.rfind("\rmini-batches ");
  REQUIRE(last != std::string::npos);
  const std::string final_line = r.output.substr(last + 1, r.output.find('\n', last) - last - 1);
  CHECK(final_line.find("mini-batches 30/30 (100%)  failed 0  items 30") == 0);
  CHECK(final_line.find("eta -") != std::string::npos);
  CHECK(r.output.find("fanout: job 1 succeeded") > last);
  // Updates never start a new line of their own: no newline between two of them.
  const auto first = r.output.find("\rmini-batches ");
  CHECK(r.output.substr(first, last - first).find('\n') == std::string::npos);
}

TEST_CASE("integration.progress.plain_lines_and_json_events_when_not_a_terminal") {
  TempDir dir("progress-plain");
  make_job(dir, 12, "INFO", 0.0);
  const std::string db = dir / "fanout.db";
  auto plain = run_capture(
      {fanout_bin(), "run", dir / "job.yaml", "--db", db, "--python", python()}, dir.path());
  INFO(plain.err);
  REQUIRE(plain.status.code == 0);
  CHECK(plain.err.find('\r') == std::string::npos);
  CHECK(plain.err.find("\nmini-batches 12/12 (100%)  failed 0  items 12") != std::string::npos);

  // The same job again: --overwrite replaces the first run's append_row file.
  auto js = run_capture({fanout_bin(), "run", dir / "job.yaml", "--db", db, "--python", python(),
                         "--json", "--overwrite"},
                        dir.path());
  INFO(js.err);
  REQUIRE(js.status.code == 0);
  std::vector<std::string> lines;
  for (std::size_t pos = 0; pos < js.out.size();) {
    const auto nl = js.out.find('\n', pos);
    lines.push_back(js.out.substr(pos, nl - pos));
    pos = nl == std::string::npos ? js.out.size() : nl + 1;
  }
  REQUIRE(lines.size() >= 3);
  for (const auto& l : lines) {
    CAPTURE(l);
    CHECK(l.rfind("{\"event\":\"", 0) == 0);
    CHECK(l.back() == '}');
  }
  CHECK(lines.front().rfind("{\"event\":\"accepted\",\"job_id\":2,", 0) == 0);
  CHECK(lines.back().rfind("{\"event\":\"ended\",\"job_id\":2,\"state\":\"succeeded\"", 0) == 0);
  CHECK(lines.back().find("\"succeeded\":12,\"failed\":0") != std::string::npos);
  CHECK(lines[lines.size() - 2].find("\"event\":\"progress\"") != std::string::npos);
  CHECK(lines[lines.size() - 2].find("\"done\":12") != std::string::npos);
  // The human progress line is not mixed into the JSON (it stays on stderr, and is off).
  CHECK(js.err.find("mini-batches 12/12") == std::string::npos);
}

TEST_CASE("integration.logging.level_from_spec_and_info_logs_do_not_grow_with_minibatches") {
  auto run_job = [](const TempDir& dir, unsigned files, const std::string& level) {
    make_job(dir, files, level, 0.0);
    const std::string db = dir / "fanout.db";
    auto r = run_capture(
        {fanout_bin(), "run", dir / "job.yaml", "--db", db, "--python", python(), "--quiet"},
        dir.path());
    INFO(r.err);
    REQUIRE(r.status.code == 0);
    return sql_column(db, "select log_dir from jobs")[0];
  };
  TempDir small("log-small");
  TempDir big("log-big");
  TempDir debug("log-debug");
  const std::string small_logs = run_job(small, 20, "INFO");
  const std::string big_logs = run_job(big, 400, "INFO");
  const std::string debug_logs = run_job(debug, 20, "DEBUG");

  const std::size_t n_small = fanout_log_lines(small_logs);
  const std::size_t n_big = fanout_log_lines(big_logs);
  INFO("interchange log (400 mini-batches):\n" << read_text(big_logs + "/sys/interchange.log"));
  CHECK(n_small > 0);
  // 20 times the mini-batches, the same lifecycle lines (a periodic stats line may be extra).
  CHECK(n_big <= n_small + 2);
  // At INFO nothing below INFO is written; DEBUG from the spec reaches both processes.
  const std::string pool_log =
      small_logs + "/sys/node/" +
      fs::directory_iterator(small_logs + "/sys/node")->path().filename().string() + "/pool01.log";
  CHECK(read_text(pool_log).find(" D pool[") == std::string::npos);
  CHECK(read_text(small_logs + "/sys/interchange.log").find(" D interchange[") ==
        std::string::npos);
  const std::string debug_pool =
      debug_logs + "/sys/node/" +
      fs::directory_iterator(debug_logs + "/sys/node")->path().filename().string() + "/pool01.log";
  CHECK(read_text(debug_pool).find(" D pool[") != std::string::npos);
  CHECK(read_text(debug_logs + "/sys/interchange.log").find(" D interchange[") !=
        std::string::npos);
}
