// The pool's memory rules. See memory_guard.hpp and docs/resources.md.
#include "pool/memory_guard.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace fanout::pool {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

std::uint32_t cap_workers_by_memory(std::uint32_t requested, double mem_per_worker_gib,
                                    std::uint64_t mem_available_kb) noexcept {
  if (mem_per_worker_gib <= 0 || mem_available_kb == 0) return requested;
  const double fit = static_cast<double>(mem_available_kb) * 1024.0 / (mem_per_worker_gib * kGiB);
  if (fit >= static_cast<double>(requested)) return requested;
  return std::max<std::uint32_t>(1, static_cast<std::uint32_t>(std::floor(fit)));
}

std::uint64_t parse_oom_kills(std::string_view vmstat) {
  // A line "oom_kill N", at the start of the text or after a newline.
  constexpr std::string_view kKey = "oom_kill ";
  std::size_t at = 0;
  while ((at = vmstat.find(kKey, at)) != std::string_view::npos) {
    if (at == 0 || vmstat[at - 1] == '\n') {
      const std::string_view rest = vmstat.substr(at + kKey.size());
      std::uint64_t v = 0;
      std::from_chars(rest.data(), rest.data() + rest.size(), v);
      return v;
    }
    at += kKey.size();
  }
  return 0;
}

// Each branch is one piece of evidence; either is enough, only for SIGKILL (what the OOM killer
// sends). A worker that exited, segfaulted or got SIGTERM is lost whatever the memory.
LossKind classify_lost_worker(const LostWorkerFacts& f) noexcept {
  if (f.signal != SIGKILL) return LossKind::WorkerLost;
  // The kernel counts every OOM kill: one during the worker's life, and it died by SIGKILL.
  if (f.oom_kills_after > f.oom_kills_before) return LossKind::KernelOom;
  // Not counted (an old kernel, a counter read too late) but memory was nearly exhausted: a
  // user-space OOM daemon (systemd-oomd, earlyoom) or the kernel, either way for memory.
  if (f.mem_total_kb > 0 && static_cast<double>(f.mem_available_kb) * 100.0 <
                                static_cast<double>(f.mem_total_kb) * kLowMemoryPercent) {
    return LossKind::KernelOom;
  }
  return LossKind::WorkerLost;
}

std::string kernel_oom_message(const std::string& process, std::int64_t pid,
                               const LostWorkerFacts& f, const std::string& how) {
  std::string evidence;
  if (f.oom_kills_after > f.oom_kills_before) {
    evidence = fmt::format("the kernel's oom_kill count rose by {}",
                           f.oom_kills_after - f.oom_kills_before);
  }
  if (f.mem_total_kb > 0) {
    if (!evidence.empty()) evidence += "; ";
    evidence += fmt::format(
        "MemAvailable {} of MemTotal {} ({:.1f} %) at the last sample",
        format_memory(f.mem_available_kb * 1024), format_memory(f.mem_total_kb * 1024),
        100.0 * static_cast<double>(f.mem_available_kb) / static_cast<double>(f.mem_total_kb));
  }
  return fmt::format(
      "OUT_OF_MEMORY (likely the kernel's OOM killer): worker {} (pid {}) died ({}) "
      "while the node's memory was nearly full ({})",
      process, pid, how, evidence);
}

std::string format_memory(std::uint64_t bytes) {
  // Whole units as the limit is written ("200 MB"); a measured size keeps a decimal, so that one
  // just over a limit never reads as equal to it.
  const auto b = static_cast<double>(bytes);
  const auto gib = static_cast<std::uint64_t>(kGiB), mib = static_cast<std::uint64_t>(kMiB);
  if (bytes >= gib) {
    return bytes % gib == 0 ? fmt::format("{} GB", bytes / gib)
                            : fmt::format("{:.1f} GB", b / kGiB);
  }
  return bytes % mib == 0 ? fmt::format("{} MB", bytes / mib) : fmt::format("{:.1f} MB", b / kMiB);
}

