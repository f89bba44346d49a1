#!/usr/bin/env python3
"""Following a job through the real binaries.

- progress_fits_80_columns: `fanout run` on a real pseudo-terminal of 80 columns
  (TIOCSWINSZ): no progress line is wider than 80 columns, none wraps.
- wait_counts_from_the_jobs_start: `fanout wait` attached 6 s into a job shows the job's own
  elapsed time (not 0 s from attaching).
- dead_interchange_is_known_at_once: after the interchange is SIGKILLed, `fanout status` says
  it is not running (`--json`: "interchange": {"state": "dead", ...}; "alive" before) and
  `fanout wait` exits at once with the `fanout resume` hint; a stopped (SIGSTOP) one is shown
  as "interchange unreachable since ...".
- sigterm_on_resume_leaves_no_children: SIGTERM to `fanout resume` stops its private
  interchange and pools.
- interchange_owns_its_paths (item 8): `fanout run --interchange` shows the interchange's store
  and run folder and makes nothing under the client's HOME; a relative --run-dir works.
- resume_finishes_a_cut_submission: the client SIGKILLed mid-submission (small window); its
  interchange and pools exit within the heartbeat threshold; `fanout resume` submits the rest
  from the job file and the output holds every row exactly once.

Arguments: names of the cases to run (default: all). Environment: FANOUT_BIN (set by
tests/meson.build), FANOUT_TEST_PYTHON (the workers' interpreter, default python3).
"""
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time

from support import FANOUT, PYTHON, fail, fanout, scratch, sql, sql_int, wait_until
import support

SCRIPT = """import os, time
def init():
    pass
def run(mini_batch):
    time.sleep(float(os.environ.get("SLEEP_S", "0")))
    return [os.path.basename(p) for p in mini_batch]
"""


