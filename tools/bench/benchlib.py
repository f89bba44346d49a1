"""Shared parts of the real-workload benchmarks (tools/bench/*.py, docs/performance.md).

Each benchmark makes its data in a temporary folder, then runs fanout and its peers
interleaved (A B C A B C ...), each as its own process started here, so that every figure
is the wall time of a whole command: interpreter start, imports, worker or cluster start,
the work, and the end. It prints one table: median, range, and each peer's time divided
by fanout's (above 1.0: fanout is faster).
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYTHON = "/usr/bin/python3"


def arg_parser(doc, repeats=3):
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--repeats", type=int, default=repeats, help="runs of each contender")
    ap.add_argument("--fanout", default=os.path.join(ROOT, "build", "client", "fanout"),
                    help="the fanout client to run (default: build/client/fanout)")
    ap.add_argument("--python", default=PYTHON, help="interpreter of the workers and the peers")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--only", default="", help="comma-separated contenders to run (default: all)")
    ap.add_argument("--fanout-before", default="",
                    help="another fanout client (e.g. a build of main) run as contender "
                         "'fanout-before', interleaved with the others")
    ap.add_argument("--timeline", action="store_true",
                    help="after each fanout run, print where its time went (from its store)")
    return ap


class Workdir(object):
    """A temporary folder removed at the end unless --keep."""

    def __init__(self, keep):
        self.path = tempfile.mkdtemp(prefix="fanout-bench-")
        self.keep = keep

    def __enter__(self):
        return self.path

    def __exit__(self, *exc):
        if self.keep:
            sys.stderr.write("kept %s\n" % self.path)
        else:
            shutil.rmtree(self.path, ignore_errors=True)


def timed(cmd, cwd=None, env=None):
    """Runs cmd; returns (wall seconds, CPU seconds of it and its children). Fails loudly."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit("bench: %s exited %d\nstdout: %s\nstderr: %s" % (
            " ".join(cmd), p.returncode, p.stdout.decode(errors="replace")[-2000:],
            p.stderr.decode(errors="replace")[-4000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


_LAST_DB = [None]


def fanout_contenders(args, job_yaml, workdir):
    """fanout, and with --fanout-before the other client as 'fanout-before' (same job file)."""
    out = [("fanout", lambda: fanout_cmd(args, job_yaml, workdir))]
    if args.fanout_before:
        out.append(("fanout-before", lambda: fanout_cmd(args, job_yaml, workdir, args.fanout_before)))
    return out


def fanout_cmd(args, job_yaml, workdir, client=None):
    """`fanout run JOB` with its own store in the work folder; a run replaces the last output."""
    _LAST_DB[0] = os.path.join(workdir, "runs-%d.db" % time.monotonic_ns())
    return [client or args.fanout, "run", job_yaml, "--python", args.python, "--db", _LAST_DB[0],
            "--overwrite"]


def print_timeline(t0, t1):
    """Where the last fanout run's wall time went, from its store's job and attempt times."""
    import sqlite3

    db = sqlite3.connect(_LAST_DB[0])
    created, started, ended = db.execute(
        "SELECT created, started, ended FROM jobs ORDER BY id DESC LIMIT 1").fetchone()
    first, last, n, cpu, run = db.execute(
        "SELECT min(start), max(start + elapsed_s), count(*), sum(cpu_s), sum(run_s) "
        "FROM attempts").fetchone()
    db.close()
    sys.stderr.write(
        "    timeline (s from the command's start): job created %.2f, started %.2f, first attempt "
        "%.2f, last attempt done %.2f, job ended %.2f, command returned %.2f; %d attempts, worker "
        "CPU %.2f s, run() %.2f s\n" % (created - t0, started - t0, first - t0, last - t0,
                                       ended - t0, t1 - t0, n, cpu or 0, run or 0))


def count_lines(path):
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


def sorted_lines(path):
    with open(path, "rb") as f:
        return sorted(f.read().splitlines())


def run_interleaved(contenders, repeats, check=None, timeline=False):
    """contenders: [(name, prepare() -> cmd or None with a reason str)]. Returns {name: [(wall, cpu)]}.

    `prepare` returns a command, or a str: the reason the contender is skipped. `check(name)`
    runs after each run (the rows written are the expected ones)."""
    results, skipped = {}, {}
    for r in range(repeats):
        for name, prepare in contenders:
            if name in skipped:
                continue
            cmd = prepare()
            if isinstance(cmd, str):
                skipped[name] = cmd
                continue
            t0 = time.time()
            results.setdefault(name, []).append(timed(cmd))
            if timeline and name.startswith("fanout"):
                print_timeline(t0, time.time())
            if check is not None:
                check(name)
            sys.stderr.write("  run %d %-28s %.2f s wall\n" % (r + 1, name, results[name][-1][0]))
    return results, skipped


def print_table(title, results, skipped, reference="fanout"):
    """One row per contender: wall median and range, CPU median, and median wall / fanout's."""
    print("\n%s" % title)
    print("| contender | wall median (s) | wall range (s) | CPU median (s) | vs fanout |")
    print("|---|---|---|---|---|")
    ref = statistics.median(w for w, _ in results[reference]) if reference in results else None
    for name, runs in results.items():
        walls = [w for w, _ in runs]
        med = statistics.median(walls)
        ratio = "%.2f x" % (med / ref) if ref and name != reference else "-"
        print("| %s | %.2f | %.2f-%.2f | %.2f | %s |" % (
            name, med, min(walls), max(walls), statistics.median(c for _, c in runs), ratio))
    for name, why in skipped.items():
        print("| %s | SKIP: %s | | | |" % (name, why))
    print("(vs fanout: the contender's median wall time / fanout's; above 1.0, fanout is faster)")
    sys.stdout.flush()


def wanted(args, name):
    return not args.only or name in args.only.split(",")
