#!/usr/bin/env python3
"""What an independent chaos run found, each through the real binaries (docs/architecture.md,
failure table).

- resume_failed_on_a_shared_interchange: a job on a standalone interchange ends partial (its
  entry script fails some files); once the cause is gone, `fanout resume 1 --failed --db S`
  (the interchange still owns the store) asks it to reopen the failed mini-batches: the job
  succeeds, every row exactly once.
- resume_failed_while_another_run_owns_the_store: the same on the embedded route, while another
  `fanout run` owns the store: its interchange reopens the job and its pools run it.
- counts_agree_after_a_full_output_disk (root: a 1 MiB tmpfs): a job whose rows fill the disk
  its output is on ends failed; the end summary's counts are the store's (results whose rows
  could not be written were taken back), the output holds the store's rows, and no mini-batch
  is left `running` in the ended job.
- listing_accounts_for_every_entry: a uri_folder holding a folder its user cannot open (as a
  second local user made with useradd when the test runs as root), a path past PATH_MAX (450
  nested folders), a FIFO, a dangling link and `ln -s .. parent`: each entry that is no input
  fails a mini-batch of its own as INPUT_UNREADABLE naming the path and the errno (seen by
  `fanout status`), the good files succeed, and the job's store, output and logs, reached
  through `parent`, are never its inputs.
- user_log_cap_holds_at_the_pools_end: a worker writes 6 MB to stdout at once against a pool's
  --max-user-log-mb 1, and the pool is stopped right after (before its next periodic check):
  the file is cut to the cap at the worker's and the pool's end.

Arguments: names of the cases to run (default: all). Environment: FANOUT_BIN and the other
paths tests/meson.build sets; FANOUT_TEST_PYTHON (the workers' interpreter, default python3).
"""
import os
import re
import signal
import subprocess
import sys

from support import FANOUT, PYTHON, fail, fanout, scratch, sql, sql_int, wait_until
import support

# Fails the odd-numbered files while FAIL_FLAG exists; waits for GATE (when set) first.
SCRIPT = """import os, time
def run(mini_batch):
    gate = os.environ.get("GATE", "")
    while gate and not os.path.exists(gate):
        time.sleep(0.1)
    out = []
    for p in mini_batch:
        name = os.path.basename(p)
        if int(name[1:6]) % 2 == 1 and os.path.exists(os.environ["FAIL_FLAG"]):
            raise RuntimeError("failing on purpose: " + name)
        out.append(name)
    return out
"""


def make_job(root, name, files, env):
    """A job over `files` files in ROOT/NAME/data, rows to ROOT/NAME/out.txt, no retries."""
    folder = os.path.join(root, name)
    support.make_files(os.path.join(folder, "data"), ["f%05d.txt" % i for i in range(files)])
    support.write(os.path.join(folder, "src", "score.py"), SCRIPT)
    return support.write(os.path.join(folder, "job.yaml"), support.job_yaml(
        name, instance_count=1, concurrency=2, retries=0, env=env))


def job_state(db, job):
    rows = sql(db, "select state from jobs where id = %d" % job)
    return rows[0][0] if rows else ""


def check_resumed(db, root, name, files, r):
    """Job 1 succeeded after `r` (the resume), every row exactly once."""
    if r.returncode != 0 or job_state(db, 1) != "succeeded":
        fail("resume --failed: exit %d, job %s\n%s" % (r.returncode, job_state(db, 1), r.stderr))
    rows = support.read_rows(os.path.join(root, name, "out.txt"))
    support.check_rows_once(rows, ["f%05d.txt" % i for i in range(files)], "job 1's output")
    if sql_int(db, "select count(*) from minibatches where job_id = 1 and state != 'succeeded'"):
        fail("job 1 has mini-batches that did not succeed: %s" %
             sql(db, "select id, state from minibatches where job_id = 1"))


