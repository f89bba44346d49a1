// The pool's memory rules (pool/memory_guard.hpp) as pure functions: the worker count that
// mem_per_worker allows, the kernel's oom_kill counter, and which lost worker counts as out of
// memory.
#include "pool/memory_guard.hpp"

#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <string>

using namespace fanout::pool;

namespace {
constexpr std::uint64_t kGiBkb = 1024 * 1024;  // 1 GiB in kB
}  // namespace

TEST_CASE("pool.memory_guard.mem_per_worker_caps_the_worker_count") {
  struct Row {
    std::uint32_t requested;
    double gib;
    std::uint64_t available_kb;
    std::uint32_t expected;
  };
  const Row rows[] = {
      {4, 0, 8 * kGiBkb, 4},       // no mem_per_worker: as asked
      {4, 2, 0, 4},                // MemAvailable unknown: as asked
      {4, 2, 8 * kGiBkb, 4},       // exactly enough
      {4, 2, 5 * kGiBkb, 2},       // 2.5 workers fit: 2
      {16, 0.5, 3 * kGiBkb, 6},    // fractions of a GiB
      {4, 10, 1 * kGiBkb, 1},      // none fits: one still starts
      {1, 100, 200 * kGiBkb, 1},   // fewer asked than fit
      {8, 3, 24 * kGiBkb - 1, 7},  // a kB short of 8
  };
  for (const auto& r : rows) {
    CAPTURE(r.requested);
    CAPTURE(r.gib);
    CAPTURE(r.available_kb);
    CHECK(cap_workers_by_memory(r.requested, r.gib, r.available_kb) == r.expected);
  }
}

TEST_CASE("pool.memory_guard.reads_the_oom_kill_counter") {
  CHECK(parse_oom_kills("pgfault 12\noom_kill 3\nunevictable 0\n") == 3);
  CHECK(parse_oom_kills("oom_kill 17\n") == 17);
  // Another key that ends in oom_kill is not it; a kernel without the line reads 0.
  CHECK(parse_oom_kills("x_oom_kill 9\npgfault 1\n") == 0);
  CHECK(parse_oom_kills("") == 0);
}

TEST_CASE("pool.memory_guard.a_sigkill_under_memory_pressure_is_out_of_memory") {
  struct Row {
    const char* what;
    int signal;
    std::uint64_t available_kb, total_kb, oom_before, oom_after;
    LossKind expected;
  };
  const std::uint64_t total = 16 * kGiBkb;
  const Row rows[] = {
      {"SIGKILL, memory nearly full", SIGKILL, total / 50, total, 5, 5, LossKind::KernelOom},
      {"SIGKILL, oom_kill rose", SIGKILL, total / 2, total, 5, 6, LossKind::KernelOom},
      {"SIGKILL, both", SIGKILL, total / 100, total, 0, 1, LossKind::KernelOom},
      {"SIGKILL, plenty of memory, no OOM kill", SIGKILL, total / 2, total, 5, 5,
       LossKind::WorkerLost},
      {"SIGKILL, just above the threshold", SIGKILL, total / 19, total, 5, 5, LossKind::WorkerLost},
      {"SIGKILL, never sampled", SIGKILL, 0, 0, 5, 5, LossKind::WorkerLost},
      {"SIGSEGV, memory nearly full", SIGSEGV, total / 100, total, 5, 6, LossKind::WorkerLost},
      {"SIGTERM, oom_kill rose", SIGTERM, total / 100, total, 5, 6, LossKind::WorkerLost},
      {"exit code, memory nearly full", 0, total / 100, total, 5, 6, LossKind::WorkerLost},
  };
  for (const auto& r : rows) {
    CAPTURE(r.what);
    const LostWorkerFacts f{r.signal, r.available_kb, r.total_kb, r.oom_before, r.oom_after};
    CHECK(classify_lost_worker(f) == r.expected);
  }
}

TEST_CASE("pool.memory_guard.the_kernel_oom_message_names_the_worker_and_the_evidence") {
  const LostWorkerFacts f{SIGKILL, 300 * 1024, 16 * kGiBkb, 2, 3};
  const std::string m = kernel_oom_message("process002", 4242, f, "killed by signal 9");
  CHECK(m.rfind("OUT_OF_MEMORY (likely the kernel's OOM killer)", 0) == 0);
  CHECK(m.find("process002 (pid 4242)") != std::string::npos);
  CHECK(m.find("oom_kill count rose by 1") != std::string::npos);
  CHECK(m.find("MemAvailable 300 MB of MemTotal 16 GB (1.8 %)") != std::string::npos);
}

TEST_CASE("pool.memory_guard.formats_sizes_as_the_limit_is_written") {
  CHECK(format_memory(200ull * 1024 * 1024) == "200 MB");
  CHECK(format_memory(4ull * 1024 * 1024 * 1024) == "4 GB");
  // A measured size just over a limit does not read as the limit.
  CHECK(format_memory(200ull * 1024 * 1024 + 400 * 1024) == "200.4 MB");
  CHECK(format_memory(612ull * 1024 * 1024 + 5) == "612.0 MB");
  CHECK(format_memory(3ull * 1024 * 1024 * 1024 / 2) == "1.5 GB");
}

TEST_CASE("pool.memory_guard.measures_a_process_group") {
  // This test's own group holds at least this process, whose RSS is more than nothing.
  const std::int64_t group = ::getpgrp();
  const auto scan = scan_groups({group}, 4096);
  REQUIRE(scan.rss.count(group) == 1);
  CHECK(scan.rss.at(group) > 0);
  REQUIRE(scan.members.count(group) == 1);
  const auto& pids = scan.members.at(group);
  CHECK(std::find(pids.begin(), pids.end(), static_cast<std::int64_t>(::getpid())) != pids.end());
  CHECK(scan_groups({}, 4096).rss.empty());
}
