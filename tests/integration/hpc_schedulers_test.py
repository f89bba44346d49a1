#!/usr/bin/env python3
"""`fanout run --launcher pbs|lsf|condor` against stand-in schedulers.

No PBS, LSF or HTCondor can be installed on this machine (no Debian package), so the test writes
stand-ins for qsub/qstat/qdel, bsub/bjobs/bkill and condor_submit/condor_q/condor_rm into its
temp folder and puts them first on PATH. Each submit command starts the submitted job on this
host in the background (its own session, so it can be removed whole) and prints what the real
command prints; each status command answers in the real command's format (qstat -f, bjobs -w,
condor_q -af:j), saying of a finished job what the real one says; each cancel command ends the
job's processes. For each scheduler the real `fanout` runs a job whose pools are such jobs:

  pbs     every row exactly once; worker_init ran before the pool (it exports a variable run()
          writes into each row's file); the batch script kept; scheduler_options passed through.
  lsf     the same through bsub (the script on its standard input).
  condor  nodes_per_block 2: `queue 2`, two pools in the one cluster, every row exactly once.
  pbs status/cancel
          a long job: `fanout status` (and --json) lists its pool job with qstat's state; the
          client killed (nothing left to release the pool job), `fanout cancel` qdels it.

After each case no process of any pool job is left. Environment: FANOUT_BIN.
"""
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

from support import FANOUT, check_rows_once, fail, scratch, wait_until
import support

# One stand-in, dispatching on the name it is called by; state in $FAKE_SCHED_DIR.
STAND_IN = r'''#!/usr/bin/env python3
import os, signal, subprocess, sys, time
state = os.environ["FAKE_SCHED_DIR"]
me = os.path.basename(sys.argv[0])
args = sys.argv[1:]

def next_id():
    path = os.path.join(state, "counter")
    n = int(open(path).read()) + 1 if os.path.exists(path) else 100
    open(path, "w").write(str(n))
    return n

def start(key, argv, env):
    log = open(os.path.join(state, key + ".out"), "w")
    p = subprocess.Popen(argv, env=dict(os.environ, **env), stdin=subprocess.DEVNULL,
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    open(os.path.join(state, key + ".pid"), "w").write(str(p.pid))

def alive(key):
    path = os.path.join(state, key + ".pid")
    if not os.path.exists(path):
        return False
    pid = int(open(path).read())
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

def cancel(key):
    path = os.path.join(state, key + ".pid")
    if not os.path.exists(path):
        return
    pid = int(open(path).read())
    try:
        os.killpg(pid, signal.SIGTERM)
    except OSError:
        return
    for _ in range(100):
        if not alive(key):
            return
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass

def procs(cluster):
    return sorted(f[:-4] for f in os.listdir(state)
                  if f.startswith(cluster + ".") and f.endswith(".pid"))

if me == "qsub":
    n = next_id()
    start(str(n), ["/bin/sh", args[-1]], {"PBS_JOBID": "%d.fakepbs" % n})
    print("%d.fakepbs" % n)
elif me == "qstat":
    code = 0
    for jid in args[1:]:
        key = jid.split(".")[0]
        if alive(key):
            print("Job Id: %d.fakepbs.example.org\n    Job_Name = fanout\n    job_state = R\n"
                  "    queue = workq\n" % int(key))
        else:
            sys.stderr.write("qstat: %s Job has finished, use -x or -H to obtain historical "
                             "job information\n" % jid)
            code = 35
    sys.exit(code)
elif me in ("qdel", "bkill", "condor_rm"):
    for jid in args:
        for key in (procs(jid) if me == "condor_rm" else [jid.split(".")[0]]):
            cancel(key)
    if me == "condor_rm":
        print("All jobs in cluster %s have been marked for removal" % args[0])
elif me == "bsub":
    n = next_id()
    script = os.path.join(state, "%d.lsf" % n)
    open(script, "w").write(sys.stdin.read())
    start(str(n), ["/bin/sh", script], {"LSB_JOBID": str(n), "LSB_MCPU_HOSTS": "localhost 1"})
    print("Job <%d> is submitted to default queue <normal>." % n)
elif me == "bjobs":
    ids = [a for a in args if not a.startswith("-")]
    print("JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME")
    for jid in ids:
        st = "RUN" if alive(jid) else "DONE"
        print("%-7s alice   %-5s normal     login1      node01      fanout     Nov 26 06:40"
              % (jid, st))
elif me == "condor_submit":
    desc = {}
    count = 1
    for line in open(args[-1]):
        line = line.strip()
        if line.startswith("queue"):
            count = int(line.split()[1]) if len(line.split()) > 1 else 1
        elif "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            desc[k.strip().lower()] = v.strip()
    n = next_id()
    for p in range(count):
        start("%d.%d" % (n, p), [desc["executable"], str(n), str(p)], {})
    print("Submitting job(s)" + "." * count)
    print("%d job(s) submitted to cluster %d." % (count, n))
elif me == "condor_q":
    ids = [a for a in args if not a.startswith("-") and a != "JobStatus"]
    for cluster in ids:
        for key in procs(cluster):
            if alive(key):  # a finished process leaves the queue
                print("%s 2" % key)
else:
    sys.exit("stand-in: unknown name " + me)
'''