def resume_failed_on_a_shared_interchange(root):
    flag = support.write(os.path.join(root, "fail.flag"), "")
    job = make_job(root, "shared", 6, {"FAIL_FLAG": flag})
    ixdir = os.path.join(root, "ix")
    os.makedirs(ixdir)
    db = os.path.join(ixdir, "store.db")
    cep, pep = "ipc://%s/client" % ixdir, "ipc://%s/pool" % ixdir
    with support.Cluster(ixdir, db, ["--client-endpoint", cep, "--pool-endpoint", pep,
                                     "--write-root", root]) as cl:
        cl.start_pool(workers=2)
        r = fanout("run", job, "--interchange", cep, "--python", PYTHON, check=False)
        if job_state(db, 1) not in ("partial", "failed"):
            fail("the job did not end with failures: %s\n%s" % (job_state(db, 1), r.stderr))
        os.unlink(flag)
        r = fanout("resume", "1", "--failed", "--db", db, "--quiet", check=False)
        check_resumed(db, root, "shared", 6, r)
        if cl.ix.poll() is not None:
            fail("the shared interchange exited")
    print("ok: the shared interchange reopened the failed mini-batches; the job succeeded")


def resume_failed_while_another_run_owns_the_store(root):
    flag = support.write(os.path.join(root, "fail.flag"), "")
    gate = os.path.join(root, "gate")
    db = os.path.join(root, "store.db")
    first = make_job(root, "first", 4, {"FAIL_FLAG": flag})
    r = fanout("run", first, "--db", db, "--python", PYTHON, "--quiet", check=False)
    if job_state(db, 1) not in ("partial", "failed"):
        fail("job 1 did not end with failures: %s\n%s" % (job_state(db, 1), r.stderr))
    # Job 2 holds one worker of the owner's pool until the gate opens; the other runs job 1.
    second = make_job(root, "second", 1, {"FAIL_FLAG": flag, "GATE": gate})
    owner = subprocess.Popen([FANOUT, "run", second, "--db", db, "--python", PYTHON, "--quiet"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: sql_int(db, "select count(*) from minibatches where job_id = 2 and "
                                       "state = 'running'"), 120, "job 2 to run")
        os.unlink(flag)
        r = fanout("resume", "1", "--failed", "--db", db, "--quiet", check=False)
        check_resumed(db, root, "first", 4, r)
        if owner.poll() is not None:
            fail("the run that owns the store exited: %s" % owner.stderr.read())
    finally:
        support.write(gate, "")
    if owner.wait(timeout=120) != 0:
        fail("the owner's run failed: %s" % owner.stderr.read())
    print("ok: the owning run's interchange reopened job 1 and ran it; job 2 went on")


# Each mini-batch's row is 100 KB: a 1 MiB disk takes about ten.
BIG_ROWS = """import os, time
def run(mini_batch):
    time.sleep(0.2)
    return [os.path.basename(mini_batch[0]) + " " + "x" * 100000]
"""


def counts_agree_after_a_full_output_disk(root):
    if os.geteuid() != 0:
        return "needs root to mount a small tmpfs (mount -t tmpfs)"
    full = os.path.join(root, "full")
    os.makedirs(full)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", full]).returncode != 0:
        return "cannot mount a tmpfs on " + full
    try:
        support.make_files(os.path.join(root, "data"), ["f%05d.txt" % i for i in range(40)])
        support.write(os.path.join(root, "src", "score.py"), BIG_ROWS)
        job = support.write(os.path.join(root, "job.yaml"), support.job_yaml(
            "full", output=os.path.join(full, "out.txt"), instance_count=1, concurrency=4))
        db = os.path.join(root, "store.db")
        r = fanout("run", job, "--db", db, "--python", PYTHON, "--quiet", check=False)
        if job_state(db, 1) != "failed" or "No space left" not in r.stderr:
            fail("the job did not fail on the full disk: %s\n%s" % (job_state(db, 1), r.stderr))
        m = re.search(r"mini-batches: ([\d,]+) succeeded, ([\d,]+) failed of [\d,]+; .*"
                      r"attempts: ([\d,]+) \(([\d,]+) failed\)", r.stderr)
        if not m:
            fail("no counts in the end summary:\n%s" % r.stderr)
        said = [int(g.replace(",", "")) for g in m.groups()]
        stored = list(sql(db, "select succeeded, failed, attempts, attempts_failed "
                              "from job_counts where job_id = 1")[0])
        if said != stored:
            fail("the end summary says %s (succeeded, failed, attempts, failed attempts), the "
                 "store %s\n%s" % (said, stored, r.stderr))
        running = sql(db, "select id from minibatches where job_id = 1 and state = 'running'")
        if running:
            fail("mini-batches left running in the failed job: %s" % running)
        rows = support.read_rows(os.path.join(full, "out.txt"))
        if len(rows) != stored[0]:
            fail("the output holds %d rows, the store %d succeeded mini-batches" %
                 (len(rows), stored[0]))
        status = fanout("status", "1", "--db", db, check=False).stdout
        if re.search(r"\b[1-9][\d,]* running", status):
            fail("fanout status shows mini-batches running in the ended job:\n%s" % status)
    finally:
        subprocess.run(["umount", "-l", full], check=False)
    print("ok: the end summary, the store and the output agree: %s" % stored)
    return None


def deep_file(top, depth):
    """A file at the bottom of `depth` nested folders under `top` (past PATH_MAX), made through
    directory descriptors since no path to it can be opened."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d123456789", dir_fd=fd)
            nxt = os.open("d123456789", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        os.close(os.open("deep.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


def as_user(user):
    """preexec_fn and environment that run a child as `user` (None: as this process)."""
    if user is None:
        return None
    import pwd
    pw = pwd.getpwnam(user)

    def drop():
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)
    return drop


def listing_accounts_for_every_entry(root):
    user = None
    if os.geteuid() == 0:
        user = "fanout_r4_%d" % os.getpid()
        if subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", user],
                          capture_output=True).returncode != 0:
            return "cannot create a second local user with useradd"
    try:
        return listing_case(root, user)
    finally:
        if user:
            subprocess.run(["userdel", "-r", user], capture_output=True)


def listing_case(root, user):
    python = "/usr/bin/python3" if user and os.path.exists("/usr/bin/python3") else PYTHON
    data = os.path.join(root, "data")
    support.make_files(data, ["f00000.txt", "f00002.txt"])
    support.make_files(os.path.join(data, "locked"), ["f00004.txt"])
    os.mkfifo(os.path.join(data, "pipe"))
    os.symlink(os.path.join(root, "nowhere"), os.path.join(data, "dangling"))
    os.symlink("..", os.path.join(data, "parent"))
    os.makedirs(os.path.join(data, "deep"))
    deep_file(os.path.join(data, "deep"), 450)
    support.write(os.path.join(root, "src", "score.py"), PASS_NAMES)
    job = support.write(os.path.join(root, "job.yaml"), support.job_yaml(
        "listing", instance_count=1, concurrency=2, retries=0))
    db = os.path.join(root, "store.db")
    # The store exists before the run (an earlier job's), as does the output folder.
    if user:
        subprocess.run(["chown", "-R", user, root], check=True)
    os.chmod(os.path.join(data, "locked"), 0)
    env = dict(os.environ, HOME=root)
    p = subprocess.run([FANOUT, "run", job, "--db", db, "--python", python, "--quiet"],
                       cwd=root, env=env, capture_output=True, text=True, timeout=300,
                       preexec_fn=as_user(user))
    os.chmod(os.path.join(data, "locked"), 0o755)
    if job_state(db, 1) not in ("partial", "failed"):
        fail("the job did not account for the entries it cannot list: %s (exit %d)\n%s" %
             (job_state(db, 1), p.returncode, p.stderr))
    refused = sql(db, "select error_message from attempts where job_id = 1 and "
                      "error_category = 'INPUT_UNREADABLE'")
    said = "\n".join(m for (m,) in refused)
    for what in ("locked: opendir: Permission denied (EACCES)", "pipe: a FIFO",
                 "dangling: a symbolic link to nothing", "(ENAMETOOLONG)"):
        if what not in said:
            fail("no INPUT_UNREADABLE attempt says %r; they say:\n%s\n%s" % (what, said, p.stderr))
    items = [i for (i,) in sql(db, "select descriptor from minibatch_inputs where job_id = 1")]
    own = [i for i in items if any(x in i for x in (b"store.db", b"out.txt", b"runs"))]
    if own:
        fail("the job listed its own store, output or logs as inputs: %s" % own)
    rows = support.read_rows(os.path.join(root, "out.txt"))
    for name in ("f00000.txt", "f00002.txt"):
        if rows.count(name) != 1:
            fail("%s is not in the output exactly once: %s" % (name, rows))
    status = fanout("status", "1", "--db", db, check=False).stdout
    if not any(m in status for (m,) in refused):
        fail("fanout status does not show the refusals:\n%s" % status)
    print("ok: %d entries refused as INPUT_UNREADABLE, the job's own files not listed" %
          len(refused))
    return None


# Each item's name is its row.
PASS_NAMES = """import os
def run(mini_batch):
    return [os.path.basename(p) for p in mini_batch]
"""


# Writes a burst of 6 MB to stdout, says so, and waits to be stopped.
BURST = """import os, sys, time
def run(mini_batch):
    sys.stdout.write(("y" * 1023 + "\\n") * 6 * 1024)
    sys.stdout.flush()
    open(os.environ["MARK"], "w").close()
    time.sleep(120)
    return mini_batch
"""


def user_log_cap_holds_at_the_pools_end(root):
    mark = os.path.join(root, "written")
    support.make_files(os.path.join(root, "data"), ["f00000.txt"])
    support.write(os.path.join(root, "src", "score.py"), BURST)
    job = support.write(os.path.join(root, "job.yaml"), support.job_yaml(
        "burst", instance_count=1, concurrency=1, env={"MARK": mark}))
    ixdir = os.path.join(root, "ix")
    os.makedirs(ixdir)
    db = os.path.join(ixdir, "store.db")
    cep, pep = "ipc://%s/client" % ixdir, "ipc://%s/pool" % ixdir
    with support.Cluster(ixdir, db, ["--client-endpoint", cep, "--pool-endpoint", pep,
                                     "--write-root", root]) as cl:
        pool = cl.start_pool(workers=1, extra=["--max-user-log-mb", "1", "--drain-grace-ms",
                                               "100"])
        client = subprocess.Popen([FANOUT, "run", job, "--interchange", cep, "--python", PYTHON,
                                   "--quiet"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: os.path.exists(mark), 120, "the worker's burst")
            pool.terminate()
            pool.wait(timeout=60)
        finally:
            client.kill()
            client.wait()
    logs = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
            if "stdout" in d and f.endswith(".txt")]
    if not logs:
        fail("no user stdout log under %s" % root)
    cap = 1024 * 1024 + 4096  # the cap and the note that says it was reached
    big = [(p, os.path.getsize(p)) for p in logs if os.path.getsize(p) > cap]
    if big:
        fail("user logs over the 1 MB cap after the pool's end: %s" % big)
    print("ok: user logs within the cap at the pool's end: %s" %
          [(os.path.basename(p), os.path.getsize(p)) for p in logs])
    return None


def processes_under(root):
    """Pids of live processes whose command line names the scratch folder `root` (what this
    test started: its folder is unique)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read()
        except OSError:
            continue
        if root.encode() in argv:
            found.append(int(d))
    return found


CASES = [resume_failed_on_a_shared_interchange, resume_failed_while_another_run_owns_the_store,
         counts_agree_after_a_full_output_disk, listing_accounts_for_every_entry,
         user_log_cap_holds_at_the_pools_end]


def main():
    support.require_fanout()
    wanted = sys.argv[1:]
    ran = skipped = 0
    for case in CASES:
        if wanted and case.__name__ not in wanted:
            continue
        print("== %s" % case.__name__, flush=True)
        with scratch("reliability4") as root:
            try:
                why = case(root)
                ran += 1
                if why:
                    skipped += 1
                    print("SKIP: %s: %s" % (case.__name__, why), flush=True)
            finally:
                for pid in processes_under(root):
                    os.kill(pid, signal.SIGKILL)
    if ran and skipped == ran:
        support.skip("every case was skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
