#!/usr/bin/env python3
"""fanout.worker_start (docs/resources.md): with `fork` (the default for Python jobs) the pool
imports the entry script once in a fork server and forks each worker from it, which runs init()
itself; with `spawn` each worker is a fresh interpreter importing the script. Real fanout,
interchange, pool, fork server and workers:

- an entry script whose module top level appends its pid to imports.txt and whose init()
  appends to inits.txt: with 3 workers, fork writes 1 import and 3 inits (each in a different
  process, none of them the importer), spawn 3 imports and 3 inits; the rows come out exactly
  once either way;
- each forked worker gets its own environment (FANOUT_PROCESS) and folder, set before init();
- `fanout.worker_start: spawn` in the job file is what makes spawn;
- a worker that crashes is replaced by one forked from the same server (no new import).
Environment: FANOUT_BIN (set by tests/meson.build)."""

import os

from support import check_rows_once, fail, fanout, read_rows, scratch
import support

WORKERS = 3
SCRIPT = r'''
import os
import time
WORKERS = @WORKERS@
with open(os.path.join(os.environ["MARKS"], "imports.txt"), "a") as f:
    f.write("%d\n" % os.getpid())

def init():
    with open(os.path.join(os.environ["MARKS"], "inits.txt"), "a") as f:
        f.write("%d %s %s\n" % (os.getpid(), os.environ.get("FANOUT_PROCESS", "?"), os.getcwd()))

def run(mini_batch):
    marks = os.environ["MARKS"]
    crash = os.path.join(marks, "crash-once")
    if any(p.endswith("f07.txt") for p in mini_batch) and not os.path.exists(crash):
        open(crash, "w").close()
        os._exit(9)  # a crash: the pool replaces the worker and retries the mini-batch
    if os.path.exists(crash):
        # The job must not end before the replacement has started (its init() ran), however slow
        # the machine: wait for it, boundedly.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with open(os.path.join(marks, "inits.txt")) as f:
                if len(f.read().splitlines()) > WORKERS:
                    break
            time.sleep(0.05)
    return [os.path.basename(p) for p in mini_batch]
'''


def lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [l.split() for l in f.read().splitlines() if l]


def one_run(mode):
    with scratch("worker-start-" + mode) as root:
        marks = os.path.join(root, "marks")
        os.makedirs(marks)
        names = ["f%02d.txt" % i for i in range(24)]
        support.make_files(os.path.join(root, "data"), names)
        support.write(os.path.join(root, "src", "score.py"), SCRIPT.replace("@WORKERS@", str(WORKERS)))
        # fork is the default: only spawn is written.
        top = "fanout:\n  worker_start: spawn\n" if mode == "spawn" else ""
        support.write(os.path.join(root, "job.yaml"), support.job_yaml(
            "start-" + mode, mini_batch_size="2", concurrency=WORKERS, retries=2,
            env={"MARKS": marks}, top=top))
        db = os.path.join(root, "store", "fanout.db")
        fanout("run", os.path.join(root, "job.yaml"), "--db", db, "--quiet", cwd=root)
        check_rows_once(read_rows(os.path.join(root, "out.txt")), names, mode)
        imports, inits = lines(os.path.join(marks, "imports.txt")), lines(os.path.join(marks, "inits.txt"))
        if not os.path.exists(os.path.join(marks, "crash-once")):
            fail("%s: the crash was never triggered" % mode)
        # WORKERS workers, one of them replaced after its crash.
        want_imports = 1 if mode == "fork" else WORKERS + 1
        if len(imports) != want_imports:
            fail("%s: the module was imported %d times (want %d): %r" % (
                mode, len(imports), want_imports, imports))
        if len(inits) != WORKERS + 1:
            fail("%s: init() ran %d times (want %d, one per worker): %r" % (
                mode, len(inits), WORKERS + 1, inits))
        init_pids = {i[0] for i in inits}
        if len(init_pids) != len(inits):
            fail("%s: init() ran twice in one process: %r" % (mode, inits))
        if mode == "fork" and imports[0][0] in init_pids:
            fail("fork: init() ran in the fork server (pid %s), not in a worker" % imports[0][0])
        processes = {i[1] for i in inits}
        if processes != {"process%03d" % n for n in range(1, WORKERS + 1)}:
            fail("%s: the workers' FANOUT_PROCESS were %r" % (mode, sorted(processes)))
        if any(i[2] != os.path.join(root, "src") for i in inits):
            fail("%s: a worker ran outside the code folder: %r" % (mode, inits))
        print("ok: %s: %d import(s), %d init() calls in %d processes, rows exactly once" % (
            mode, len(imports), len(inits), len(init_pids)))


def main():
    support.require_fanout()
    one_run("fork")
    one_run("spawn")


if __name__ == "__main__":
    main()
