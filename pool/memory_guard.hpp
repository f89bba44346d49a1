// The pool's memory rules: how many workers the node's available memory allows
// (fanout.mem_per_worker), each worker's memory against fanout.worker_memory_limit, and whether a
// worker killed by SIGKILL from outside was likely the kernel's OOM killer's victim. The
// decisions are pure functions, table-tested in tests/unit/pool/memory_guard_test.cpp; MemoryGuard
// reads /proc for them. See docs/resources.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/util/clock.hpp"
#include "pool/resource_monitor.hpp"

namespace fanout::pool {

// Workers a pool starts: `requested`, at most what `mem_available_kb` holds at
// `mem_per_worker_gib` each, and at least 1 (a pool with no worker serves nothing). A
// mem_per_worker_gib of 0 or less, or an unknown MemAvailable (0), leaves `requested`.
[[nodiscard]] std::uint32_t cap_workers_by_memory(std::uint32_t requested,
                                                  double mem_per_worker_gib,
                                                  std::uint64_t mem_available_kb) noexcept;

// The kernel's oom_kill counter in the text of /proc/vmstat; 0 when absent (kernels before 4.13).
[[nodiscard]] std::uint64_t parse_oom_kills(std::string_view vmstat);

// What is known of a worker that died while running a task, for classify_lost_worker().
struct LostWorkerFacts {
  int signal = 0;                      // the signal that ended it; 0: it exited
  std::uint64_t mem_available_kb = 0;  // the node's MemAvailable at the last sample
  std::uint64_t mem_total_kb = 0;      // MemTotal at the last sample (0: never sampled)
  std::uint64_t oom_kills_before = 0;  // the kernel's oom_kill count when the worker started
  std::uint64_t oom_kills_after = 0;   // and when it was found dead
};

enum class LossKind : std::uint8_t {
  WorkerLost,  // no sign of memory: an anonymous crash or kill (WORKER_LOST)
  KernelOom,   // SIGKILL while memory was nearly full or the kernel killed for memory
};

// MemAvailable below this share of MemTotal counts as "nearly full".
inline constexpr double kLowMemoryPercent = 5.0;

// A worker killed by SIGKILL (from outside: the pool's own kills carry their cause) while the
// node's MemAvailable was below kLowMemoryPercent of MemTotal at the last sample, or after the
// kernel's oom_kill counter rose during its life, was likely the kernel's OOM killer's victim.
// Anything else is a lost worker.
[[nodiscard]] LossKind classify_lost_worker(const LostWorkerFacts& f) noexcept;

// The message of an attempt classified KernelOom: names the worker and the evidence.
[[nodiscard]] std::string kernel_oom_message(const std::string& process, std::int64_t pid,
                                             const LostWorkerFacts& f, const std::string& how);

// "200 MB" (MiB, as "200mb" is read), "612.3 MB", "1.5 GB" from 1 GiB up: whole units without a
// decimal.
[[nodiscard]] std::string format_memory(std::uint64_t bytes);

// The /proc readings behind the rules above. Owned by the Pool; not thread-safe.
class MemoryGuard final {
 public:
  // A worker to check: its pid leads its process group (SpawnOptions::kill_group).
  struct Watched {
    std::size_t slot = 0;
    std::int64_t pid = 0;
  };
  struct Overrun {
    std::size_t slot = 0;
    std::uint64_t rss_bytes = 0;  // of its whole process group
  };

  // `limit_bytes` 0: no worker is checked, only the node's memory is sampled.
  explicit MemoryGuard(std::uint64_t limit_bytes);

  // Whether a check is due at `now` (every kCheckPeriod).
  [[nodiscard]] bool due(Clock::time_point now) const noexcept { return now >= next_check_; }
  // Samples the node's memory and, with a limit, the RSS of each watched worker's process group
  // (one pass over /proc); returns the workers over the limit.
  [[nodiscard]] std::vector<Overrun> check(Clock::time_point now,
                                           const std::vector<Watched>& workers);
  // A worker started: the oom_kill count it is measured against.
  void worker_started(std::int64_t pid);
  // The facts of worker `pid`, ended by `signal`, for classify_lost_worker(); forgets the pid.
  [[nodiscard]] LostWorkerFacts facts(std::int64_t pid, int signal);
  // The worker is gone (any way): its baseline is forgotten.
  void worker_gone(std::int64_t pid) { oom_baseline_.erase(pid); }

  [[nodiscard]] std::uint64_t limit_bytes() const noexcept { return limit_bytes_; }

  static constexpr std::chrono::milliseconds kCheckPeriod{150};
  // How often the members of the workers' groups are listed again (a pass over /proc); in
  // between only the known members' stat files are read. A process a worker starts is counted
  // from the next listing at the latest.
  static constexpr std::chrono::milliseconds kListPeriod{1000};

 private:
  std::uint64_t limit_bytes_;
  // The RSS of each group in `groups`: listed afresh when due (or a group is new), else summed
  // over the members last listed.
  std::map<std::int64_t, std::uint64_t> measure(Clock::time_point now,
                                                const std::vector<std::int64_t>& groups);

  Clock::time_point next_check_{};
  Clock::time_point next_list_{};
  std::map<std::int64_t, std::vector<std::int64_t>> members_{};  // pids by process group
  MemInfo last_{};
  std::map<std::int64_t, std::uint64_t> oom_baseline_{};  // by pid
  double page_bytes_ = 4096;
};

// The processes of each group in `groups` and their RSS in bytes, from one pass over /proc. A
// group with no process left has no members and no RSS entry.
struct GroupScan {
  std::map<std::int64_t, std::uint64_t> rss{};
  std::map<std::int64_t, std::vector<std::int64_t>> members{};
};
[[nodiscard]] GroupScan scan_groups(const std::vector<std::int64_t>& groups, double page_bytes);

}  // namespace fanout::pool
