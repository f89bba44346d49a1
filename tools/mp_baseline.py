#!/usr/bin/env python3
"""The Python baseline of `fanout perf --runtime python` (docs/performance.md):
multiprocessing.Pool(W).imap_unordered(noop, range(N), chunksize=1), nothing recorded.
Prints "rate=<tasks per second>"."""
import argparse
import multiprocessing
import time


def noop(x):
    return x


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", type=int, default=50000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    with multiprocessing.Pool(args.workers) as pool:
        list(pool.imap_unordered(noop, range(100), chunksize=1))  # start the workers first
        t0 = time.perf_counter()
        n = sum(1 for _ in pool.imap_unordered(noop, range(args.tasks), chunksize=1))
        secs = time.perf_counter() - t0
    print(f"tasks={n} seconds={secs:.4f} rate={n / secs:.1f}")


if __name__ == "__main__":
    main()
