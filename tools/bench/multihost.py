#!/usr/bin/env python3
"""Real-workload benchmark "multihost" (docs/performance.md, "Real workloads").

The tabular and files workloads (tabular.py's and files.py's data and entry scripts) on 5
network-namespace hosts on a bridge (tests/netns/bed.sh), every link over TCP between them:
  fanout  h0: `fanout-interchange` (Curve on its TCP endpoints) and `fanout run job.yaml
          --interchange tcp://h0`; h1..h4: one `fanout-pool --workers 1` each;
  dask    h0: `dask-scheduler` and a dask.distributed Client; h1..h4: one
          `dask-worker --nworkers 1 --nthreads 1` each (python3-distributed).
Each run is one command started in h0 that starts its cluster (interchange and pools, or
scheduler and workers, the Client connected and the 4 workers seen), does the work, stops the
cluster and waits for every process of it to exit: the wall time counts all of that.
Every contender writes the same rows; the row count is checked after each run and the rows
themselves once at the end. Needs root (network namespaces): SKIP and exit 77 otherwise.
The bed is removed at the end, also on failure, Ctrl-C and SIGTERM. One worker per host:
--workers, --fanout-before and --timeline are accepted (run_all.sh passes its arguments to
every script) but not used.
"""

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import files  # noqa: E402
import tabular  # noqa: E402

HOSTS = 5  # h0: interchange/scheduler and client; h1..h4: a pool/worker each
NET = "10.231.26"  # the bed's own /24, inside its namespaces only
BED = os.path.join(benchlib.ROOT, "tests", "netns", "bed.sh")
IX_CLIENT_PORT, IX_POOL_PORT, SCHED_PORT = 5600, 5601, 8786
WAIT_S = 120  # generous: the box may be loaded


def addr(i):
    return "%s.%d" % (NET, i + 1)


def netns(prefix, i):
    return "%s-h%d" % (prefix, i)


def on(prefix, i, argv):
    return ["ip", "netns", "exec", netns(prefix, i)] + argv


def spawn(argv, log):
    with open(log, "ab") as f:
        return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)


def wait_until(pred, what, timeout=WAIT_S):
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise SystemExit("multihost: timed out after %d s waiting for %s" % (timeout, what))
        time.sleep(0.01)