NAMES = ["qsub", "qstat", "qdel", "bsub", "bjobs", "bkill", "condor_submit", "condor_q",
         "condor_rm"]

ENTRY = '''
import os

def run(mini_batch):
    # FROM_INIT: exported by fanout.worker_init in the pool job, before the pool started.
    return [os.path.basename(p) + " " + os.environ.get("FROM_INIT", "-") for p in mini_batch]
'''


def leftover(state):
    """The pids of stand-in jobs whose session still has a process."""
    left = []
    for f in os.listdir(state):
        if not f.endswith(".pid"):
            continue
        pid = int(open(os.path.join(state, f)).read())
        try:
            os.killpg(pid, 0)
            left.append(pid)
        except ProcessLookupError:
            pass
    return left


def run_case(root, kind, extra_keys, files=20):
    d = os.path.join(root, kind)
    state = os.path.join(d, "sched")
    os.makedirs(state)
    names = [f"f{i:03}.txt" for i in range(files)]
    support.make_files(os.path.join(d, "data"), names)
    support.write(os.path.join(d, "src", "score.py"), ENTRY)
    out = os.path.join(d, "out.txt")
    job = support.write(os.path.join(d, "job.yaml"), support.job_yaml(
        kind, output=out, mini_batch_size="2", concurrency=1,
        task="  code: ./src\n  entry_script: score.py\n",
        top=f"""fanout:
  launcher: {kind}
  walltime: "00:10:00"
  heartbeat_period_ms: 500
  heartbeat_threshold_ms: 5000
  worker_init: |
    export FROM_INIT=init-{kind}
{extra_keys}"""))
    env = dict(os.environ, FAKE_SCHED_DIR=state,
               PATH=os.path.join(root, "bin") + os.pathsep + os.environ.get("PATH", ""))
    runs = os.path.join(d, "runs")
    argv = [FANOUT, "run", job, "--db", os.path.join(d, "fanout.db"), "--run-dir", runs,
            "--keys", os.path.join(root, "keys"), "--interchange-address", "127.0.0.1"]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        fail(f"{kind}: fanout run exited {r.returncode}:\n{r.stderr}")
    check_rows_once(support.read_rows(out), [f"{n} init-{kind}" for n in names], kind)
    print(f"ok: {kind}: {files} rows, each exactly once, worker_init ran before the pool")
    if f"pool jobs: {kind} job" not in r.stderr:
        fail(f"{kind}: progress does not show the pool job:\n{r.stderr}")
    rd = os.path.join(runs, os.listdir(runs)[0])
    deadline = time.monotonic() + 60
    while leftover(state) and time.monotonic() < deadline:
        time.sleep(0.2)
    if leftover(state):
        fail(f"{kind}: processes left after the run: {leftover(state)}")
    print(f"ok: {kind}: no pool job process left")
    return rd, r


SLOW_ENTRY = '''
import os, time

def run(mini_batch):
    time.sleep(1)
    return [os.path.basename(p) for p in mini_batch]
'''


def interchange_pid(run_dir):
    try:
        text = open(os.path.join(run_dir, "interchange.ready")).read()
    except OSError:
        return 0
    m = re.search(r"^pid=(\d+)$", text, re.M)
    return int(m.group(1)) if m else 0


