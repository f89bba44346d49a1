#!/usr/bin/env python3
"""How a fanout.Executor's job ends when it is stopped (python/fanout/executor.py,
docs/python.md, section 2): a SIGINT mid-map cancels the job, the calls not yet running never
run and the caller returns; executor-serve, or its interchange, killed (SIGKILL) mid-map leaves
the job ended, with the reason, not `running`; all of them killed: `status` suggests no
resume (an Executor's job cannot have one). Each case runs a caller program under `fanout
python` (the package is the tree's) with its own $TMPDIR, so that no fanout-executor-* folder may be left there.
Real fanout, interchange, pools and workers. Environment: tests/meson.build.
Argument: `sigint`, `serve_killed`, `interchange_killed` or `all_killed` (one meson test
each)."""

import faulthandler
import os
import signal
import subprocess
import sys
import time

from support import fail, scratch
import support

# The caller: a map of 400 calls of 0.2 s on 2 workers, each call leaving a marker file when it
# starts. It prints the job and the store, then waits in the map. argv: DB MARKS CHUNKSIZE.
CALLER = r'''
import os, sys, time
import fanout

def mark(i, marks):
    open(os.path.join(marks, "%d" % i), "w").close()
    time.sleep(0.2)
    return i

if __name__ == "__main__":
    with fanout.Executor(max_workers=2, db=sys.argv[1], name="stopped") as ex:
        print("job %d" % ex.job_id, flush=True)
        try:
            got = list(ex.map(mark, range(400), [sys.argv[2]] * 400,
                              chunksize=int(sys.argv[3])))
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            raise
        print("done %d" % len(got), flush=True)
'''


