#!/usr/bin/env python3
"""`fanout run --launcher slurm` against a real Slurm.

Brings up tools/slurm_bed.sh (munged, slurmctld and slurmd in a scratch folder; two slurmd
"nodes" n1 and n2 on this host) and always brings it down. Each case runs the real `fanout`,
whose interchange listens on Curve TCP and whose pools are sbatch jobs running `srun
fanout-pool`:

  nodes_1        --nodes 1: every row exactly once, the batch script and the pool job's output
                 kept in the run folder, the settings recorded, the key folder made.
  nodes_2        --nodes 2: two pool jobs, one on each slurmd node, every row exactly once.
  scancel        --nodes 1 --max-nodes 2, the pool job scancelled mid-run: its work is
                 requeued, a replacement job finishes it, every row exactly once;
                 `fanout status` (and --json) names the pool jobs and their states.
  no_replacement the same without --max-nodes: `fanout run` stops with exit 3 naming the
                 pool job's output and `fanout resume`.
  cancel         `fanout cancel JOB` releases the pool job.
  interrupt      Ctrl-C (SIGINT) cancels the job and releases the pool job.
  client_killed  --exit-with-client, the client SIGKILLed: the pool job is released.
  walltime       a pool job's walltime of 1 minute (Slurm's smallest) with more work than
                 that on one node, --max-nodes 2: the pool learns the end from the batch
                 script (--walltime-end: its start + the walltime; no signal) and leaves before
                 it (COMPLETED, not TIMEOUT), handing back what it held: no WORKER_LOST
                 attempt, no try spent, a replacement finishes the job, every row exactly once.
                 (slurm_bed.sh: time limits checked every 30 s, KillWait 5 s.)
  walltime_no_replacement
                 the same with --max-nodes 1: exit 3 naming the pool job's walltime drain,
                 fanout.walltime and `fanout resume`.
  elastic_release
                 --init-nodes 2 --max-idletime 3, a long tail on one pool: the idle pool job
                 is released (drained, squeue no longer lists it, pool_jobs says
                 released-idle) before the job ends; every row exactly once.
  elastic_grow   --init-nodes 1 --max-nodes 2 with a backlog: a second pool job is added and
                 pool_jobs has 2 rows.

After each case `squeue` must be empty. Exit 77 (meson: skipped) with the reason when not root
or when slurm-wlm and munge cannot be installed. Environment: FANOUT_BIN, FANOUT_TOOLS_DIR.
"""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

from support import FANOUT, SKIP, TOOLS, check_rows_once, fail, scratch, wait_until
import support

BED = os.path.join(TOOLS, "slurm_bed.sh")

ENTRY = '''
import json
import os
import time

def init():
    pass

def run(mini_batch):
    # FAST_IF: a file the test makes once the pool job that had to be slow has ended.
    fast = os.environ.get("FAST_IF", "")
    time.sleep(0.02 if fast and os.path.exists(fast) else float(os.environ.get("SLEEP_S", "0")))
    return [os.path.basename(p) for p in mini_batch]
'''


