#!/usr/bin/env python3
"""What this host charges for the operations fanout's hot path makes per mini-batch, so that
figures taken on different days (or machines) can be compared (docs/performance.md, "A slower
host"). Prints nanoseconds per call, the median of --repeats rounds:
  getppid           a system call that does nothing (the floor of every system call)
  clock_gettime     CLOCK_MONOTONIC, served by the vDSO without a system call
  process CPU       CLOCK_PROCESS_CPUTIME_ID (a system call: what a worker's CPU reading costs)
  page fault        touching one fresh 4 KiB page of an anonymous mapping
Python's own call overhead (about 50 ns) is included in each figure.
"""
import argparse
import mmap
import os
import statistics
import time


def per_call(fn, n):
    t0 = time.perf_counter_ns()
    fn(n)
    return (time.perf_counter_ns() - t0) / n


def getppid(n):
    f = os.getppid
    for _ in range(n):
        f()


def monotonic(n):
    f, c = time.clock_gettime_ns, time.CLOCK_MONOTONIC
    for _ in range(n):
        f(c)


def process_cpu(n):
    f, c = time.clock_gettime_ns, time.CLOCK_PROCESS_CPUTIME_ID
    for _ in range(n):
        f(c)


def page_faults(n):
    m = mmap.mmap(-1, n * mmap.PAGESIZE)
    for i in range(0, n * mmap.PAGESIZE, mmap.PAGESIZE):
        m[i] = 1
    m.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--calls", type=int, default=100000)
    args = ap.parse_args()
    print("| operation | ns per call (median of %d) |" % args.repeats)
    print("|---|---|")
    for name, fn in (("getppid", getppid), ("clock_gettime (vDSO)", monotonic),
                     ("process CPU clock", process_cpu), ("page fault", page_faults)):
        runs = [per_call(fn, args.calls) for _ in range(args.repeats)]
        print("| %s | %.0f |" % (name, statistics.median(runs)))


if __name__ == "__main__":
    main()