def start_caller(tmp, name, chunksize):
    """The caller under `fanout python`, in its own session (a SIGINT reaches it alone, as
    `kill -INT` would), $TMPDIR a folder of its own. Returns (process, job id, db, marks,
    its $TMPDIR)."""
    db = os.path.join(tmp, name, "fanout.db")
    marks = os.path.join(tmp, name, "marks")
    own_tmp = os.path.join(tmp, name, "tmp")
    for d in (marks, own_tmp):
        os.makedirs(d)
    prog = os.path.join(tmp, name, "caller.py")
    support.write(prog, CALLER)
    env = dict(os.environ, TMPDIR=own_tmp)
    env.pop("FANOUT_KEEP_TMP", None)
    p = subprocess.Popen([support.FANOUT, "python", prog, db, marks, str(chunksize)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         cwd=os.path.join(tmp, name), start_new_session=True)
    line = p.stdout.readline()
    if not line.startswith("job "):
        p.kill()
        fail("%s: the caller printed %r; stderr:\n%s" % (name, line, p.stderr.read()))
    return p, int(line.split()[1]), db, marks, own_tmp


def wait_started(p, marks, what):
    """Until 4 calls started; fails at once if the caller ended first."""
    def started():
        if p.poll() is not None:
            out, err = p.communicate()
            fail("%s: the caller ended (exit %d) before its calls started\nstdout:\n%s\n"
                 "stderr:\n%s" % (what, p.returncode, out, err))
        return len(os.listdir(marks)) >= 4
    support.wait_until(started, 240, "%s: calls to start" % what)


def job_state(db, job):
    rows = support.sql(db, "SELECT state, reason FROM jobs WHERE id = %d" % job)
    return rows[0] if rows else ("", "")


def wait_exit(p, timeout, what):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        fail("%s: the caller did not return within %d s\nstdout:\n%s\nstderr:\n%s" %
             (what, timeout, out, err))
    return out, err


def check_no_folder(own_tmp, what):
    left = [n for n in os.listdir(own_tmp) if n.startswith("fanout-executor-")]
    if left:
        fail("%s: the Executor's folder is left behind: %s" % (what, left))


def sigint(tmp):
    """The first SIGINT: the job `cancelled` in the store within 2 s, the caller returns with
    KeyboardInterrupt, and no call starts after the job was cancelled. Both chunkings: a
    mini-batch per call, and the default (many calls to one)."""
    for name, chunksize in (("one_each", 1), ("chunked", 25)):
        p, job, db, marks, own_tmp = start_caller(tmp, name, chunksize)
        wait_started(p, marks, name)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        state = support.wait_until(
            lambda: job_state(db, job)[0] in ("cancelled", "failed", "succeeded", "partial") and
            job_state(db, job), 60, "%s: the job to end after SIGINT" % name, step=0.02)
        took = time.monotonic() - sent
        out, err = wait_exit(p, 60, name)
        returned = time.monotonic() - sent
        print("%s: job %s %.2f s after SIGINT, caller returned after %.2f s (exit %d)" %
              (name, state[0], took, returned, p.returncode), flush=True)
        if state[0] != "cancelled":
            fail("%s: after SIGINT the job ended %r (%s)" % (name, state[0], state[1]))
        if took > 2.0:
            fail("%s: the job was cancelled %.2f s after SIGINT (at most 2 s)" % (name, took))
        if "interrupted" not in out or "KeyboardInterrupt" not in err or p.returncode == 0:
            fail("%s: the caller did not end by KeyboardInterrupt (exit %d)\nstdout:\n%s\n"
                 "stderr:\n%s" % (name, p.returncode, out, err))
        started = len(os.listdir(marks))
        # No call starts any more: what had not started never does. (Absence needs a wait.)
        time.sleep(2)
        later = len(os.listdir(marks))
        if later != started or started >= 400 or started > 100:
            fail("%s: %d calls started by the cancel, %d two seconds later, of 400" %
                 (name, started, later))
        ran = support.sql_int(db, "SELECT count(*) FROM minibatches WHERE job_id = %d AND "
                              "state = 'succeeded'" % job)
        print("%s: %d of 400 calls started, %d mini-batches succeeded" % (name, started, ran))
        check_no_folder(own_tmp, name)


def killed(tmp, which):
    """`which` (executor-serve, or the embedded interchange it started) SIGKILLed mid-map: the
    caller's map fails with CallFailed, the job ends `cancelled` with a reason naming
    executor-serve's end (and the signal, when it was the one killed), never left `running`;
    status suggests no resume; the Executor's folder is removed."""
    p, job, db, marks, own_tmp = start_caller(tmp, which, 5)
    wait_started(p, marks, which)
    # executor-serve's job file is in the caller's $TMPDIR, its interchange's store is `db`:
    # that names this test's processes.
    pattern = ("executor-serve %s/" % own_tmp if which == "serve" else
               "fanout-interchange --db %s " % db)
    pids = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    if len(pids) != 1:
        p.kill()
        fail("%s: expected one process matching %r, found %s" % (which, pattern, pids))
    os.kill(int(pids[0]), signal.SIGKILL)
    out, err = wait_exit(p, 120, which + " killed")
    state, reason = job_state(db, job)
    print("%s killed: caller exit %d, job %s: %s" % (which, p.returncode, state, reason),
          flush=True)
    if state not in ("failed", "cancelled") or "executor-serve" not in reason or (
            which == "serve" and "signal 9" not in reason):
        fail("%s killed: the job is %r (%r)" % (which, state, reason))
    if p.returncode == 0 or "CallFailed" not in err:
        fail("%s killed: the caller's map did not fail with CallFailed (exit %d)\nstderr:\n%s" %
             (which, p.returncode, err))
    check_no_folder(own_tmp, which + " killed")
    st = support.fanout("status", str(job), "--db", db, check=False)
    if "fanout resume" in st.stdout + st.stderr:
        fail("status suggests a resume for an Executor job:\n%s%s" % (st.stdout, st.stderr))


def all_killed(tmp):
    """The caller, executor-serve and its interchange all SIGKILLed (the caller frozen first, so
    that nothing ends the job): the job is left `running` with a dead interchange, and `status`
    says an Executor's job cannot be resumed and how to end it, never `fanout resume`."""
    p, job, db, marks, own_tmp = start_caller(tmp, "all", 5)
    wait_started(p, marks, "all")
    os.killpg(p.pid, signal.SIGSTOP)
    for pattern in ("executor-serve %s/" % own_tmp, "fanout-interchange --db %s " % db):
        for pid in subprocess.run(["pgrep", "-f", pattern], capture_output=True,
                                  text=True).stdout.split():
            os.kill(int(pid), signal.SIGKILL)
    os.killpg(p.pid, signal.SIGKILL)
    p.communicate()
    state, _ = job_state(db, job)
    if state != "running":
        fail("all killed: the job is %r, expected it left running" % state)
    st = support.fanout("status", str(job), "--db", db, check=False)
    text = st.stdout + st.stderr
    print(text, flush=True)
    if "fanout resume" in text or "cannot be resumed" not in text or \
            "fanout cancel %d" % job not in text:
        fail("status of a stalled Executor job:\n%s" % text)
    support.fanout("cancel", str(job), "--db", db, "--quiet")
    if job_state(db, job)[0] != "cancelled":
        fail("fanout cancel did not end the stalled Executor job: %s" % (job_state(db, job),))


def main():
    support.require_fanout()
    faulthandler.dump_traceback_later(540, exit=True)
    case = sys.argv[1] if len(sys.argv) > 1 else ""
    cases = {"sigint": sigint, "serve_killed": lambda tmp: killed(tmp, "serve"),
             "interchange_killed": lambda tmp: killed(tmp, "interchange"),
             "all_killed": all_killed}
    if case not in cases:
        fail("usage: python_executor_end_test.py %s" % "|".join(cases))
    with scratch("pyexec-end") as tmp:
        cases[case](tmp)
    print("ok")


if __name__ == "__main__":
    main()