def stop_all(procs, timeout=60):
    """Sends SIGTERM to each process still running and waits for all; SIGKILL after `timeout`."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    end = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def log_tail(path, n=3000):
    try:
        with open(path, "rb") as f:
            return f.read()[-n:].decode(errors="replace")
    except OSError:
        return "(no %s)" % path


# ---- one contender's run (inside h0) -------------------------------------------------------

class Phases(object):
    """Seconds from the run's start at which the cluster was up and the work done, written to
    c["phases"] at the end (the driver prints them: where each contender's time went)."""

    def __init__(self, path):
        self.path, self.t0, self.marks = path, time.monotonic(), []

    def mark(self, what):
        self.marks.append((what, time.monotonic() - self.t0))

    def write(self):
        self.mark("stopped")
        with open(self.path, "w") as f:
            f.write(", ".join("%s %.2f s" % m for m in self.marks))

def run_fanout(c):
    """Interchange on h0, a pool on each of h1..h4, the client on h0; then everything stopped."""
    wd, n, phases = c["workdir"], c["run"], Phases(c["phases"])
    db = os.path.join(wd, "fanout-%s.db" % n)
    ready = os.path.join(wd, "ix-%s.ready" % n)
    ix = spawn([c["interchange"], "--db", db, "--ready-file", ready,
                "--client-endpoint", "tcp://%s:%d" % (addr(0), IX_CLIENT_PORT),
                "--pool-endpoint", "tcp://%s:%d" % (addr(0), IX_POOL_PORT),
                "--keys", c["keys"], "--write-root", wd],
               os.path.join(wd, "ix-%s.log" % n))
    pools = []
    for i in range(1, HOSTS):
        name = "host%d" % i
        pools.append(spawn(on(c["prefix"], i, [
            c["pool"], "--interchange",
            "tcp://%s:%d" % (addr(0), IX_POOL_PORT), "--name", name, "--node", name,
            "--workers", "1", "--python", c["python"], "--keys", c["keys"]]),
            os.path.join(wd, "pool-%s-%s.log" % (name, n))))
    try:
        wait_until(lambda: os.path.exists(ready) or ix.poll() is not None, "the interchange")
        if ix.poll() is not None:
            raise SystemExit("multihost: the interchange exited %d:\n%s" % (
                ix.returncode, log_tail(os.path.join(wd, "ix-%s.log" % n))))
        phases.mark("interchange ready")
        client = subprocess.run([c["fanout"], "run", c["job"], "--interchange",
                                 "tcp://%s:%d" % (addr(0), IX_CLIENT_PORT), "--db", db,
                                 "--keys", c["keys"], "--python", c["python"], "--quiet",
                                 "--overwrite"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if client.returncode != 0:
            raise SystemExit("multihost: fanout run exited %d:\n%s\n%s" % (
                client.returncode, client.stdout.decode(errors="replace")[-3000:],
                log_tail(os.path.join(wd, "ix-%s.log" % n))))
        phases.mark("fanout run returned")
    finally:
        # SIGTERM, as an operator would (the interchange would tell its pools to stop, but
        # each contender's processes get SIGTERM as soon as its work is done: see run_dask).
        stop_all([ix] + pools)
    phases.write()


def dask_tabular(client, c):
    import dask.dataframe as dd
    from dask.distributed import as_completed

    sys.path.insert(0, c["src"])
    import score

    client.upload_file(os.path.join(c["src"], "score.py"))
    ddf = dd.read_csv(c["input"], blocksize=tabular.MINI_BATCH_BYTES)
    parts = ddf.map_partitions(lambda df: score.as_rows(score.score(df)), meta=(None, "object"))
    with open(c["out"], "w") as f:
        for _, rows in as_completed(client.compute(parts.to_delayed()), with_results=True):
            f.write(rows)


def _files_batch(paths):
    import score

    return "".join(score.one(p) + "\n" for p in paths)


def dask_files(client, c):
    from dask.distributed import as_completed

    client.upload_file(os.path.join(c["src"], "score.py"))
    paths = sorted(e.path for e in os.scandir(c["input"]))
    batches = [paths[i:i + 100] for i in range(0, len(paths), 100)]  # files.py's "100"
    with open(c["out"], "w") as f:
        # with_results: the results come in batches, not one round trip per future.
        for _, rows in as_completed(client.map(_files_batch, batches), with_results=True):
            f.write(rows)


def run_dask(c):
    """dask-scheduler on h0, a dask-worker on each of h1..h4, the Client here; then shut down."""
    wd, n, phases = c["workdir"], c["run"], Phases(c["phases"])
    sched_addr = "tcp://%s:%d" % (addr(0), SCHED_PORT)
    procs = [spawn([c["python"], "-m", "distributed.cli.dask_scheduler", "--host", addr(0),
                    "--port", str(SCHED_PORT), "--no-dashboard", "--no-show"],
                   os.path.join(wd, "scheduler-%s.log" % n))]
    for i in range(1, HOSTS):
        procs.append(spawn(on(c["prefix"], i, [
            c["python"], "-m", "distributed.cli.dask_worker", sched_addr, "--host", addr(i),
            "--nworkers", "1", "--nthreads", "1", "--no-dashboard",
            "--local-directory", os.path.join(wd, "dask-h%d" % i)]),
            os.path.join(wd, "worker-h%d-%s.log" % (i, n))))
    try:
        # Imported once the cluster's processes are starting, so that it overlaps their start.
        from dask.distributed import Client

        client = Client(sched_addr, timeout=WAIT_S)
        phases.mark("client connected")
        client.wait_for_workers(HOSTS - 1, timeout=WAIT_S)
        phases.mark("4 workers up")
        (dask_tabular if c["workload"] == "tabular" else dask_files)(client, c)
        phases.mark("work done")
        client.close()
        phases.mark("client closed")
    finally:
        # SIGTERM to every dask-worker, then to the scheduler: its fastest clean end here (with
        # the scheduler stopped first, or client.shutdown(), each nanny lingers 4-6 s).
        stop_all(procs[1:])
        stop_all(procs[:1])
    phases.write()


# ---- the driver (root namespace) -----------------------------------------------------------

def check_bed():
    if os.geteuid() != 0:
        print("SKIP: multihost.py needs root to make network namespaces")
        sys.exit(77)
    r = subprocess.run(["bash", BED, "check"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode == 77:
        print("SKIP: %s" % r.stdout.decode(errors="replace").strip())
        sys.exit(77)
    if r.returncode != 0:
        raise SystemExit("multihost: %s check exited %d: %s" % (BED, r.returncode, r.stdout))


def clear_bed(prefix):
    """Kills whatever still runs in the bed's namespaces, then removes them."""
    r = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE)
    for line in r.stdout.decode().splitlines():
        ns = line.split()[0] if line.split() else ""
        if not ns.startswith(prefix + "-"):
            continue
        pids = subprocess.run(["ip", "netns", "pids", ns], stdout=subprocess.PIPE)
        for pid in pids.stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
    subprocess.run(["bash", BED, "down", prefix])


def sibling(fanout, subdir, name):
    """A program of the build folder fanout comes from (build/<subdir>/<name>), else beside it."""
    built = os.path.join(os.path.dirname(os.path.dirname(fanout)), subdir, name)
    return built if os.path.exists(built) else os.path.join(os.path.dirname(fanout), name)


def workload(args, wd, name, keys, prefix):
    """One workload's data, job file and interleaved runs; prints its table."""
    data, src = os.path.join(wd, name, "data"), os.path.join(wd, name, "src")
    os.makedirs(src)
    mod = tabular if name == "tabular" else files
    count = args.rows if name == "tabular" else args.files
    sys.stderr.write("multihost %s: making %d %s\n" % (
        name, count, "rows" if name == "tabular" else "files"))
    mod.make_data(data, count)
    with open(os.path.join(src, "score.py"), "w") as f:
        f.write(mod.SCORE)
    outs = dict((n, os.path.join(wd, name, "out-%s.txt" % n)) for n in ("fanout", "dask"))
    job = os.path.join(wd, name, "job.yaml")
    with open(job, "w") as f:
        f.write(mod.JOB.format(data=data, out=outs["fanout"], workers=1, src=src))
    inp = os.path.join(data, "houses.csv") if name == "tabular" else data
    runs = [0]
    me = os.path.abspath(__file__)

    def cmd(contender):
        runs[0] += 1
        conf = dict(contender=contender, workdir=os.path.join(wd, name), run=runs[0],
                    prefix=prefix, keys=keys, python=args.python, fanout=args.fanout,
                    interchange=args.interchange_bin, pool=args.pool_bin, job=job, src=src,
                    input=inp, out=outs[contender], workload=name,
                    phases=os.path.join(wd, name, "phases.txt"))
        return on(prefix, 0, [args.python, me, "--contender", contender, repr(conf)])

    def dask_cmd():
        if subprocess.run([args.python, "-c", "import distributed"],
                          stderr=subprocess.DEVNULL).returncode != 0:
            return "%s cannot import distributed (Debian: python3-distributed)" % args.python
        return cmd("dask")

    contenders = [("fanout", lambda: cmd("fanout")), ("dask", dask_cmd)]
    contenders = [c for c in contenders if benchlib.wanted(args, c[0])]

    def check(who):
        n = benchlib.count_lines(outs[who])
        if n != count:
            raise SystemExit("multihost %s: %s wrote %d rows, expected %d" % (name, who, n, count))
        with open(os.path.join(wd, name, "phases.txt")) as f:
            sys.stderr.write("    %s: %s\n" % (who, f.read()))

    results, skipped = benchlib.run_interleaved(contenders, args.repeats, check)
    ran = [n for n in outs if n in results]
    rows = [benchlib.sorted_lines(outs[n]) for n in ran]
    if len(rows) == 2 and rows[0] != rows[1]:
        raise SystemExit("multihost %s: fanout and dask wrote different rows" % name)
    what = ("%d rows (%.0f MB), \"4mb\" mini-batches" % (count, os.path.getsize(inp) / 1e6)
            if name == "tabular"
            else "SHA-1 of %d files of 1 KiB, 100 per mini-batch" % count)
    benchlib.print_table("multihost %s: %s, 4 hosts x 1 worker, cluster start and end counted, "
                         "%d repeats" % (name, what, args.repeats), results, skipped)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--contender":
        import ast

        conf = ast.literal_eval(sys.argv[3])
        (run_fanout if conf["contender"] == "fanout" else run_dask)(conf)
        return 0
    ap = benchlib.arg_parser(__doc__, repeats=2)
    ap.add_argument("--rows", type=int, default=2000000, help="tabular: rows of the CSV")
    ap.add_argument("--files", type=int, default=100000, help="files: files of 1 KiB")
    ap.add_argument("--workloads", default="tabular,files", help="comma-separated")
    ap.add_argument("--interchange-bin", default=os.environ.get("FANOUT_INTERCHANGE_BIN", ""),
                    help="fanout-interchange (default: $FANOUT_INTERCHANGE_BIN, else the one of "
                         "--fanout's build folder or beside it)")
    ap.add_argument("--pool-bin", default=os.environ.get("FANOUT_POOL_BIN", ""),
                    help="fanout-pool (default: $FANOUT_POOL_BIN, else as --interchange-bin)")
    args = ap.parse_args()
    args.fanout = os.path.abspath(args.fanout)
    args.interchange_bin = args.interchange_bin or sibling(args.fanout, "interchange",
                                                           "fanout-interchange")
    args.pool_bin = args.pool_bin or sibling(args.fanout, "pool", "fanout-pool")
    check_bed()
    prefix = "fb%d" % os.getpid()
    # Ctrl-C raises KeyboardInterrupt; SIGTERM and SIGHUP end the same way, through finally.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda num, _frame: sys.exit(128 + num))
    with benchlib.Workdir(args.keep) as wd:
        try:
            r = subprocess.run(["bash", BED, "up", prefix, str(HOSTS), NET],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if r.returncode != 0:
                raise SystemExit("multihost: bed.sh up exited %d: %s" % (
                    r.returncode, r.stdout.decode(errors="replace")))
            keys = os.path.join(wd, "keys")
            r = subprocess.run([args.fanout, "keygen", "--dir", keys], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            if r.returncode != 0:
                raise SystemExit("multihost: fanout keygen exited %d: %s" % (
                    r.returncode, r.stdout.decode(errors="replace")))
            for name in args.workloads.split(","):
                workload(args, wd, name, keys, prefix)
        finally:
            clear_bed(prefix)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the bed is already removed (main's finally)
        sys.stderr.write("multihost: interrupted\n")
        sys.exit(128 + signal.SIGINT)
