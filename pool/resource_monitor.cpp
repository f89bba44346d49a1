// The resource monitor. See resource_monitor.hpp; the sample's fields are in docs/protocol.md.
#include "pool/resource_monitor.hpp"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "pool/wall_clock.hpp"

namespace fanout::pool {

namespace detail {

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

std::uint64_t to_u64(std::string_view s) {
  std::uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

}  // namespace detail

namespace {

using detail::fields;
using detail::to_u64;

constexpr double kMiB = 1024.0 * 1024.0;

// Reads a small /proc file whole ("" when it cannot be read: the process may have exited).
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Calls f(line) for each line of `text`.
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  while (!text.empty()) {
    const auto nl = text.find('\n');
    f(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

// A whole disk (not a partition, loop or RAM device): it has a folder in /sys/block.
bool is_whole_disk(std::string_view name) {
  if (name.starts_with("loop") || name.starts_with("ram") || name.starts_with("zram")) {
    return false;
  }
  std::string dev(name);
  std::replace(dev.begin(), dev.end(), '/', '!');
  struct stat st {};
  return ::stat(("/sys/block/" + dev).c_str(), &st) == 0;
}

// "/mnt/with\040space" -> "/mnt/with space".
std::string unescape_mount(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3') {
      const int v = (s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0');
      out.push_back(static_cast<char>(v));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::uint64_t sub(std::uint64_t now, std::uint64_t before) {
  return now > before ? now - before : 0;
}

}  // namespace

CpuTimes parse_proc_stat(std::string_view text) {
  CpuTimes c;
  for_each_line(text, [&](std::string_view line) {
    if (c.total != 0 || !line.starts_with("cpu ")) return;
    const auto f = fields(line);
    // cpu user nice system idle iowait irq softirq steal [guest guest_nice: already in user]
    std::uint64_t idle = 0;
    for (std::size_t i = 1; i < f.size() && i <= 8; ++i) {
      const auto v = to_u64(f[i]);
      c.total += v;
      if (i == 4 || i == 5) idle += v;
    }
    c.busy = c.total - idle;
  });
  return c;
}

MemInfo parse_meminfo(std::string_view text) {
  MemInfo m;
  for_each_line(text, [&](std::string_view line) {
    const auto f = fields(line);
    if (f.size() < 2) return;
    if (f[0] == "MemTotal:") m.total_kb = to_u64(f[1]);
    if (f[0] == "MemAvailable:") m.available_kb = to_u64(f[1]);
  });
  return m;
}

NetCounters parse_net_dev(std::string_view text) {
  NetCounters n;
  for_each_line(text, [&](std::string_view line) {
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) return;  // the two header lines
    const auto name = fields(line.substr(0, colon));
    if (name.empty() || name[0] == "lo") return;
    const auto f = fields(line.substr(colon + 1));
    // receive: bytes packets errs drop fifo frame compressed multicast; transmit: bytes ...
    if (f.size() < 9) return;
    n.recv_bytes += to_u64(f[0]);
    n.sent_bytes += to_u64(f[8]);
  });
  return n;
}

std::uint32_t count_sockets(std::string_view text) {
  std::uint32_t lines = 0;
  for_each_line(text, [&](std::string_view line) {
    if (!fields(line).empty()) ++lines;
  });
  return lines > 0 ? lines - 1 : 0;
}

void parse_pid_stat(std::string_view text, ProcCounters& out) {
  const auto close = text.rfind(')');
  if (close == std::string_view::npos) return;
  const auto f = fields(text.substr(close + 1));
  // After the command: state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
  // utime(14) stime(15) ... rss(24); f[0] is field 3.
  if (f.size() < 22) return;
  out.cpu_ticks = to_u64(f[11]) + to_u64(f[12]);
  out.rss_pages = to_u64(f[21]);
  out.pgrp = static_cast<std::int64_t>(to_u64(f[2]));
  out.ok = true;
}

std::string read_proc_file(const std::string& path) { return slurp(path); }

void parse_pid_io(std::string_view text, ProcCounters& out) {
  for_each_line(text, [&](std::string_view line) {
    const auto f = fields(line);
    if (f.size() < 2) return;
    if (f[0] == "syscr:") out.syscr = to_u64(f[1]);
    if (f[0] == "syscw:") out.syscw = to_u64(f[1]);
    if (f[0] == "read_bytes:") out.read_bytes = to_u64(f[1]);
    if (f[0] == "write_bytes:") out.write_bytes = to_u64(f[1]);
  });
}

std::vector<std::string> parse_mounts(std::string_view text) {
  // Kernel and virtual file systems that hold no user data.
  static const std::set<std::string_view> kPseudo = {
      "proc",       "sysfs",      "devpts",   "cgroup",    "cgroup2",         "mqueue",
      "devtmpfs",   "securityfs", "debugfs",  "tracefs",   "pstore",          "bpf",
      "autofs",     "hugetlbfs",  "configfs", "fusectl",   "binfmt_misc",     "nsfs",
      "rpc_pipefs", "efivarfs",   "ramfs",    "selinuxfs", "fuse.gvfsd-fuse", "squashfs"};
  std::vector<std::string> out;
  for_each_line(text, [&](std::string_view line) {
    const auto f = fields(line);
    if (f.size() < 3 || kPseudo.count(f[2]) != 0) return;
    out.push_back(unescape_mount(f[1]));
  });
  return out;
}

ResourceMonitor::ResourceMonitor() {
  if (const long t = ::sysconf(_SC_CLK_TCK); t > 0) ticks_per_s_ = static_cast<double>(t);
  if (const long p = ::sysconf(_SC_PAGESIZE); p > 0) page_bytes_ = static_cast<double>(p);
  prev_ = read_node();
  prev_time_ = Clock::now();
  if (auto api = load_nvml(no_gpus_)) {
    if (auto n = Nvml::open(*api, no_gpus_)) {
      nvml_.emplace(std::move(*n));
      no_gpus_.clear();
    }
  }
}

ResourceMonitor::NodeCounters ResourceMonitor::read_node() {
  NodeCounters n;
  n.cpu = parse_proc_stat(slurp("/proc/stat"));
  n.disk = parse_diskstats(slurp("/proc/diskstats"), is_whole_disk);
  n.net = parse_net_dev(slurp("/proc/net/dev"));
  return n;
}

proto::ResourceSample ResourceMonitor::sample(const std::vector<WorkerRef>& workers,
                                              const std::vector<std::uint64_t>& job_ids) {
  proto::ResourceSample s;
  const auto now = Clock::now();
  s.time = local_unix_now();
  const double dt = std::chrono::duration<double>(now - prev_time_).count();
  s.interval_s = dt;
  s.job_ids = job_ids;
  sample_node(s.node);
  sample_processes(workers, dt, s.processes);
  prev_time_ = now;
  sample_disks(s.disks);
  if (nvml_) s.gpus = nvml_->sample();
  return s;
}

void ResourceMonitor::sample_node(proto::NodeUsage& n) {
  const NodeCounters cur = read_node();
  const auto busy = sub(cur.cpu.busy, prev_.cpu.busy);
  const auto total = sub(cur.cpu.total, prev_.cpu.total);
  n.cpu_percent = total > 0 ? 100.0 * static_cast<double>(busy) / static_cast<double>(total) : 0;
  const MemInfo mem = parse_meminfo(slurp("/proc/meminfo"));
  n.mem_total_mb = static_cast<double>(mem.total_kb) / 1024.0;
  n.mem_available_mb = static_cast<double>(mem.available_kb) / 1024.0;
  n.mem_used_mb = n.mem_total_mb - n.mem_available_mb;
  n.disk_reads = sub(cur.disk.reads, prev_.disk.reads);
  n.disk_writes = sub(cur.disk.writes, prev_.disk.writes);
  n.disk_read_mb = static_cast<double>(sub(cur.disk.read_bytes, prev_.disk.read_bytes)) / kMiB;
  n.disk_write_mb = static_cast<double>(sub(cur.disk.write_bytes, prev_.disk.write_bytes)) / kMiB;
  n.net_sent_mb = static_cast<double>(sub(cur.net.sent_bytes, prev_.net.sent_bytes)) / kMiB;
  n.net_recv_mb = static_cast<double>(sub(cur.net.recv_bytes, prev_.net.recv_bytes)) / kMiB;
  n.tcp_connections =
      count_sockets(slurp("/proc/net/tcp")) + count_sockets(slurp("/proc/net/tcp6"));
  n.udp_connections =
      count_sockets(slurp("/proc/net/udp")) + count_sockets(slurp("/proc/net/udp6"));
  prev_ = cur;
}

void ResourceMonitor::sample_processes(const std::vector<WorkerRef>& workers, double dt,
                                       std::vector<proto::ProcessUsage>& out) {
  std::map<std::int64_t, ProcCounters> procs;
  for (const auto& w : workers) {
    const std::string dir = "/proc/" + std::to_string(w.pid);
    ProcCounters c;
    parse_pid_stat(slurp(dir + "/stat"), c);
    if (!c.ok) continue;  // exited since the pool listed it
    parse_pid_io(slurp(dir + "/io"), c);
    proto::ProcessUsage u;
    u.job_id = w.job_id;
    u.process = w.process;
    u.pid = w.pid;
    u.rss_mb = static_cast<double>(c.rss_pages) * page_bytes_ / kMiB;
    // A worker first seen now is measured from its start: its counters began at 0.
    const auto it = prev_procs_.find(w.pid);
    const ProcCounters before = it != prev_procs_.end() ? it->second : ProcCounters{};
    if (dt > 0) {
      u.cpu_percent =
          100.0 * static_cast<double>(sub(c.cpu_ticks, before.cpu_ticks)) / ticks_per_s_ / dt;
    }
    u.reads = sub(c.syscr, before.syscr);
    u.writes = sub(c.syscw, before.syscw);
    u.read_mb = static_cast<double>(sub(c.read_bytes, before.read_bytes)) / kMiB;
    u.write_mb = static_cast<double>(sub(c.write_bytes, before.write_bytes)) / kMiB;
    out.push_back(std::move(u));
    procs.emplace(w.pid, c);
  }
  prev_procs_ = std::move(procs);
}

void ResourceMonitor::sample_disks(std::vector<proto::DiskUsage>& out) {
  std::set<dev_t> seen;
  for (const auto& mount : parse_mounts(slurp("/proc/self/mounts"))) {
    struct stat st {};
    struct statvfs vfs {};
    if (::stat(mount.c_str(), &st) != 0 || ::statvfs(mount.c_str(), &vfs) != 0) continue;
    if (vfs.f_blocks == 0 || !seen.insert(st.st_dev).second) continue;  // empty, or seen
    const double unit = static_cast<double>(vfs.f_frsize) / kMiB;
    proto::DiskUsage d;
    d.mount = mount;
    d.total_mb = static_cast<double>(vfs.f_blocks) * unit;
    d.free_mb = static_cast<double>(vfs.f_bavail) * unit;
    d.used_mb = static_cast<double>(vfs.f_blocks - vfs.f_bfree) * unit;
    // As df computes it: used over what users can have (used + available).
    const double usable = d.used_mb + d.free_mb;
    d.used_percent = usable > 0 ? 100.0 * d.used_mb / usable : 0;
    out.push_back(std::move(d));
    if (out.size() >= 64) break;
  }
}

}  // namespace fanout::pool
