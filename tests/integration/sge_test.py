#!/usr/bin/env python3
"""`fanout run --launcher sge` against a real Grid Engine.

Brings up tools/sge_bed.sh (sge_qmaster and sge_execd on this host, queue all.q, parallel
environment smp) and always brings it down. Each case runs the real `fanout`, whose interchange
listens on Curve TCP and whose pools are qsub jobs running fanout-pool:

  run        --nodes 1, cores_per_node 1 (-pe smp 1), a walltime (-l h_rt): every row exactly
             once, the job script and the pool job's output kept in the run folder, the pool's
             log named after the job id, the settings recorded.
  qdel       --nodes 1 --max-nodes 2, the pool job qdel'ed mid-run: its work is requeued, a
             replacement job finishes it, every row exactly once.
  status_cancel
             `fanout status` (and --json) lists the running pool job with qstat's state; with
             the client killed (nothing left to release the pool job), `fanout cancel` qdels it.

After each case `qstat` must list no job. Exit 77 (meson: skipped) with the reason when not root
or when the gridengine packages cannot be installed. Environment: FANOUT_BIN, FANOUT_TOOLS_DIR.
"""
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

from support import FANOUT, SKIP, TOOLS, check_rows_once, fail, scratch, wait_until
import support

BED = os.path.join(TOOLS, "sge_bed.sh")

ENTRY = '''
import os
import time

def init():
    pass

def run(mini_batch):
    time.sleep(float(os.environ.get("SLEEP_S", "0")))
    return [os.path.basename(p) for p in mini_batch]
'''


def qstat(env):
    r = subprocess.run(["qstat", "-u", "*"], env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail("qstat: " + r.stderr)
    return r.stdout.strip()


def expect_no_jobs(env, case):
    left = []

    def empty():
        left[:] = [qstat(env)]
        return left[0] == ""
    deadline = time.time() + 90
    while time.time() < deadline:
        if empty():
            print(f"ok: {case}: qstat lists no job")
            return
        time.sleep(0.5)
    fail(f"{case}: qstat still lists jobs:\n{left[0]}")


class Case:
    def __init__(self, root, name, files=24, sleep_s=0.0):
        self.root = root
        self.dir = os.path.join(root, name)
        self.name = name
        self.expected = [f"f{i:03}.txt" for i in range(files)]
        support.make_files(os.path.join(self.dir, "data"), self.expected)
        support.write(os.path.join(self.dir, "src", "score.py"), ENTRY)
        self.out = os.path.join(self.dir, "out.txt")
        self.job = support.write(os.path.join(self.dir, "job.yaml"), support.job_yaml(
            name, output=self.out, mini_batch_size="2", concurrency=1,
            env={"SLEEP_S": sleep_s},
            task="  code: ./src\n  entry_script: score.py\n",
            top="""fanout:
  launcher: sge
  walltime: "00:10:00"
  cores_per_node: 1
  heartbeat_period_ms: 500
  heartbeat_threshold_ms: 5000
"""))
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
        path = os.path.join(rd, "sge", "job_ids") if rd else ""
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


def case_run(root, env):
    c = Case(root, "run")
    r = subprocess.run(c.argv("--nodes", "1"), env=env, capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        fail(f"run: fanout run exited {r.returncode}:\n{r.stderr}")
    c.check_rows()
    rd = c.run_dir()
    with open(os.path.join(rd, "sge", "pools.sh")) as f:
        text = f.read()
    for piece in ("#$ -l h_rt=0:10:00", "#$ -pe smp 1", "fanout-pool", "--keys",
                  "start=$(date +%s)", '--walltime-end "$((start + 600))"'):
        if piece not in text:
            fail(f"run: the job script lacks {piece!r}:\n{text}")
    ids = c.job_ids()
    if len(ids) != 1:
        fail(f"run: expected one pool job, got {ids}")
    if not os.path.exists(os.path.join(rd, "sge", f"pools-{ids[0]}.out")):
        fail(f"run: no pool job output in {rd}/sge: {os.listdir(rd + '/sge')}")
    logs = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(rd, "logs", "sys", "node"))
            for f in fs if f == f"pool-sge{ids[0]}.log"]
    if not logs:
        fail(f"run: no pool-sge{ids[0]}.log under {rd}/logs/sys/node")
    if "pool jobs: sge job" not in r.stderr:
        fail(f"run: progress does not show the pool job:\n{r.stderr}")
    print("ok: run: script, pool job output and log kept")
    expect_no_jobs(env, "run")


