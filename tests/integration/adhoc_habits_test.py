#!/usr/bin/env python3
"""`fanout run -c` with GNU parallel's habits, end to end (real fanout, interchange, pools and
fanout-worker processes): rows streamed as mini-batches finish (the first before the job ends),
-k order, --joblog's columns, --halt, --tag and stderr passed through, --results, empty stdin, an
item that prints nothing succeeds, a failing item's summary, the next-step line that ends the
summary of a failed, partial or cancelled job, errors naming the user's options, and `fanout
status` of a job whose interchange was killed. Environment: FANOUT_BIN (set by tests/meson.build)."""

import glob
import os
import pty
import select
import signal
import subprocess
import time

from support import FANOUT, fail, fanout, scratch, sql_int, wait_until
import support


def last_line(text):
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-1] if lines else ""


def read_line(proc, timeout, what):
    """The next stdout line of `proc`, waiting at most `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 1)
        if r:
            return proc.stdout.readline()
    fail("no line on stdout within %d s: %s" % (timeout, what))


def streaming(tmp, db):
    # Item 2 waits for a file the test makes only once it has read item 1's row: the row must
    # come while the job still runs. Each row exactly once.
    go = os.path.join(tmp, "go")
    cmd = "if [ {} = 2 ]; then while [ ! -e %s ]; do sleep 0.05; done; fi; echo row{}" % go
    p = subprocess.Popen([FANOUT, "run", "--db", db, "-j", "2", "-c", cmd, ":::", "1", "2"],
                         cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = read_line(p, 120, "the first row before the job ends")
    finally:
        open(go, "w").close()
    out, err = p.communicate(timeout=240)
    if first != "row1\n" or out != "row2\n" or p.returncode != 0:
        fail("streaming: first %r, then %r, exit %d: %s" % (first, out, p.returncode, err))
    print("ok: the first row came before the job ended; each row once")


def keep_order(tmp, db):
    # Later items finish first; -k prints them in input order all the same.
    items = [str(i) for i in range(1, 9)]
    r = fanout("run", "--db", db, "-k", "-j", "4", "-c",
               "sleep 0.$(( (9 - {}) * 1 )); echo {}", ":::", *items, cwd=tmp)
    if r.stdout.split() != items:
        fail("-k printed %r" % r.stdout)
    print("ok: -k keeps the input order")


def joblog(tmp, db):
    log = os.path.join(tmp, "joblog.tsv")
    r = fanout("run", "--db", db, "--joblog", log, "-c", "echo {}; test {} != bad", ":::",
               "a b", "bad", "c", cwd=tmp, check=False)
    lines = open(log).read().splitlines()
    if lines[0] != "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand":
        fail("--joblog header: %r" % lines[0])
    rows = [l.split("\t") for l in lines[1:]]
    if len(rows) != 3 or any(len(c) != 9 for c in rows):
        fail("--joblog rows: %r" % rows)
    by_seq = {c[0]: c for c in rows}
    if by_seq["1"][8] != "echo 'a b'; test 'a b' != bad" or by_seq["1"][6] != "0":
        fail("--joblog row 1: %r" % by_seq["1"])
    if by_seq["2"][6] != "1" or by_seq["3"][6] != "0" or by_seq["1"][1] != ":":
        fail("--joblog exit values: %r" % rows)
    float(by_seq["1"][2]), float(by_seq["1"][3])
    if by_seq["1"][5] != str(len("a b\n")):
        fail("--joblog Receive of row 1: %r" % by_seq["1"])
    if r.returncode == 0:
        fail("a job with a failed item exited 0")
    print("ok: --joblog in GNU's columns")


def halt(tmp, db):
    items = [str(i) for i in range(1, 31)]
    r = fanout("run", "--db", db, "-j", "1", "--halt", "now,fail=1", "-c",
               "test {} != 2 && sleep 0.3", ":::", *items, cwd=tmp, check=False)
    job = sql_int(db, "SELECT max(id) FROM jobs")
    ran = sql_int(db, "SELECT count(*) FROM attempts WHERE job_id = %d" % job)
    if r.returncode == 0 or ran >= len(items) or "failed" not in r.stderr:
        fail("--halt now,fail=1: exit %d, %d of %d items ran: %s" %
             (r.returncode, ran, len(items), r.stderr))
    r = fanout("run", "--db", db, "-j", "1", "--halt", "soon,success=2", "-c",
               "sleep 0.3; echo {}", ":::", *items, cwd=tmp, check=False)
    if r.returncode != 0 or len(r.stdout.split()) >= len(items):
        fail("--halt soon,success=2: exit %d, %d rows: %s" %
             (r.returncode, len(r.stdout.split()), r.stderr))
    print("ok: --halt stops the job early (fail: %d of %d items ran)" % (ran, len(items)))


def tag_stderr_results(tmp, db):
    r = fanout("run", "--db", db, "--tag", "-c", "echo out; echo warn {} >&2", ":::", "x", "y z",
               cwd=tmp)
    if sorted(r.stdout.splitlines()) != ["x\tout", "y z\tout"]:
        fail("--tag rows: %r" % r.stdout)
    if "x\twarn x" not in r.stderr or "y z\twarn y z" not in r.stderr:
        fail("--tag: the commands' stderr, tagged, is not shown: %r" % r.stderr)
    r = fanout("run", "--db", db, "-c", "echo said {} >&2", ":::", "p", cwd=tmp)
    if "said p" not in r.stderr:
        fail("a command's stderr is not passed through: %r" % r.stderr)
    res = os.path.join(tmp, "res")
    r = fanout("run", "--db", db, "--results", res, "-c", "echo o{}; echo e{} >&2", ":::", "a",
               cwd=tmp)
    got = {n: open(os.path.join(res, "1", "a", n)).read() for n in ("stdout", "stderr", "seq")}
    if got != {"stdout": "oa\n", "stderr": "ea\n", "seq": "1"} or r.stdout:
        fail("--results: %r, stdout %r" % (got, r.stdout))
    print("ok: --tag, stderr passed through, --results")


def quiet_successes(tmp, db):
    r = fanout("run", "--db", db, "-c", "echo {}", "--input", "-", stdin="", cwd=tmp,
               check=False)
    if r.returncode != 0 or r.stdout:
        fail("empty stdin: exit %d, %r: %s" % (r.returncode, r.stdout, r.stderr))
    victim = os.path.join(tmp, "victim")
    open(victim, "w").close()
    r = fanout("run", "--db", db, "-c", "rm -f {}", ":::", victim, cwd=tmp, check=False)
    if r.returncode != 0 or os.path.exists(victim):
        fail("rm -f {}: exit %d: %s" % (r.returncode, r.stderr))
    # A job that succeeded prints nothing of fanout's own, as GNU parallel; --bar shows it.
    if r.stderr:
        fail("rm -f {}: a succeeded ad-hoc job printed on stderr: %r" % r.stderr)
    r = fanout("run", "--db", db, "--bar", "-c", "true {}", ":::", "a", cwd=tmp, check=False)
    if r.returncode != 0 or "1 succeeded, 0 failed" not in r.stderr:
        fail("--bar: exit %d, no end summary: %s" % (r.returncode, r.stderr))
    r = fanout("run", "--db", db, "-c", "echo $(( {} * {} ))", "--input", "-",
               stdin="1\n2\n3\n", cwd=tmp)
    if sorted(r.stdout.split(), key=int) != ["1", "4", "9"]:
        fail("values are quoted where the shell does not need it: %r" % r.stdout)
    # A terminal on stdin: what is awaited is said first; Ctrl-D ends the items.
    master, slave = pty.openpty()
    p = subprocess.Popen([FANOUT, "run", "--db", db, "-c", "echo got {}", "--input", "-"],
                         cwd=tmp, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    os.close(slave)
    err = ""
    deadline = time.monotonic() + 60
    while "reading the items from stdin" not in err and time.monotonic() < deadline:
        r, _, _ = select.select([p.stderr], [], [], 1)
        if r:
            err += p.stderr.readline()
    os.write(master, b"tty item\n\x04")
    out, rest = p.communicate(timeout=240)
    os.close(master)
    if "reading the items from stdin" not in err or out != "got tty item\n":
        fail("stdin on a terminal: said %r, printed %r: %s" % (err, out, rest))
    print("ok: empty stdin exits 0; a silent command succeeds; values quoted only where needed; "
          "a terminal on stdin is told what is awaited")


def failures_and_next_steps(tmp, db):
    r = fanout("run", "--db", db, "-c", "echo oops {} >&2; exit 3", ":::", "bad item", cwd=tmp,
               check=False)
    job = sql_int(db, "SELECT max(id) FROM jobs")
    want = "fanout: continue with: fanout resume %d --failed --db %s" % (job, db)
    if r.returncode == 0 or last_line(r.stderr) != want:
        fail("failed job: exit %d, last line %r, expected %r" %
             (r.returncode, last_line(r.stderr), want))
    if "fanout: item bad item (#1) exited with status 3" not in r.stderr or \
            "    oops bad item" not in r.stderr:
        fail("the failing item's summary does not name it, its status and stderr: %s" % r.stderr)
    # A partial one (some items failed within the thresholds) too.
    r = fanout("run", "--db", db, "-c", "test {} != 2", ":::", "1", "2", "3", cwd=tmp,
               check=False)
    job = sql_int(db, "SELECT max(id) FROM jobs")
    if last_line(r.stderr) != "fanout: continue with: fanout resume %d --failed --db %s" % (job,
                                                                                            db):
        fail("partial job: last line %r" % last_line(r.stderr))
    # Ctrl-C once the first row is out: the job is cancelled, and the summary says how to go on.
    # Items after the first wait for a file to go, so the job is surely running when it comes.
    hold = os.path.join(tmp, "hold-cancel")
    open(hold, "w").close()
    items = [str(i) for i in range(1, 11)]
    p = subprocess.Popen([FANOUT, "run", "--db", db, "-j", "1", "-c",
                          "[ {} = 1 ] || while [ -e %s ]; do sleep 0.05; done; echo {}" % hold,
                          ":::", *items], cwd=tmp, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    read_line(p, 120, "a row before Ctrl-C")
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=240)
    os.remove(hold)
    job = sql_int(db, "SELECT max(id) FROM jobs")
    want = "fanout: continue with: fanout resume %d --failed --db %s" % (job, db)
    if "cancelled" not in err or last_line(err) != want:
        fail("after Ctrl-C: last line %r, expected %r:\n%s" % (last_line(err), want, err))
    r = fanout("resume", str(job), "--failed", "--db", db, "--quiet", timeout=240)
    print("ok: a failed, partial and cancelled job's summary ends with the resume command")


def errors_name_options(tmp, db):
    out = os.path.join(tmp, "taken.txt")
    with open(out, "w") as f:
        f.write("old row\n")
    for args, needle in [
        (["--output", out, "-c", "echo", ":::", "a"], "--output"),
        (["--halt", "sometimes", "-c", "echo", ":::", "a"], "--halt"),
        (["-c", "echo", "--input", "-", ":::", "a"], "--input"),
        ([":::", "a"], "-c"),
    ]:
        r = fanout("run", "--db", db, *args, cwd=tmp, check=False)
        if r.returncode != 2 or needle not in r.stderr or ".yaml" in r.stderr:
            fail("%s: expected exit 2 naming %s (no job file), got %d: %s" %
                 (args, needle, r.returncode, r.stderr))
    print("ok: mistakes name the user's options")


def dead_interchange_status(tmp, db):
    hold = os.path.join(tmp, "hold-dead")
    open(hold, "w").close()
    items = [str(i) for i in range(1, 11)]
    p = subprocess.Popen([FANOUT, "run", "--db", db, "-j", "1", "--name", "doomed", "-c",
                          "[ {} = 1 ] || while [ -e %s ]; do sleep 0.05; done; echo {}" % hold,
                          ":::", *items], cwd=tmp,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    read_line(p, 120, "a row of the job whose interchange is killed")
    job = sql_int(db, "SELECT max(id) FROM jobs WHERE name = 'doomed'")
    log_dir = support.sql(db, "SELECT log_dir FROM jobs WHERE id = %d" % job)[0][0]
    ready = open(os.path.join(os.path.dirname(log_dir), "interchange.ready")).read()
    pid = int([l for l in ready.splitlines() if l.startswith("pid=")][0][4:])
    os.kill(pid, signal.SIGKILL)
    _, err = p.communicate(timeout=240)
    if "fanout resume %d" % job not in last_line(err):
        fail("the run whose interchange died does not end with the resume command: %r" %
             last_line(err))
    st = fanout("status", str(job), "--db", db)
    lines = st.stdout.splitlines()
    if not lines[0].startswith("interchange: NOT RUNNING"):
        fail("status of a dead interchange does not say so first:\n%s" % st.stdout)
    for claim in ("running for", "eta", " connected", ": running"):
        if claim in st.stdout:
            fail("status of a dead interchange claims %r:\n%s" % (claim, st.stdout))
    if "0 running" not in st.stdout:
        fail("status of a dead interchange counts mini-batches as running:\n%s" % st.stdout)
    os.remove(hold)
    fanout("resume", str(job), "--db", db, "--quiet", timeout=240)
    print("ok: status of a job whose interchange died says so first, with no live claims")


def main():
    support.require_fanout()
    with scratch("adhoc-habits") as tmp:
        db = os.path.join(tmp, "store", "fanout.db")
        streaming(tmp, db)
        keep_order(tmp, db)
        joblog(tmp, db)
        halt(tmp, db)
        tag_stderr_results(tmp, db)
        quiet_successes(tmp, db)
        failures_and_next_steps(tmp, db)
        errors_name_options(tmp, db)
        dead_interchange_status(tmp, db)
    print("PASS: GNU parallel's habits in ad-hoc runs; next steps; status of a dead interchange")


if __name__ == "__main__":
    main()