def squeue(env, args=()):
    r = subprocess.run(["squeue", "-h", "-o", "%i %T %N"] + list(args), env=env,
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail("squeue: " + r.stderr)
    return r.stdout.strip()


def expect_no_jobs(env, case):
    # Released pool jobs may sit in COMPLETING for Slurm's KillWait; nothing may stay longer.
    left = []

    def empty():
        left[:] = [squeue(env)]
        return left[0] == ""
    deadline = time.time() + 60
    while time.time() < deadline:
        if empty():
            print(f"ok: {case}: squeue is empty")
            return
        time.sleep(0.5)
    fail(f"{case}: squeue still lists jobs: {left[0]}")


class Case:
    def __init__(self, root, name, files=24, sleep_s=0.0, extra="", walltime="00:10:00"):
        self.root = root
        self.dir = os.path.join(root, name)
        self.name = name
        self.expected = [f"f{i:03}.txt" for i in range(files)]
        support.make_files(os.path.join(self.dir, "data"), self.expected)
        support.write(os.path.join(self.dir, "src", "score.py"), ENTRY)
        self.out = os.path.join(self.dir, "out.txt")
        self.fast = os.path.join(self.dir, "fast")
        self.job = support.write(os.path.join(self.dir, "job.yaml"), support.job_yaml(
            name, output=self.out, mini_batch_size="2", concurrency=1,
            env={"SLEEP_S": sleep_s, "FAST_IF": self.fast},
            task="  code: ./src\n  entry_script: score.py\n",
            top=f"""fanout:
  launcher: slurm
  walltime: "{walltime}"
  heartbeat_period_ms: 500
  heartbeat_threshold_ms: 5000
{extra}"""))
        self.db = os.path.join(self.dir, "fanout.db")
        self.runs = os.path.join(self.dir, "runs")

    def argv(self, *extra):
        return [FANOUT, "run", self.job, "--db", self.db, "--run-dir", self.runs,
                "--keys", os.path.join(self.root, "keys"), "--interchange-address", "127.0.0.1"
                ] + list(extra)

    def run_dir(self):
        dirs = os.listdir(self.runs) if os.path.isdir(self.runs) else []
        return os.path.join(self.runs, dirs[0]) if len(dirs) == 1 else None

    def job_ids(self):
        rd = self.run_dir()
        path = os.path.join(rd, "slurm", "job_ids") if rd else ""
        if not rd or not os.path.exists(path):
            return []
        with open(path) as f:
            return [line.strip() for line in f if line.strip()]

    def rows_done(self):
        if not os.path.exists(self.out):
            return 0
        with open(self.out) as f:
            return sum(1 for _ in f)

    def check_rows(self):
        check_rows_once(support.read_rows(self.out), self.expected, self.name)
        print(f"ok: {self.name}: {len(self.expected)} rows, each exactly once")

    def query(self, sql):
        con = sqlite3.connect(self.db)
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()


def run_to_end(case, env, *extra):
    r = subprocess.run(case.argv(*extra), env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        fail(f"{case.name}: fanout run exited {r.returncode}:\n{r.stderr}")
    return r


def start(case, env, *extra):
    log = open(os.path.join(case.dir, "client.log"), "w")
    return subprocess.Popen(case.argv(*extra), env=env, stdout=log, stderr=subprocess.STDOUT)


def client_log(case):
    with open(os.path.join(case.dir, "client.log")) as f:
        return f.read()


def pool_job_running(c, env):
    """Waits for the case's first pool job and for Slurm to run it; returns its id."""
    first = wait_until(lambda: (c.job_ids() or [None])[0], 120, "the first pool job", step=0.5)
    wait_until(lambda: job_state(env, first) == "RUNNING", 120, "the pool job to run", step=0.5)
    return first


def job_state(env, job_id):
    out = squeue(env, ["-t", "all", "-j", job_id])
    return out.split()[1] if out else ""


def case_nodes_1(root, env):
    c = Case(root, "nodes_1")
    r = run_to_end(c, env, "--nodes", "1")
    c.check_rows()
    rd = c.run_dir()
    script = os.path.join(rd, "slurm", "pools.sbatch")
    with open(script) as f:
        text = f.read()
    for piece in ("#SBATCH --time=00:10:00", "srun", "fanout-pool", "--keys"):
        if piece not in text:
            fail(f"nodes_1: the batch script lacks {piece!r}:\n{text}")
    ids = c.job_ids()
    if len(ids) != 1:
        fail(f"nodes_1: expected one pool job, got {ids}")
    if not os.path.exists(os.path.join(rd, "slurm", f"pools-{ids[0]}.out")):
        fail(f"nodes_1: no pool job output in {rd}/slurm: {os.listdir(rd + '/slurm')}")
    logs = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(rd, "logs", "sys", "node"))
            for f in fs if f == f"pool-slurm{ids[0]}.log"]
    if not logs:
        fail(f"nodes_1: no pool-slurm{ids[0]}.log under {rd}/logs/sys/node")
    if "pool jobs: slurm job" not in r.stderr:
        fail(f"nodes_1: progress does not show the pool job:\n{r.stderr}")
    if not os.path.exists(os.path.join(root, "keys", "interchange_secret.key")) and \
            not any(f.startswith("interchange") for f in os.listdir(os.path.join(root, "keys"))):
        fail("nodes_1: the key folder was not made")
    settings = c.query("SELECT settings FROM jobs")[0][0]
    if '"launcher":"slurm"' not in settings or '"nodes":1' not in settings:
        fail(f"nodes_1: settings do not record the launcher: {settings}")
    print("ok: nodes_1: script, pool job output and log kept; settings recorded")
    expect_no_jobs(env, "nodes_1")