def make_job(root, name, files, sleep_s, workers=2, threshold_ms=None):
    support.make_files(os.path.join(root, "data"), ["f%05d.txt" % i for i in range(files)])
    support.write(os.path.join(root, "src", "score.py"), SCRIPT)
    fanout_block = ""
    if threshold_ms:
        fanout_block = "fanout:\n  heartbeat_period_ms: %d\n  heartbeat_threshold_ms: %d\n" % (
            threshold_ms // 4, threshold_ms)
    job = support.write(os.path.join(root, "job.yaml"), support.job_yaml(
        name, output="./out/scores.txt", instance_count=1, concurrency=workers,
        env={"SLEEP_S": sleep_s}, top=fanout_block))
    return job


def log_dir(db, job):
    return sql(db, "select log_dir from jobs where id = %d" % job)[0][0]


def ready_pid(db, job):
    path = os.path.join(os.path.dirname(log_dir(db, job)), "interchange.ready")
    try:
        text = open(path).read()
    except OSError:
        return 0
    m = re.search(r"^pid=(\d+)$", text, re.M)
    return int(m.group(1)) if m else 0


def status_interchange(db):
    """The "interchange" object of `fanout status 1 --json`."""
    doc = json.loads(fanout("status", "1", "--db", db, "--json").stdout)
    return doc.get("interchange") or {}


def processes_with(fragment):
    """Pids of fanout-interchange / fanout-pool processes whose command line holds `fragment`."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
            with open("/proc/%s/stat" % d) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z" or not argv or not argv[0]:
            continue
        prog = os.path.basename(argv[0].decode(errors="replace"))
        if prog in ("fanout-interchange", "fanout-pool") and \
                fragment.encode() in b" ".join(argv):
            found.append(int(d))
    return found


def start_run(job, db, *extra):
    return subprocess.Popen([FANOUT, "run", job, "--db", db, "--python", PYTHON, "--quiet",
                             *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def kill_client(proc):
    proc.kill()
    proc.wait()


def run_then_kill_client(job, db, succeeded):
    """Starts the job, waits until `succeeded` mini-batches succeeded and the whole input was
    submitted, then SIGKILLs the client (the job runs on without it)."""
    proc = start_run(job, db)
    wait_until(lambda: sql_int(db, "select count(*) from minibatches where job_id = 1 and "
                                   "state = 'succeeded'") >= succeeded, 120, "the job to run")
    wait_until(lambda: sql_int(db, "select submit_done from jobs where id = 1"), 60,
               "the submission to end")
    kill_client(proc)


def rows_of(root):
    return support.read_rows(os.path.join(root, "out", "scores.txt"))


# ---------------------------------------------------------------------------------------------


def progress_fits_80_columns(root):
    job = make_job(root, "a-job-with-a-rather-long-name-for-the-line", 60, 0.05)
    db = os.path.join(root, "fanout.db")
    pid, master = pty.fork()
    if pid == 0:
        os.execv(FANOUT, [FANOUT, "run", job, "--db", db, "--python", PYTHON])
    # The child's terminal: 80 columns, before it prints anything worth measuring.
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    out = b""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if not r:
            continue
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break  # EIO: the child closed the terminal
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        fail("fanout run exited %d:\n%s" % (os.waitstatus_to_exitcode(status), text))
    updates = text.count("\rmini-batches ")
    if updates < 1:
        fail("no progress line under the terminal:\n%r" % text)
    # Every piece between carriage returns and newlines is what one terminal row shows.
    for segment in re.split(r"[\r\n]", text):
        visible = segment.replace("\x1b[K", "")
        if visible.startswith("mini-batches") and len(visible) >= 80:
            fail("a progress line of %d columns on an 80-column terminal: %r" %
                 (len(visible), visible))
    # No update wraps to a new row: between the first and last update no newline is printed.
    first, last = text.find("\rmini-batches "), text.rfind("\rmini-batches ")
    if "\n" in text[first:last]:
        fail("a progress update started a new line:\n%r" % text[first:last])
    print("ok: %d updates, each under 80 columns" % updates)


def wait_counts_from_the_jobs_start(root):
    job = make_job(root, "slow", 40, 0.4, workers=1)
    db = os.path.join(root, "fanout.db")
    # Every mini-batch is submitted at once (40 < window): without the client the job runs on.
    run_then_kill_client(job, db, 2)
    time.sleep(6)
    started = sql(db, "select created from jobs where id = 1")[0][0]
    w = subprocess.Popen([FANOUT, "wait", "1", "--db", db], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    line = w.stderr.readline()
    attached = time.time()
    rest = w.communicate(timeout=240)[1]
    if w.returncode != 0:
        fail("fanout wait exited %d: %s%s" % (w.returncode, line, rest))
    m = re.search(r"elapsed (?:(\d+)m)?(\d+)s", line)
    if not m:
        fail("no elapsed time in the first progress line: %r" % line)
    shown = int(m.group(1) or 0) * 60 + int(m.group(2))
    expected = attached - started
    if shown < expected - 3:
        fail("wait shows elapsed %d s for a job started %.0f s before: %r" %
             (shown, expected, line))
    rate = re.search(r"\(([\d.]+)/s\)", line)
    done = re.search(r"items (\d+)", line)
    if rate and done and float(rate.group(1)) > 2 * int(done.group(1)) / max(expected, 1) + 1:
        fail("the rate %s/s counts from attaching, not from the job's start: %r" %
             (rate.group(1), line))
    print("ok: first line after attaching: %s" % line.strip())


def dead_interchange_is_known_at_once(root):
    job = make_job(root, "doomed", 60, 0.5, workers=1)
    db = os.path.join(root, "fanout.db")
    run_then_kill_client(job, db, 1)
    ix = ready_pid(db, 1)
    if not ix:
        fail("no pid= in interchange.ready")
    live = status_interchange(db)
    if live.get("state") != "alive" or live.get("pid") != ix or not live.get("started"):
        fail("fanout status --json of a job whose interchange runs: %r" % live)

    # Stopped, it does not answer: wait says since when.
    os.kill(ix, signal.SIGSTOP)
    try:
        w = subprocess.Popen([FANOUT, "wait", "1", "--db", db], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        seen = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "unreachable since" not in seen:
            r, _, _ = select.select([w.stderr], [], [], 1)
            if r:
                seen += w.stderr.readline()
        w.send_signal(signal.SIGINT)
        seen += w.communicate(timeout=60)[1]
        if "interchange unreachable since" not in seen:
            fail("fanout wait on a stopped interchange did not say so:\n%s" % seen)
    finally:
        os.kill(ix, signal.SIGCONT)
    print("ok: a silent interchange: %s" %
          [l for l in seen.splitlines() if "unreachable" in l][0].strip())

    os.kill(ix, signal.SIGKILL)
    wait_until(lambda: not os.path.exists("/proc/%d/cmdline" % ix) or
               open("/proc/%d/stat" % ix).read().rsplit(")", 1)[1].split()[0] == "Z", 30,
               "the interchange to die")
    st = fanout("status", "1", "--db", db)
    if "NOT RUNNING" not in st.stdout or "fanout resume 1" not in st.stdout:
        fail("fanout status of a job whose interchange died:\n%s" % st.stdout)
    dead = status_interchange(db)
    if dead.get("state") != "dead" or dead.get("pid") != ix or not dead.get("host"):
        fail("fanout status --json of a job whose interchange died: %r" % dead)
    began = time.monotonic()
    w = fanout("wait", "1", "--db", db, check=False, timeout=120)
    took = time.monotonic() - began
    if w.returncode != 3 or "not running" not in w.stderr or "fanout resume 1" not in w.stderr:
        fail("fanout wait on a dead interchange: exit %d after %.1f s:\n%s" %
             (w.returncode, took, w.stderr))
    if took > 10:
        fail("fanout wait took %.1f s to see the interchange was dead" % took)
    print("ok: status and wait (%.1f s) know the interchange died" % took)
    # Leave nothing behind: the pools exit once they lose it.
    fanout("resume", "1", "--db", db, "--quiet", timeout=240)


def sigterm_on_resume_leaves_no_children(root):
    job = make_job(root, "paused", 80, 0.5, workers=1)
    db = os.path.join(root, "fanout.db")
    proc = start_run(job, db)
    wait_until(lambda: sql_int(db, "select submit_done from jobs where id = 1"), 120,
               "the submission to end")
    ix = ready_pid(db, 1)
    first_pools = "-%d-pool" % proc.pid
    kill_client(proc)
    os.kill(ix, signal.SIGKILL)
    wait_until(lambda: not processes_with(db) and not processes_with(first_pools), 60,
               "the first run's children to exit")
    res = subprocess.Popen([FANOUT, "resume", "1", "--db", db, "--python", PYTHON],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    pool_tag = "-%d-pool" % res.pid
    wait_until(lambda: processes_with(db) and processes_with(pool_tag), 120,
               "resume's interchange and pool")
    res.send_signal(signal.SIGTERM)
    err = res.communicate(timeout=120)[1]
    if res.returncode == -signal.SIGTERM:
        fail("fanout resume died of SIGTERM without stopping its children")
    wait_until(lambda: not processes_with(db) and not processes_with(pool_tag), 30,
               "resume's interchange and pools to exit after SIGTERM (left: %s %s)" %
               (processes_with(db), processes_with(pool_tag)))
    if "fanout resume 1" not in err:
        fail("fanout resume did not say how to continue:\n%s" % err)
    state = sql(db, "select state from jobs where id = 1")[0][0]
    if state != "running":
        fail("the job is %s after an interrupted resume, not resumable" % state)
    print("ok: SIGTERM on resume: exit %d, no interchange or pool left" % res.returncode)
    fanout("resume", "1", "--db", db, "--quiet", timeout=240)
    support.check_rows_once(rows_of(root), 80, "after the second resume")


def resume_finishes_a_cut_submission(root):
    files = 600
    job = make_job(root, "cut", files, 0.02, workers=2, threshold_ms=4000)
    db = os.path.join(root, "fanout.db")
    proc = start_run(job, db, "--window", "20")
    wait_until(lambda: sql_int(db, "select count(*) from minibatches where job_id = 1") >= 60,
               120, "a part of the input to be submitted")
    pools = "-%d-pool" % proc.pid
    kill_client(proc)
    killed = time.monotonic()
    submitted = sql_int(db, "select count(*) from minibatches where job_id = 1")
    if sql_int(db, "select submit_done from jobs where id = 1") or submitted >= files:
        fail("the client finished submitting before it was killed (%d)" % submitted)
    # The interchange cannot finish the job without its client: it and its pools leave.
    wait_until(lambda: not processes_with(db) and not processes_with(pools), 60,
               "the interchange and pools to exit after their client was killed")
    took = time.monotonic() - killed
    if took > 4 + 8:
        fail("the children outlived their client by %.1f s (threshold 4 s)" % took)
    print("ok: client killed after %d of %d mini-batches; children gone after %.1f s" %
          (submitted, files, took))
    r = fanout("resume", "1", "--db", db, "--python", PYTHON, timeout=300)
    if "submitting the rest" not in r.stderr:
        fail("resume did not say it submits the rest:\n%s" % r.stderr)
    support.check_rows_once(rows_of(root), files, "resume after a cut submission")
    state = sql(db, "select state, total from jobs where id = 1")[0]
    if state != ("succeeded", files):
        fail("the job ended %s" % (state,))
    print("ok: resume submitted the rest: %d rows, each once" % files)


def interchange_owns_its_paths(root):
    """`fanout run --interchange`: the interchange's store and run folder, none of the client's."""
    job = make_job(root, "shared", 6, 0)
    ixdir = os.path.join(root, "ix")
    os.makedirs(ixdir)
    ixdb = os.path.join(ixdir, "store.db")
    cep, pep = "ipc://%s/client" % ixdir, "ipc://%s/pool" % ixdir
    # The job's output and the relative --run-dir below are the client's, beside ix/: a write
    # root (the default would be ix/ only).
    with support.Cluster(ixdir, ixdb, ["--client-endpoint", cep, "--pool-endpoint", pep,
                                       "--write-root", root]) as cl:
        cl.start_pool(workers=2)
        home = os.path.join(root, "home")
        os.makedirs(home)
        env = dict(os.environ, HOME=home)
        for k in ("FANOUT_DB", "XDG_DATA_HOME"):
            env.pop(k, None)
        r = fanout("run", job, "--interchange", cep, "--python", PYTHON, env=env)
        made = [os.path.join(d, f) for d, _, fs in os.walk(home) for f in fs + [""]]
        if any(".local" in m for m in made):
            fail("the client made folders under its HOME: %s" % made)
        if ixdb not in r.stderr or os.path.join(ixdir, "runs") not in r.stderr:
            fail("the client did not show the interchange's store and run folder:\n%s" % r.stderr)
        logs = [d for d, _, fs in os.walk(os.path.join(ixdir, "runs")) if "job_result.txt" in fs]
        if len(logs) != 1:
            fail("no job_result.txt under the interchange's runs/: %s" % logs)
        # A relative --run-dir is made absolute before anything is made or sent. (The same job
        # again: --overwrite replaces the first run's rows, as on every route.)
        r = fanout("run", job, "--interchange", cep, "--python", PYTHON, "--run-dir", "rel/runs",
                   "--overwrite", env=env, cwd=root)
        if not any("job_result.txt" in fs for _, _, fs in os.walk(os.path.join(root, "rel/runs"))):
            fail("no reports under the relative --run-dir:\n%s" % r.stderr)
        print("ok: the client showed and used the interchange's paths; HOME untouched")


CASES = [progress_fits_80_columns, wait_counts_from_the_jobs_start,
         dead_interchange_is_known_at_once, sigterm_on_resume_leaves_no_children,
         resume_finishes_a_cut_submission, interchange_owns_its_paths]


def main():
    support.require_fanout()
    wanted = sys.argv[1:]
    for case in CASES:
        if wanted and case.__name__ not in wanted:
            continue
        print("== %s" % case.__name__, flush=True)
        with scratch("client-life") as root:
            try:
                case(root)
            finally:
                for pid in processes_with(root):
                    os.kill(pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