def case_qdel(root, env):
    c = Case(root, "qdel", files=30, sleep_s=0.5)
    log = open(os.path.join(c.dir, "client.log"), "w")
    p = subprocess.Popen(c.argv("--nodes", "1", "--max-nodes", "2"), env=env, stdout=log,
                         stderr=subprocess.STDOUT)
    try:
        first = wait_until(lambda: (c.job_ids() or [None])[0], 120, "the first pool job",
                           step=0.5)
        wait_until(lambda: c.rows_done() >= 4 or p.poll() is not None, 300, "some rows",
                   step=0.5)
        if p.poll() is not None:
            fail("qdel: the job ended before the pool job could be deleted")
        d = subprocess.run(["qdel", first], env=env, capture_output=True, text=True, timeout=60)
        if d.returncode != 0:
            fail(f"qdel {first}: {d.stderr}")
        rc = p.wait(timeout=600)
    finally:
        if p.poll() is None:
            p.kill()
    with open(os.path.join(c.dir, "client.log")) as f:
        out = f.read()
    if rc != 0:
        fail(f"qdel: fanout run exited {rc}:\n{out}")
    c.check_rows()
    if len(c.job_ids()) != 2:
        fail(f"qdel: expected a replacement pool job, got {c.job_ids()}:\n{out}")
    if "replacement pool job" not in out:
        fail(f"qdel: the client did not say it submitted a replacement:\n{out}")
    print(f"ok: qdel: pool job {first} deleted, replaced by {c.job_ids()[1]}")
    expect_no_jobs(env, "qdel")


def interchange_pid(run_dir):
    try:
        text = open(os.path.join(run_dir, "interchange.ready")).read()
    except OSError:
        return 0
    m = re.search(r"^pid=(\d+)$", text, re.M)
    return int(m.group(1)) if m else 0


def check_status_lists(c, env, job_id, first):
    st = subprocess.run([FANOUT, "status", str(job_id), "--db", c.db], env=env,
                        capture_output=True, text=True, timeout=120)
    if f"sge job {first} r" not in st.stdout:
        fail(f"status_cancel: fanout status does not show the pool job running:\n{st.stdout}"
             f"{st.stderr}")
    sj = subprocess.run([FANOUT, "status", str(job_id), "--db", c.db, "--json"], env=env,
                        capture_output=True, text=True, timeout=120)
    want = {"scheduler": "sge", "jobs": [{"id": first, "state": "r"}]}
    if json.loads(sj.stdout).get("pool_jobs") != want:
        fail(f"status_cancel: fanout status --json does not list the pool job:\n{sj.stdout}")
    print(f"ok: status_cancel: fanout status lists sge job {first} r")


def case_status_cancel(root, env):
    c = Case(root, "status_cancel", files=200, sleep_s=1.0)
    log = open(os.path.join(c.dir, "client.log"), "w")
    p = subprocess.Popen(c.argv("--nodes", "1"), env=env, stdout=log, stderr=subprocess.STDOUT)
    ix = 0
    try:
        first = wait_until(lambda: (c.job_ids() or [None])[0], 120, "the first pool job",
                           step=0.5)
        wait_until(lambda: c.rows_done() >= 2, 300, "some rows", step=0.5)
        job_id = sqlite3.connect(c.db).execute("SELECT id FROM jobs").fetchone()[0]
        check_status_lists(c, env, job_id, first)
        # The client gone (no --exit-with-client): only `fanout cancel` is left to end the pool
        # job; its interchange runs on.
        p.kill()
        p.wait(timeout=60)
        ix = interchange_pid(c.run_dir())
        r = subprocess.run([FANOUT, "cancel", str(job_id), "--db", c.db, "--keys",
                            os.path.join(root, "keys")], env=env, capture_output=True,
                           text=True, timeout=300)
        if f"cancelled sge job(s) {first}" not in r.stderr:
            fail(f"status_cancel: fanout cancel did not say it qdel'ed {first}:\n{r.stderr}")
        expect_no_jobs(env, "status_cancel")
    finally:
        if p.poll() is None:
            p.kill()
        if ix:
            try:
                os.kill(ix, signal.SIGKILL)
            except ProcessLookupError:
                pass


def main():
    if not FANOUT or not os.path.exists(BED):
        print("it_sge: FANOUT_BIN and FANOUT_TOOLS_DIR must be set", file=sys.stderr)
        return 2
    chk = subprocess.run(["bash", BED, "check"], capture_output=True, text=True)
    if chk.returncode == SKIP:
        print("SKIP: " + (chk.stdout + chk.stderr).strip())
        return SKIP
    env = dict(os.environ)
    env["SGE_ROOT"] = "/var/lib/gridengine"
    env["SGE_CELL"] = "default"
    with scratch("sge") as root:
        try:
            up = subprocess.run(["bash", BED, "up"], capture_output=True, text=True,
                                timeout=300)
            if up.returncode != 0:
                fail("sge_bed.sh up: " + up.stdout + up.stderr)
            for name in sys.argv[1:] or ["run", "qdel", "status_cancel"]:
                globals()["case_" + name](root, env)
        finally:
            subprocess.run(["bash", BED, "down"], timeout=120)
    print("it_sge: all cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
