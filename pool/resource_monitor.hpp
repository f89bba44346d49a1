// The pool's resource monitor: samples the node (CPU, memory, disks, network, sockets), each
// worker process (CPU, RSS, I/O) and each mounted file system from /proc and statvfs, as
// ParallelRunStep's --resource_monitor_interval does. The fields are described in
// docs/protocol.md (ResourceSample). Owned by the Pool; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/protocol/messages.hpp"
#include "fanout/util/clock.hpp"
#include "pool/nvml.hpp"

namespace fanout::pool {

// A worker process to sample.
struct WorkerRef {
  std::uint64_t job_id = 0;
  std::string process{};
  std::int64_t pid = 0;
};

// ---- parsers of /proc files, exposed for tests; each returns zeros for text it cannot read ----

struct CpuTimes {
  std::uint64_t busy = 0;   // jiffies not idle
  std::uint64_t total = 0;  // all jiffies
};
// The aggregate "cpu" line of /proc/stat.
CpuTimes parse_proc_stat(std::string_view text);

struct MemInfo {
  std::uint64_t total_kb = 0;
  std::uint64_t available_kb = 0;
};
MemInfo parse_meminfo(std::string_view text);

struct DiskCounters {
  std::uint64_t reads = 0, writes = 0, read_bytes = 0, write_bytes = 0;
};
// Sums the devices of /proc/diskstats for which `is_disk(name)` is true.
template <typename IsDisk>
DiskCounters parse_diskstats(std::string_view text, IsDisk&& is_disk);

struct NetCounters {
  std::uint64_t sent_bytes = 0, recv_bytes = 0;
};
// Sums every interface of /proc/net/dev except "lo".
NetCounters parse_net_dev(std::string_view text);

// Sockets listed in a /proc/net/{tcp,udp}[6] file (its lines minus the header).
std::uint32_t count_sockets(std::string_view text);

struct ProcCounters {
  std::uint64_t cpu_ticks = 0;  // utime + stime
  std::uint64_t rss_pages = 0;
  std::uint64_t syscr = 0, syscw = 0, read_bytes = 0, write_bytes = 0;
  std::int64_t pgrp = 0;  // its process group
  bool ok = false;        // the stat file was read
};
// Fills cpu_ticks, rss_pages and pgrp from /proc/<pid>/stat (the command may hold spaces and ')').
void parse_pid_stat(std::string_view text, ProcCounters& out);
// Fills syscr, syscw, read_bytes and write_bytes from /proc/<pid>/io.
void parse_pid_io(std::string_view text, ProcCounters& out);

// A small /proc file, whole; "" when it cannot be read (the process may have exited).
std::string read_proc_file(const std::string& path);

// Mount points of /proc/self/mounts worth reporting: real file systems, octal escapes decoded.
std::vector<std::string> parse_mounts(std::string_view text);

class ResourceMonitor final {
 public:
  // Reads the counters the first sample is measured against, and loads NVML if the node has it
  // (each sample then lists its accelerators).
  ResourceMonitor();

  // Why samples carry no accelerators ("" when NVML is loaded): for the pool to say once.
  [[nodiscard]] const std::string& no_gpus() const noexcept { return no_gpus_; }

  // A sample now: interval counters are differences since the previous sample (or since
  // construction). `job_ids` is copied into the sample as given.
  proto::ResourceSample sample(const std::vector<WorkerRef>& workers,
                               const std::vector<std::uint64_t>& job_ids);

 private:
  struct NodeCounters {
    CpuTimes cpu{};
    DiskCounters disk{};
    NetCounters net{};
  };
  static NodeCounters read_node();
  // The parts of sample(): the node's figures since the last sample, each worker's (over `dt`
  // seconds), and the mounted file systems'.
  void sample_node(proto::NodeUsage& n);
  void sample_processes(const std::vector<WorkerRef>& workers, double dt,
                        std::vector<proto::ProcessUsage>& out);
  static void sample_disks(std::vector<proto::DiskUsage>& out);

  NodeCounters prev_{};
  Clock::time_point prev_time_{};
  std::map<std::int64_t, ProcCounters> prev_procs_{};  // by pid
  double ticks_per_s_ = 100;
  double page_bytes_ = 4096;
  std::optional<Nvml> nvml_{};
  std::string no_gpus_{};
};

// ---- template definition ----

namespace detail {
// The whitespace-separated fields of one line.
std::vector<std::string_view> fields(std::string_view line);
std::uint64_t to_u64(std::string_view s);
}  // namespace detail

template <typename IsDisk>
DiskCounters parse_diskstats(std::string_view text, IsDisk&& is_disk) {
  DiskCounters d;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const auto f = detail::fields(line);
    // major minor name reads merged sectors ms writes merged sectors ...
    if (f.size() < 10 || !is_disk(f[2])) continue;
    d.reads += detail::to_u64(f[3]);
    d.read_bytes += detail::to_u64(f[5]) * 512;
    d.writes += detail::to_u64(f[7]);
    d.write_bytes += detail::to_u64(f[9]) * 512;
  }
  return d;
}

}  // namespace fanout::pool
