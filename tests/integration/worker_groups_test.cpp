// Processes a worker's run() starts go with the worker: each worker leads its own process group,
// stopped as a group on a timeout, at its death and at the job's end, and the pool learns of a
// worker's end from its process, not from its pipe (which a grandchild may hold open). Real
// fanout, pool and Python workers; the grandchildren are forked Pythons sleeping 40 s.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "job_fixture.hpp"

using namespace fanout::test;
namespace fs = std::filesystem;

namespace {

// On the first try of file00000 run() forks a grandchild (which keeps the worker's pipes) and hangs
// past the 5 s timeout; of file00001 it starts one and ends its worker with os._exit; of file00002
// it starts one and returns (the grandchild is left to the job's end). Each grandchild's pid and
// each worker's process group go to files the test reads.
const std::string kScript = std::string(kFirstTryPy) + R"PY(
import os, time
def note(file, text):
    with open(os.path.join(MARKERS, file), "a") as f:
        f.write(text + "\n")
def run(mini_batch):
    name = os.path.basename(mini_batch[0])
    note("groups.txt", str(os.getpgid(0)))
    if name in ("file00000.txt", "file00001.txt", "file00002.txt") and first_try(name):
        child = os.fork()  # a forked Python holds every fd of the worker, its pipes too
        if child == 0:
            time.sleep(40)
            os._exit(0)
        note("grandchildren.txt", str(child))
        if name == "file00000.txt":
            time.sleep(120)
        if name == "file00001.txt":
            os._exit(3)
    return [name]
)PY";

// True when `pid` is gone or a zombie (an orphan init has not reaped yet).
bool gone(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return true;
  const auto close = line.rfind(')');
  return close == std::string::npos || line.substr(close + 2, 1) == "Z";
}

// Live (not zombie) processes whose process group is in `groups`.
std::vector<long> members_of(const std::set<long>& groups) {
  std::vector<long> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    long ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (state != "Z" && groups.count(pgrp) > 0) out.push_back(std::stol(name));
  }
  return out;
}

std::set<long> numbers(const std::string& path) {
  std::set<long> out;
  for (const auto& l : read_lines(path)) {
    if (!l.empty()) out.insert(std::stol(l));
  }
  return out;
}

}  // namespace

TEST_CASE("integration.worker_groups.timeout_death_and_job_end_stop_the_grandchildren") {
  TempDir dir("wgroups");
  make_first_try_job(dir.path(), "worker-groups", 6, kScript, 5);
  const std::string db = dir / "fanout.db";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = fanout_run(dir, "job.yaml", db);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("client stderr:\n" << r.err << "\ntook " << took << " s");
  CHECK(r.status.code == 0);
  CHECK(read_lines(dir / "out.txt").size() == 6);

  // The hung run() ended at its timeout (plus the kill grace), not when its grandchild's
  // 40 s sleep let go of the worker's pipe; the worker that exited was lost at once.
  const auto timeout_s = sql_column(
      db, "select elapsed_s from attempts where status='RUN_TIMEOUT' and minibatch_id=0");
  REQUIRE(timeout_s.size() == 1);
  CHECK(std::stod(timeout_s[0]) < 25);
  const auto lost_s = sql_column(
      db, "select elapsed_s from attempts where status='WORKER_LOST' and minibatch_id=1");
  REQUIRE(lost_s.size() == 1);
  CHECK(std::stod(lost_s[0]) < 15);
  CHECK(took < 38);

  // Every grandchild is gone, and nothing of the workers' process groups is left.
  const auto grandchildren = numbers(dir / "markers/grandchildren.txt");
  CHECK(grandchildren.size() == 3);
  for (long pid : grandchildren) {
    INFO("grandchild " << pid);
    CHECK(wait_until([&] { return gone(pid); }, std::chrono::seconds(10)));
  }
  const auto groups = numbers(dir / "markers/groups.txt");
  CHECK(groups.size() >= 2);
  CHECK(wait_until([&] { return members_of(groups).empty(); }, std::chrono::seconds(10)));
}
