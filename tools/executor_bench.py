#!/usr/bin/env python3
"""Throughput of fanout.Executor against concurrent.futures.ProcessPoolExecutor on this machine
(docs/performance.md, "Python Executor"): N no-op calls through
  1. ProcessPoolExecutor(W).map(noop, range(N), chunksize=1)   the baseline
  2. fanout.Executor(W).map(noop, range(N))                     default chunking
  3. fanout.Executor(W).map(noop, range(N), chunksize=1)        one call per mini-batch
  4. fanout.Executor(W): submit() one call at a time, then each result
  5. ProcessPoolExecutor(W): the same submit() loop
each on a fresh executor, start-up included. Run it with `fanout python tools/executor_bench.py
[--calls N] [--workers W] [--db PATH]`; prints one line per run and the ratios."""

import argparse
import concurrent.futures as cf
import os
import tempfile
import time

import fanout


def noop(x):
    return x


def timed(what, n, fn):
    t0 = time.perf_counter()
    got = fn()
    dt = time.perf_counter() - t0
    if len(got) != n or got[0] != 0 or got[-1] != n - 1:
        raise SystemExit("%s: wrong results" % what)
    print("%-48s %8.2f s %10.0f calls/s" % (what, dt, n / dt), flush=True)
    return n / dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--db", default=None, help="store (default: a temporary one)")
    a = ap.parse_args()
    n, w = a.calls, a.workers
    tmp = tempfile.mkdtemp(prefix="fanout-executor-bench-")
    db = a.db or os.path.join(tmp, "fanout.db")

    def ppe_map():
        with cf.ProcessPoolExecutor(w) as ex:
            return list(ex.map(noop, range(n), chunksize=1))

    def fanout_map(chunksize=None):
        with fanout.Executor(w, db=db, name="bench-map") as ex:
            return list(ex.map(noop, range(n), chunksize=chunksize))

    def submit_loop(ex):
        with ex:
            futs = [ex.submit(noop, i) for i in range(n)]
            return [f.result() for f in futs]

    base = timed("ProcessPoolExecutor(%d).map chunksize=1" % w, n, ppe_map)
    m = timed("fanout.Executor(%d).map (default chunks)" % w, n, fanout_map)
    m1 = timed("fanout.Executor(%d).map chunksize=1" % w, n, lambda: fanout_map(1))
    s = timed("fanout.Executor(%d) submit one at a time" % w, n,
              lambda: submit_loop(fanout.Executor(w, db=db, name="bench-submit")))
    ps = timed("ProcessPoolExecutor(%d) submit one at a time" % w, n,
               lambda: submit_loop(cf.ProcessPoolExecutor(w)))
    print("map: %.2f x the baseline (chunksize=1: %.2f x); submit: %.2f x the baseline map, "
          "%.2f x ProcessPoolExecutor's submit" % (m / base, m1 / base, s / base, s / ps))


if __name__ == "__main__":
    main()
