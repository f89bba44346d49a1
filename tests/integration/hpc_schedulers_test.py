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

After each case no process of any pool job is left. Environment: FANOUT_BIN.
"""
import os
import subprocess
import sys
import time

from support import FANOUT, check_rows_once, fail, scratch
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


if __name__ == "__main__":
    sys.exit(main())