def case_nodes_2(root, env):
    # exclusive: a whole node each, so the two pool jobs cannot share n1.
    c = Case(root, "nodes_2", files=40, sleep_s=0.2, extra="  exclusive: true\n")
    run_to_end(c, env, "--nodes", "2")
    c.check_rows()
    if len(c.job_ids()) != 2:
        fail(f"nodes_2: expected two pool jobs, got {c.job_ids()}")
    nodes = sorted({n for (n,) in c.query("SELECT node FROM pools")})
    if nodes != ["n1", "n2"]:
        fail(f"nodes_2: expected pools on n1 and n2, got {nodes}")
    print("ok: nodes_2: one pool on each of n1 and n2")
    expect_no_jobs(env, "nodes_2")


def case_scancel(root, env):
    c = Case(root, "scancel", files=30, sleep_s=0.5)
    p = start(c, env, "--nodes", "1", "--max-nodes", "2")
    first = wait_until(lambda: (c.job_ids() or [None])[0], 120, "the first pool job", step=0.5)
    wait_until(lambda: c.rows_done() >= 4 or p.poll() is not None, 120, "some rows", step=0.5)
    if p.poll() is not None:
        fail(f"scancel: the job ended before the pool job could be cancelled:\n{client_log(c)}")
    job_id = c.query("SELECT id FROM jobs")[0][0]
    st = subprocess.run([FANOUT, "status", str(job_id), "--db", c.db], env=env,
                        capture_output=True, text=True, timeout=60)
    if f"slurm job {first} RUNNING" not in st.stdout:
        fail(f"scancel: fanout status does not show the pool job running:\n{st.stdout}")
    sj = subprocess.run([FANOUT, "status", str(job_id), "--db", c.db, "--json"], env=env,
                        capture_output=True, text=True, timeout=60)
    if json.loads(sj.stdout).get("slurm_jobs") != [{"id": int(first), "state": "RUNNING"}]:
        fail(f"scancel: fanout status --json does not list the pool job:\n{sj.stdout}")
    subprocess.run(["scancel", first], env=env, check=True, timeout=60)
    rc = p.wait(timeout=600)
    if rc != 0:
        fail(f"scancel: fanout run exited {rc}:\n{client_log(c)}")
    c.check_rows()
    ids = c.job_ids()
    if len(ids) != 2:
        fail(f"scancel: expected the cancelled pool job and one replacement, got {ids}")
    # The mini-batch the pool was running when Slurm killed it: WORKER_LOST (the worker got the
    # signal first) or POOL_LOST (the pool left or fell silent); either way it ran again.
    lost = c.query("SELECT status, count(*) FROM attempts WHERE status != 'RUN_DONE' "
                   "GROUP BY status")
    if not lost:
        fail("scancel: no attempt was cut short by the scancel")
    print(f"ok: scancel: pool job {first} cancelled mid-run, cut-short attempts {lost} ran "
          f"again, replacement {ids[1]} finished the job")
    if "replacement" not in client_log(c):
        fail("scancel: the client did not say it submitted a replacement")
    expect_no_jobs(env, "scancel")


def case_no_replacement(root, env):
    c = Case(root, "no_replacement", files=30, sleep_s=0.5)
    p = start(c, env, "--nodes", "1")
    first = wait_until(lambda: (c.job_ids() or [None])[0], 120, "the pool job", step=0.5)
    wait_until(lambda: c.rows_done() >= 2 or p.poll() is not None, 120, "some rows", step=0.5)
    subprocess.run(["scancel", first], env=env, check=True, timeout=60)
    rc = p.wait(timeout=300)
    log = client_log(c)
    if rc != 3 or "every pool job ended" not in log or "fanout resume" not in log:
        fail(f"no_replacement: expected exit 3 naming the ended pool job, got {rc}:\n{log}")
    if len(c.job_ids()) != 1:
        fail(f"no_replacement: a replacement was submitted without --max-nodes: {c.job_ids()}")
    print("ok: no_replacement: the run stops (exit 3) naming the pool job's output and resume")
    expect_no_jobs(env, "no_replacement")


def ended_state(env, job_id):
    """The pool job's final state once Slurm has let go of it (COMPLETING is not final)."""
    st = job_state(env, job_id)
    return st if st not in ("", "PENDING", "CONFIGURING", "RUNNING", "COMPLETING") else None