GroupScan scan_groups(const std::vector<std::int64_t>& groups, double page_bytes) {
  GroupScan out;
  if (groups.empty()) return out;
  // The workers' process groups are what the pool kills (SpawnOptions::kill_group), so they are
  // what is measured: the worker and every process it started that stayed in its group.
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;  // not a process
    ProcCounters c;
    parse_pid_stat(read_proc_file(std::string("/proc/") + e->d_name + "/stat"), c);
    if (!c.ok || std::find(groups.begin(), groups.end(), c.pgrp) == groups.end()) continue;
    out.rss[c.pgrp] += static_cast<std::uint64_t>(static_cast<double>(c.rss_pages) * page_bytes);
    out.members[c.pgrp].push_back(std::strtoll(e->d_name, nullptr, 10));
  }
  ::closedir(dir);
  return out;
}

MemoryGuard::MemoryGuard(std::uint64_t limit_bytes) : limit_bytes_(limit_bytes) {
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page > 0) page_bytes_ = static_cast<double>(page);
}

std::vector<MemoryGuard::Overrun> MemoryGuard::check(Clock::time_point now,
                                                     const std::vector<Watched>& workers) {
  next_check_ = now + kCheckPeriod;
  last_ = parse_meminfo(read_proc_file("/proc/meminfo"));
  std::vector<Overrun> over;
  if (limit_bytes_ == 0 || workers.empty()) return over;
  std::vector<std::int64_t> groups;
  groups.reserve(workers.size());
  for (const auto& w : workers) groups.push_back(w.pid);
  const auto rss = measure(now, groups);
  for (const auto& w : workers) {
    const auto it = rss.find(w.pid);
    if (it != rss.end() && it->second > limit_bytes_) over.push_back(Overrun{w.slot, it->second});
  }
  return over;
}

// A pass over /proc reads every process's stat file (hundreds on a busy node): it is made once a
// kListPeriod, and each check in between reads only the few files of the workers' groups.
std::map<std::int64_t, std::uint64_t> MemoryGuard::measure(
    Clock::time_point now, const std::vector<std::int64_t>& groups) {
  const bool new_group = std::any_of(groups.begin(), groups.end(),
                                     [&](std::int64_t g) { return members_.count(g) == 0; });
  if (now >= next_list_ || new_group) {
    next_list_ = now + kListPeriod;
    GroupScan scan = scan_groups(groups, page_bytes_);
    members_.clear();
    for (const auto g : groups) members_[g] = std::move(scan.members[g]);  // empty: none left
    return std::move(scan.rss);
  }
  std::map<std::int64_t, std::uint64_t> rss;
  for (const auto g : groups) {
    for (const auto pid : members_[g]) {
      ProcCounters c;
      parse_pid_stat(read_proc_file("/proc/" + std::to_string(pid) + "/stat"), c);
      // Gone, or the pid reused by a process of another group: not counted.
      if (!c.ok || c.pgrp != g) continue;
      rss[g] += static_cast<std::uint64_t>(static_cast<double>(c.rss_pages) * page_bytes_);
    }
  }
  return rss;
}

void MemoryGuard::worker_started(std::int64_t pid) {
  oom_baseline_[pid] = parse_oom_kills(read_proc_file("/proc/vmstat"));
}

LostWorkerFacts MemoryGuard::facts(std::int64_t pid, int signal) {
  LostWorkerFacts f;
  f.signal = signal;
  f.mem_available_kb = last_.available_kb;
  f.mem_total_kb = last_.total_kb;
  f.oom_kills_after = parse_oom_kills(read_proc_file("/proc/vmstat"));
  const auto it = oom_baseline_.find(pid);
  // No baseline (started before the guard knew it): no rise can be claimed.
  f.oom_kills_before = it != oom_baseline_.end() ? it->second : f.oom_kills_after;
  oom_baseline_.erase(pid);
  return f;
}

}  // namespace fanout::pool
