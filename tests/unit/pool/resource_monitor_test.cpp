// Tests for the pool's resource monitor (pool/resource_monitor.hpp): the /proc parsers on fixed
// text, and samples of this test process's own /proc entries.
#include "pool/resource_monitor.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "scratch_dir.hpp"

using namespace fanout::pool;
using fanout::test::slurp;

namespace {

std::uint64_t own_cpu_ticks() {
  ProcCounters c;
  parse_pid_stat(slurp("/proc/self/stat"), c);
  return c.cpu_ticks;
}

}  // namespace

TEST_CASE("pool.resource_monitor.parses_proc_stat") {
  const auto c = parse_proc_stat(
      "cpu  100 5 50 800 20 3 2 0 7 0\ncpu0 50 2 25 400 10 1 1 0 0 0\nintr 1 2 3\n");
  CHECK(c.total == 980);       // the first eight fields; guest time is already in user
  CHECK(c.busy == 980 - 820);  // idle + iowait are not busy
  CHECK(parse_proc_stat("garbage").total == 0);
}

TEST_CASE("pool.resource_monitor.parses_meminfo") {
  const auto m = parse_meminfo(
      "MemTotal:       16000000 kB\nMemFree:  100 kB\n"
      "MemAvailable:   12000000 kB\n");
  CHECK(m.total_kb == 16000000);
  CHECK(m.available_kb == 12000000);
}

TEST_CASE("pool.resource_monitor.parses_diskstats_of_whole_disks") {
  const char* text =
      "   8       0 sda 100 0 2048 0 50 0 4096 0 0 0 0\n"
      "   8       1 sda1 90 0 2000 0 40 0 4000 0 0 0 0\n"
      "   7       0 loop0 5 0 10 0 0 0 0 0 0 0 0\n";
  const auto d = parse_diskstats(text, [](std::string_view n) { return n == "sda"; });
  CHECK(d.reads == 100);
  CHECK(d.writes == 50);
  CHECK(d.read_bytes == 2048 * 512);
  CHECK(d.write_bytes == 4096 * 512);
}

TEST_CASE("pool.resource_monitor.parses_net_dev_without_loopback") {
  const char* text =
      "Inter-|   Receive                            |  Transmit\n"
      " face |bytes    packets errs drop fifo frame compressed multicast|bytes packets\n"
      "    lo: 5000 10 0 0 0 0 0 0 5000 10 0 0 0 0 0 0\n"
      "  eth0: 1000 10 0 0 0 0 0 0 300 3 0 0 0 0 0 0\n"
      "  eth1: 24 1 0 0 0 0 0 0 6 1 0 0 0 0 0 0\n";
  const auto n = parse_net_dev(text);
  CHECK(n.recv_bytes == 1024);
  CHECK(n.sent_bytes == 306);
}

TEST_CASE("pool.resource_monitor.counts_sockets_and_reads_pid_files") {
  CHECK(count_sockets("  sl  local_address\n   0: 0100007F:1F90\n   1: 0100007F:1F91\n") == 2);
  CHECK(count_sockets("") == 0);
  ProcCounters c;
  // A command holding spaces and a ')' must not shift the fields.
  parse_pid_stat(
      "42 (my (odd) cmd) S 1 77 42 0 -1 4194304 100 0 0 0 700 300 0 0 20 0 1 0 "
      "123 4096000 250 18446744073709551615",
      c);
  CHECK(c.ok);
  CHECK(c.cpu_ticks == 1000);
  CHECK(c.rss_pages == 250);
  CHECK(c.pgrp == 77);  // ppid 1, pgrp 77, session 42
  parse_pid_io(
      "rchar: 1\nwchar: 2\nsyscr: 30\nsyscw: 40\nread_bytes: 4096\nwrite_bytes: 8192\n"
      "cancelled_write_bytes: 0\n",
      c);
  CHECK(c.syscr == 30);
  CHECK(c.syscw == 40);
  CHECK(c.read_bytes == 4096);
  CHECK(c.write_bytes == 8192);
}

TEST_CASE("pool.resource_monitor.parses_mounts") {
  const auto m = parse_mounts(
      "overlay / overlay rw 0 0\nproc /proc proc rw 0 0\n/dev/sda1 /data\\040set ext4 rw 0 0\n"
      "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n");
  REQUIRE(m.size() == 3);
  CHECK(m[0] == "/");
  CHECK(m[1] == "/data set");
  CHECK(m[2] == "/tmp");
}

TEST_CASE("pool.resource_monitor.samples_this_process") {
  ResourceMonitor mon;
  // Work that /proc must show: CPU until the kernel has counted some ticks, read syscalls, and
  // a listening TCP socket.
  const auto ticks0 = own_cpu_ticks();
  volatile std::uint64_t sink = 0;
  while (own_cpu_ticks() < ticks0 + 3) {
    for (int i = 0; i < 100000; ++i) sink = sink + static_cast<std::uint64_t>(i);
  }
  const int fd = ::open("/proc/self/stat", O_RDONLY);
  REQUIRE(fd >= 0);
  char buf[64];
  for (int i = 0; i < 20; ++i) CHECK(::pread(fd, buf, sizeof buf, 0) > 0);
  ::close(fd);
  const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(sock >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(sock, 1) == 0);

  const auto s = mon.sample({WorkerRef{5, "process001", ::getpid()}}, {5});
  ::close(sock);
  CHECK(s.time > 1.6e9);
  CHECK(s.interval_s > 0);
  CHECK(s.job_ids == std::vector<std::uint64_t>{5});
  CHECK(s.node.mem_total_mb > 0);
  CHECK(s.node.mem_available_mb > 0);
  CHECK(s.node.mem_used_mb == doctest::Approx(s.node.mem_total_mb - s.node.mem_available_mb));
  CHECK(s.node.cpu_percent >= 0);
  CHECK(s.node.cpu_percent <= 100);
  CHECK(s.node.tcp_connections >= 1);
  REQUIRE(s.processes.size() == 1);
  const auto& p = s.processes[0];
  CHECK(p.job_id == 5);
  CHECK(p.process == "process001");
  CHECK(p.pid == ::getpid());
  CHECK(p.cpu_percent > 0);  // at least 3 ticks in the interval
  CHECK(p.rss_mb > 0);
  CHECK(p.reads >= 20);  // first sample of a pid: counted from its start
  CHECK_FALSE(s.disks.empty());
  for (const auto& d : s.disks) {
    CAPTURE(d.mount);
    CHECK(d.total_mb > 0);
    CHECK(d.used_percent >= 0);
    CHECK(d.used_percent <= 100);
  }

  // The second sample counts only what happened since the first.
  const int fd2 = ::open("/proc/self/stat", O_RDONLY);
  REQUIRE(fd2 >= 0);
  for (int i = 0; i < 7; ++i) CHECK(::pread(fd2, buf, sizeof buf, 0) > 0);
  ::close(fd2);
  const auto s2 = mon.sample({WorkerRef{5, "process001", ::getpid()}}, {5});
  REQUIRE(s2.processes.size() == 1);
  CHECK(s2.processes[0].reads >= 7);
  CHECK(s2.processes[0].reads < p.reads + 7);

  // A pid that is gone is left out, not an error.
  const auto s3 = mon.sample({WorkerRef{5, "gone", 999999999}}, {});
  CHECK(s3.processes.empty());
}