def walltime_case(root, env, name, *flags):
    # One worker, 1 s a mini-batch, 200 of them: 200 s of work for a pool job whose walltime is
    # 1 minute (Slurm's smallest). slurmctld checks time limits every 30 s, so Slurm ends it 60 to
    # 90 s after it started: SIGTERM to the pool and its workers, SIGKILL after KillWait (5 s in
    # slurm_bed.sh).
    c = Case(root, name, files=400, sleep_s=1.0, walltime="00:01:00")
    p = start(c, env, "--nodes", "1", *flags)
    first = pool_job_running(c, env)
    began = time.time()
    state = wait_until(lambda: ended_state(env, first), 300, "the walltime to end the pool job",
                       step=0.5)
    # The pool leaves a margin (30 s) before its walltime by itself: its job ends COMPLETED,
    # before Slurm's TIMEOUT would have cut a mini-batch short.
    if state != "COMPLETED":
        fail(f"{name}: pool job {first} ended {state}, not COMPLETED (the pool did not leave "
             f"before its walltime):\n{client_log(c)}")
    done = c.rows_done()
    if done >= len(c.expected):
        fail(f"{name}: the work ended before the walltime ({done} rows); make it longer")
    print(f"ok: {name}: pool job {first} ended {state} {time.time() - began:.0f} s after it "
          f"started, {done} of {len(c.expected)} rows written")
    # The rest need not take a replacement's whole walltime: from now on mini-batches are quick.
    with open(c.fast, "w"):
        pass
    return c, p, first


def pool_log_of(c, job_id):
    rd = c.run_dir()
    for d, _, fs in os.walk(os.path.join(rd, "logs", "sys", "node")):
        for f in fs:
            if f == f"pool-slurm{job_id}.log":
                with open(os.path.join(d, f), errors="replace") as fh:
                    return fh.read()
    return ""


def walltime_drained(c, first):
    """The first pool left by itself before its walltime, handing back what it held: no attempt
    was cut short (no WORKER_LOST, no POOL_LOST) and no try spent."""
    log = pool_log_of(c, first)
    if "--walltime-end" not in open(os.path.join(c.run_dir(), "slurm", "pools.sbatch")).read():
        fail("walltime: the batch script does not pass --walltime-end to its pools")
    if "stopping (walltime)" not in log:
        fail(f"walltime: pool job {first}'s pool did not drain for its walltime:\n{log[-3000:]}")
    if "stopping (signal)" in log:
        fail(f"walltime: pool job {first}'s pool got a signal (Slurm's TIMEOUT):\n{log[-3000:]}")
    lost = c.query("SELECT status, count(*) FROM attempts WHERE status != 'RUN_DONE' "
                   "GROUP BY status")
    if lost:
        fail(f"walltime: attempts cut short by the walltime: {lost}")
    tries = c.query("SELECT count(*) FROM attempts WHERE attempt > 1")
    if tries[0][0] != 0:
        fail(f"walltime: {tries[0][0]} mini-batches spent a try")
    handed = [line for line in log.splitlines() if "handed back" in line]
    print(f"ok: {c.name}: pool job {first} drained before its walltime, "
          f"{handed[-1:] or 'nothing handed back'}, no attempt cut short, no try spent")


def case_walltime(root, env):
    c, p, first = walltime_case(root, env, "walltime", "--max-nodes", "2")
    rc = p.wait(timeout=600)
    if rc != 0:
        fail(f"walltime: fanout run exited {rc}:\n{client_log(c)}")
    c.check_rows()
    ids = c.job_ids()
    if len(ids) != 2 or ids[0] != first:
        fail(f"walltime: expected the timed-out pool job and one replacement, got {ids}")
    walltime_drained(c, first)
    states = c.query("SELECT name, state FROM pools ORDER BY id")
    if len(states) != 2 or states[0][1] != "gone":
        fail(f"walltime: expected the first pool gone (it said goodbye) and a second one: "
             f"{states}")
    print(f"ok: walltime: replacement {ids[1]} finished the job; pools {states}")
    if "replacement" not in client_log(c):
        fail("walltime: the client did not say it submitted a replacement")
    expect_no_jobs(env, "walltime")


