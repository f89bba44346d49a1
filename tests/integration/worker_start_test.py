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
- a worker that crashes is replaced by one forked from the same server (no new import);
- `fanout-pool --warm-python` (which `fanout run` passes for Python jobs) starts an interpreter
  before any job: a job that sets PYTHONHASHSEED (read at an interpreter's start) gets a fresh
  server, whose import sees its value, and the interpreter waits on; the next job's fork server
  is that interpreter: the module is imported in the process that was waiting before the jobs
  were submitted, with the job's folder, arguments, environment and stdout file.
Environment: FANOUT_BIN, FANOUT_INTERCHANGE_BIN, FANOUT_POOL_BIN (set by tests/meson.build)."""

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


WARM_SCRIPT = r'''
import os
import sys
with open(os.path.join(os.environ["MARKS"], "imports.txt"), "a") as f:
    f.write("%d|%s|%s|%s|%s\n" % (os.getpid(), os.getcwd(), os.environ.get("WARM_CHECK", "-"),
                                  os.environ.get("PYTHONHASHSEED", "-"), " ".join(sys.argv[1:])))
print("imported in %d" % os.getpid())

def run(mini_batch):
    return [os.path.basename(p) for p in mini_batch]
'''


def warm_pids(pool_pid):
    """The pool's children that are waiting warm interpreters (FANOUT_WARM_PYTHON=1)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/environ" % d, "rb") as f:
                env = f.read().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pool_pid and b"FANOUT_WARM_PYTHON=1" in env:
            out.append(int(d))
    return out


def warm_run():
    with scratch("worker-start-warm") as root:
        marks = os.path.join(root, "marks")
        os.makedirs(marks)
        names = ["f%02d.txt" % i for i in range(6)]
        support.make_files(os.path.join(root, "data"), names)
        support.write(os.path.join(root, "src", "score.py"), WARM_SCRIPT)
        ixdir = os.path.join(root, "ix")
        db = os.path.join(ixdir, "store.db")
        cep, pep = "ipc://%s/client" % ixdir, "ipc://%s/pool" % ixdir
        with support.Cluster(ixdir, db, ["--client-endpoint", cep, "--pool-endpoint", pep,
                                         "--write-root", root]) as cl:
            pool = cl.start_pool(workers=2, extra=["--warm-python", "--log-level", "debug"])
            warm = support.wait_until(lambda: warm_pids(pool.pid), 60,
                                      "the pool's warm interpreter")
            if len(warm) != 1:
                fail("warm: %d warm interpreters before any job (want 1): %r" % (len(warm), warm))
            for name, env in (("warm-1", {"MARKS": marks, "PYTHONHASHSEED": "7"}),
                              ("warm-2", {"MARKS": marks, "WARM_CHECK": "job-value"})):
                out = os.path.join(root, name + ".txt")
                support.write(os.path.join(root, name + ".yaml"), support.job_yaml(
                    name, output="./%s.txt" % name, mini_batch_size="2", concurrency=2, env=env,
                    program_arguments="--alpha 1"))
                fanout("run", os.path.join(root, name + ".yaml"), "--interchange", cl.client_ep,
                       "--python", support.PYTHON, "--quiet", cwd=root)
                check_rows_once(read_rows(out), names, name)
                if name == "warm-1" and warm_pids(pool.pid) != warm:
                    fail("warm: after a job it does not fit, the warm interpreters are %r (want "
                         "%r, still waiting)" % (warm_pids(pool.pid), warm))
        imports = [l.split("|") for l in open(os.path.join(marks, "imports.txt")).read().splitlines()]
        if len(imports) != 2:
            fail("warm: %d imports over two jobs (want one each): %r" % (len(imports), imports))
        src = os.path.join(root, "src")
        first, second = imports
        if int(first[0]) == warm[0] or first[3] != "7":
            fail("warm: the job that sets PYTHONHASHSEED was imported in pid %s with "
                 "PYTHONHASHSEED %s (want a fresh server, not pid %d, and 7)" % (
                     first[0], first[3], warm[0]))
        if int(second[0]) != warm[0]:
            fail("warm: the second job's module was imported in pid %s, not in the warm "
                 "interpreter (pid %d) that waited before the jobs" % (second[0], warm[0]))
        want = [src, "job-value", "-", "--alpha 1"]
        if second[1:] != want:
            fail("warm: the warm interpreter imported the module with folder, WARM_CHECK, "
                 "PYTHONHASHSEED and arguments %r (want %r)" % (second[1:], want))
        stdout = ""
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                if f.endswith(".stdout.txt") and "warm-2" in dirpath:
                    stdout += open(os.path.join(dirpath, f)).read()
        if "imported in %d" % warm[0] not in stdout:
            fail("warm: the warm interpreter's print at import is not in the first job's stdout "
                 "files: %r" % stdout[:500])
        print("ok: warm: a job setting PYTHONHASHSEED got a fresh server; the next job's module "
              "was imported in the warm interpreter (pid %d) with its folder, environment, "
              "arguments and stdout" % warm[0])


def main():
    support.require_fanout()
    one_run("fork")
    one_run("spawn")
    warm_run()


if __name__ == "__main__":
    main()