def status_cancel_case(root):
    """fanout status and fanout cancel of a pbs job whose client is gone."""
    d = os.path.join(root, "pbs-status")
    state = os.path.join(d, "sched")
    os.makedirs(state)
    support.make_files(os.path.join(d, "data"), [f"f{i:03}.txt" for i in range(200)])
    support.write(os.path.join(d, "src", "score.py"), SLOW_ENTRY)
    out = os.path.join(d, "out.txt")
    job = support.write(os.path.join(d, "job.yaml"), support.job_yaml(
        "pbs-status", output=out, mini_batch_size="2", concurrency=1,
        task="  code: ./src\n  entry_script: score.py\n",
        top="fanout:\n  launcher: pbs\n  walltime: \"00:10:00\"\n  heartbeat_period_ms: 500\n"
            "  heartbeat_threshold_ms: 5000\n"))
    env = dict(os.environ, FAKE_SCHED_DIR=state,
               PATH=os.path.join(root, "bin") + os.pathsep + os.environ.get("PATH", ""))
    db, runs = os.path.join(d, "fanout.db"), os.path.join(d, "runs")
    p = subprocess.Popen([FANOUT, "run", job, "--db", db, "--run-dir", runs, "--keys",
                          os.path.join(root, "keys"), "--interchange-address", "127.0.0.1"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ix = 0
    try:
        wait_until(lambda: os.path.exists(out) and len(read(out).splitlines()) >= 2, 300,
                   "some rows", step=0.5)
        rd = os.path.join(runs, os.listdir(runs)[0])
        first = read(os.path.join(rd, "pbs", "job_ids")).split()[0]
        job_id = sqlite3.connect(db).execute("SELECT id FROM jobs").fetchone()[0]
        st = subprocess.run([FANOUT, "status", str(job_id), "--db", db], env=env,
                            capture_output=True, text=True, timeout=120)
        if f"pbs job {first} R" not in st.stdout:
            fail(f"pbs status: fanout status does not show the pool job:\n{st.stdout}{st.stderr}")
        sj = subprocess.run([FANOUT, "status", str(job_id), "--db", db, "--json"], env=env,
                            capture_output=True, text=True, timeout=120)
        want = {"scheduler": "pbs", "jobs": [{"id": first, "state": "R"}]}
        if json.loads(sj.stdout).get("pool_jobs") != want:
            fail(f"pbs status: fanout status --json does not list the pool job:\n{sj.stdout}")
        print(f"ok: pbs status: fanout status lists pbs job {first} R")
        p.kill()
        p.wait(timeout=60)
        ix = interchange_pid(rd)
        r = subprocess.run([FANOUT, "cancel", str(job_id), "--db", db, "--keys",
                            os.path.join(root, "keys")], env=env, capture_output=True, text=True,
                           timeout=300)
        if f"cancelled pbs job(s) {first}" not in r.stderr:
            fail(f"pbs cancel: fanout cancel did not say it qdel'ed {first}:\n{r.stderr}")
        wait_until(lambda: not leftover(state), 60, "the pool job's processes to end")
        print(f"ok: pbs cancel: fanout cancel qdel'ed pbs job {first}, no process left")
    finally:
        if p.poll() is None:
            p.kill()
        if ix:
            try:
                os.kill(ix, signal.SIGKILL)
            except ProcessLookupError:
                pass


def read(path):
    with open(path) as f:
        return f.read()


def main():
    support.require_fanout()
    with scratch("fanout-hpc-") as root:
        cases(root)
    print("PASS")


def cases(root):
    bindir = os.path.join(root, "bin")
    os.makedirs(bindir)
    for name in NAMES:
        support.write(os.path.join(bindir, name), STAND_IN, mode=0o755)

    rd, _ = run_case(root, "pbs", "  queue: workq\n  scheduler_options: |\n    #PBS -m n\n")
    script = read(os.path.join(rd, "pbs", "pools.pbs"))
    for piece in ("#PBS -l select=1", "#PBS -q workq", "#PBS -m n", "#PBS -l walltime=00:10:00"):
        if piece not in script:
            fail(f"pbs: the batch script lacks {piece!r}:\n{script}")
    node = read(os.path.join(rd, "pbs", "pool-node.sh"))
    if "start=$(date +%s)" not in node or '--walltime-end "$((start + 600))"' not in node:
        fail(f"pbs: the node script does not tell the pool its end:\n{node}")
    print("ok: pbs: batch script kept, with queue, walltime and scheduler_options")

    rd, _ = run_case(root, "lsf", "  scheduler_options: |\n    #BSUB -u nobody\n")
    script = read(os.path.join(rd, "lsf", "pools.lsf"))
    for piece in ("#BSUB -n 1", "#BSUB -W 0:10", "#BSUB -u nobody"):
        if piece not in script:
            fail(f"lsf: the batch script lacks {piece!r}:\n{script}")
    print("ok: lsf: batch script kept")

    rd, _ = run_case(root, "condor", "  nodes_per_block: 2\n")
    sub = read(os.path.join(rd, "condor", "pools.sub"))
    if "queue 2" not in sub:
        fail(f"condor: the submit description lacks `queue 2`:\n{sub}")
    logs = [f for _, _, fs in os.walk(os.path.join(rd, "logs", "sys", "node")) for f in fs
            if f.startswith("pool-condor")]
    if len(logs) != 2:
        fail(f"condor: expected two pool logs (queue 2), got {logs}")
    print("ok: condor: nodes_per_block 2 ran two pools in one cluster")

    status_cancel_case(root)


if __name__ == "__main__":
    sys.exit(main())