def case_walltime_no_replacement(root, env):
    c, p, first = walltime_case(root, env, "walltime_no_replacement", "--max-nodes", "1")
    rc = p.wait(timeout=300)
    log = client_log(c)
    if rc != 3 or "every pool job ended" not in log or "fanout resume" not in log:
        fail(f"walltime_no_replacement: expected exit 3 naming the ended pool job and resume, "
             f"got {rc}:\n{log}")
    if len(c.job_ids()) != 1:
        fail(f"walltime_no_replacement: a replacement was submitted with --max-nodes 1: "
             f"{c.job_ids()}")
    walltime_drained(c, first)
    # Why it ended and what to change: the walltime named.
    if (f"slurm job {first} COMPLETED" not in log or "left before its walltime" not in log
            or "fanout.walltime 00:01:00" not in log):
        fail(f"walltime_no_replacement: the message does not say the walltime ran out:\n{log}")
    print("ok: walltime_no_replacement: the run stops (exit 3) naming the pool job and resume")
    expect_no_jobs(env, "walltime_no_replacement")


def case_cancel(root, env):
    c = Case(root, "cancel", files=40, sleep_s=1.0)
    p = start(c, env, "--nodes", "1")
    first = pool_job_running(c, env)
    wait_until(lambda: c.query("SELECT id FROM jobs"), 120, "the job in the store", step=0.5)
    job_id = c.query("SELECT id FROM jobs")[0][0]
    r = subprocess.run([FANOUT, "cancel", str(job_id), "--db", c.db, "--keys",
                        os.path.join(root, "keys")], env=env, capture_output=True, text=True,
                       timeout=120)
    rc = p.wait(timeout=120)
    state = c.query("SELECT state FROM jobs")[0][0]
    if state != "cancelled":
        fail(f"cancel: job state {state}, cancel said: {r.stderr}\nclient: {client_log(c)}")
    print(f"ok: cancel: job cancelled (client exit {rc})")
    expect_no_jobs(env, "cancel")


def case_interrupt(root, env):
    c = Case(root, "interrupt", files=200, sleep_s=1.0)
    p = start(c, env, "--nodes", "1")
    first = pool_job_running(c, env)
    p.send_signal(signal.SIGINT)  # the first Ctrl-C cancels the job
    rc = p.wait(timeout=120)
    state = c.query("SELECT state FROM jobs")[0][0]
    if rc != 1 or state != "cancelled":
        fail(f"interrupt: expected exit 1 and a cancelled job, got {rc}, {state}:\n"
             f"{client_log(c)}")
    print("ok: interrupt: Ctrl-C cancelled the job")
    expect_no_jobs(env, "interrupt")


def case_client_killed(root, env):
    # 200 s of work: the pool job could not end by itself within expect_no_jobs' minute.
    c = Case(root, "client_killed", files=200, sleep_s=1.0)
    p = start(c, env, "--nodes", "1", "--exit-with-client")
    first = pool_job_running(c, env)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    expect_no_jobs(env, "client_killed")


# ---- elastic pool jobs (docs/cluster.md, section 6) ----

# The entry script of the elastic cases: f023.txt's mini-batch (the last) runs until the test
# creates <case>/go (or 300 s pass): a long tail the test ends once it has seen what it waits for.
HELD_ENTRY = '''
import os
import time

def init():
    pass

def run(mini_batch):
    names = [os.path.basename(p) for p in mini_batch]
    go = os.path.join(os.path.dirname(os.environ["FAST_IF"]), "go")
    if "f023.txt" in names:
        until = time.time() + 300
        while not os.path.exists(go) and time.time() < until:
            time.sleep(0.2)
    else:
        time.sleep(float(os.environ.get("SLEEP_S", "0")))
    return names
'''


class HeldCase(Case):
    def __init__(self, root, name, **kw):
        super().__init__(root, name, files=24, extra="  exclusive: true\n", **kw)
        support.write(os.path.join(self.dir, "src", "score.py"), HELD_ENTRY)

    def go(self):
        support.write(os.path.join(self.dir, "go"), "go\n")

    def pool_jobs(self):
        return self.query("SELECT sched_job_id, submitted, started, ended, end_reason "
                          "FROM pool_jobs ORDER BY id")


def finish_held(c, p, env):
    c.go()
    rc = p.wait(timeout=300)
    if rc != 0:
        fail(f"{c.name}: fanout run exited {rc}:\n{client_log(c)}")
    c.check_rows()


def case_elastic_release(root, env):
    """Two pool jobs, a long tail on one: the idle one is released before the job ends."""
    c = HeldCase(root, "elastic_release", sleep_s=0.1)
    p = start(c, env, "--init-nodes", "2", "--max-idletime", "3")
    ids = wait_until(lambda: len(c.job_ids()) == 2 and c.job_ids(), 120, "two pool jobs",
                     step=0.5)
    # Every mini-batch but the held one done, then one pool job gone while the job still runs.
    wait_until(lambda: c.rows_done() >= 22 or p.poll() is not None, 300, "22 rows", step=0.5)
    listed = lambda: {line.split()[0] for line in squeue(env).splitlines() if line.strip()}
    left = wait_until(lambda: [i for i in ids if i not in listed()] or p.poll() is not None,
                      300, "squeue to no longer list the idle pool job", step=0.5)
    if p.poll() is not None:
        fail(f"elastic_release: the run ended before a pool job was released:\n{client_log(c)}")
    released = left[0]
    wait_until(lambda: any(r[0] == released and r[4] == "released-idle"
                           for r in c.pool_jobs()), 120, "pool_jobs to say released-idle",
               step=0.5)
    finish_held(c, p, env)
    rows = c.pool_jobs()
    if len(rows) != 2 or sorted(r[0] for r in rows) != sorted(ids):
        fail(f"elastic_release: expected a pool_jobs row for each of {ids}, got {rows}")
    reasons = {r[0]: r[4] for r in rows}
    if reasons[released] != "released-idle" or any(r[3] is None for r in rows):
        fail(f"elastic_release: expected {released} released-idle and both ended, got {rows}")
    if "nothing waiting" not in client_log(c):
        fail(f"elastic_release: no scaling line names why:\n{client_log(c)}")
    print(f"ok: elastic_release: pool job {released} released while the job ran ({rows})")
    expect_no_jobs(env, "elastic_release")


def case_elastic_grow(root, env):
    """init_nodes 1, max_nodes 2 and a backlog that stays: a second pool job is added."""
    c = HeldCase(root, "elastic_grow", sleep_s=0.5)
    p = start(c, env, "--init-nodes", "1", "--max-nodes", "2", "--max-idletime", "600")
    wait_until(lambda: len(c.job_ids()) >= 2 or p.poll() is not None, 300,
               "a second pool job", step=0.5)
    if p.poll() is not None:
        fail(f"elastic_grow: the run ended with {c.job_ids()}:\n{client_log(c)}")
    finish_held(c, p, env)
    ids = c.job_ids()
    rows = c.pool_jobs()
    if len(ids) != 2 or len(rows) != 2:
        fail(f"elastic_grow: expected 2 pool jobs and 2 pool_jobs rows, got {ids}, {rows}")
    if "more" not in client_log(c):
        fail(f"elastic_grow: no scaling line names why:\n{client_log(c)}")
    print(f"ok: elastic_grow: a second pool job was added within max_nodes 2 ({rows})")
    expect_no_jobs(env, "elastic_grow")


def main():
    if not FANOUT or not os.path.exists(BED):
        print("it_slurm: FANOUT_BIN and FANOUT_TOOLS_DIR must be set", file=sys.stderr)
        return 2
    chk = subprocess.run(["bash", BED, "check"], capture_output=True, text=True)
    if chk.returncode == SKIP:
        print("it_slurm: skipped: " + (chk.stdout + chk.stderr).strip(), file=sys.stderr)
        return SKIP
    with scratch("slurm") as root:
        bed = os.path.join(root, "bed")
        env = dict(os.environ)
        env["SLURM_CONF"] = os.path.join(bed, "slurm.conf")
        try:
            up = subprocess.run(["bash", BED, "up", bed, "--nodes", "2"], capture_output=True,
                                text=True, timeout=300)
            if up.returncode != 0:
                fail("slurm_bed.sh up: " + up.stdout + up.stderr)
            cases = sys.argv[1:] or ["nodes_1", "nodes_2", "scancel", "no_replacement", "cancel",
                                     "interrupt", "client_killed", "walltime",
                                     "walltime_no_replacement"]
            if not sys.argv[1:]:
                cases += ["elastic_release", "elastic_grow"]
            for name in cases:
                globals()["case_" + name](root, env)
        finally:
            subprocess.run(["bash", BED, "down", bed], timeout=120)
    print("it_slurm: all cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
