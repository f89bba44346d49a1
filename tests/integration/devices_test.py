#!/usr/bin/env python3
"""Worker placement on a node (docs/resources.md), with real fanout, interchange, pools and
Python workers. The entry script returns, per item, the CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS and
Cpus_allowed_list its worker process got; run() waits until every worker has taken a mini-batch,
so each worker provably runs one however the busy box schedules them.

- `fanout-pool --accelerators 0,1,2,3` with 4 workers: 4 distinct devices; a worker SIGKILLed
  mid-job is replaced in its slot with the same device; the store (attempts.device) and
  process_summary.csv name the devices; with the monitor on and no NVML here, the pool says once
  that it has no accelerator samples, and the job is unaffected;
- the job-file form (`fanout.accelerators: "0,1"`, `workers_per_accelerator: 2`, no worker
  count): 4 workers, two per device;
- `fanout.cpu_affinity: block` / a list with 2 workers: each worker's Cpus_allowed_list and
  OMP_NUM_THREADS are what was asked, recorded in attempts.cpus and attempts.threads; a job's own
  OMP_NUM_THREADS is kept.
Environment: FANOUT_BIN, FANOUT_POOL_BIN, FANOUT_INTERCHANGE_BIN (set by tests/meson.build)."""

import csv
import json
import os
import sys

from support import PYTHON, fail, fanout, scratch, sql, write
import support

# Rows: "<item> <device> <process> <pid> <OMP_NUM_THREADS> <Cpus_allowed_list>".
ENTRY = r'''
import os, signal, time

MARKS = os.environ["MARK_DIR"]
WORKERS = int(os.environ["MARK_WORKERS"])


def cpus():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                return line.split()[1]
    return "?"


def wait_for(pred):
    deadline = time.time() + 120
    while not pred() and time.time() < deadline:
        time.sleep(0.05)


def processes():
    return {n.split(".")[0] for n in os.listdir(MARKS) if n.startswith("process")}


def run(mini_batch):
    me, pid = os.environ["FANOUT_PROCESS"], os.getpid()
    dev = os.environ.get("CUDA_VISIBLE_DEVICES", "-")
    with open(os.path.join(MARKS, "%s.%d" % (me, pid)), "w") as f:
        f.write(dev)
    wait_for(lambda: len(processes()) >= WORKERS)
    crashed = os.path.join(MARKS, "crashed")
    if any(os.path.basename(p).startswith("crash") for p in mini_batch) and \
            not os.path.exists(crashed):
        with open(crashed, "w") as f:
            f.write("%s %d" % (me, pid))
        os.kill(pid, signal.SIGKILL)
    if os.path.exists(crashed):
        # Every worker waits until the killed one's replacement took a mini-batch too.
        name, dead = open(crashed).read().split()
        wait_for(lambda: any(n.startswith(name + ".") and n != "%s.%s" % (name, dead)
                             for n in os.listdir(MARKS)))
    time.sleep(0.1)
    return ["%s %s %s %d %s %s" % (os.path.basename(p), dev, me, pid,
                                   os.environ.get("OMP_NUM_THREADS", "-"), cpus())
            for p in mini_batch]
'''


def make_job(root, name, items, workers, top="", env=None):
    """A job over `items` files, one per mini-batch, with the entry script above."""
    marks = os.path.join(root, "marks-" + name)
    os.makedirs(marks)
    support.make_files(os.path.join(root, "data-" + name), items)
    write(os.path.join(root, "src", "score.py"), ENTRY)
    e = {"MARK_DIR": marks, "MARK_WORKERS": str(workers)}
    e.update(env or {})
    job = os.path.join(root, name + ".yaml")
    write(job, support.job_yaml(name, data="./data-" + name, output="./%s.txt" % name,
                                retries=2, timeout=300, env=e, top=top))
    return job, os.path.join(root, name + ".txt")


def parse_rows(path):
    rows = [line.split() for line in support.read_rows(path)]
    for r in rows:
        if len(r) != 6:
            fail("a row of %s is not <item> <device> <process> <pid> <threads> <cpus>: %r" %
                 (path, r))
    return rows


def devices_by_process(rows):
    out = {}
    for item, dev, proc, _pid, _threads, _cpus in rows:
        out.setdefault(proc, set()).add(dev)
    return out


def process_summary(db, job_id=1):
    logs = sql(db, "select log_dir from jobs where id = %d" % job_id)[0][0]
    with open(os.path.join(logs, "sys", "job_report", "process_summary.csv")) as f:
        return list(csv.DictReader(f))


def pool_flag_accelerators(root):
    """--accelerators on fanout-pool, 4 workers; one worker SIGKILLed mid-job."""
    items = ["f%02d.txt" % i for i in range(4)] + ["crash.txt"] + \
        ["g%02d.txt" % i for i in range(11)]
    job, out = make_job(root, "flag", items, 4)
    ixdir = os.path.join(root, "ix")
    db = os.path.join(ixdir, "store.db")
    cep, pep = "ipc://%s/client" % ixdir, "ipc://%s/pool" % ixdir
    with support.Cluster(ixdir, db, ["--client-endpoint", cep, "--pool-endpoint", pep,
                                     "--write-root", root]) as cl:
        cl.start_pool(workers=4, name="gpus",
                      extra=["--accelerators", "0,1,2,3", "--resource-monitor-interval", "0.2"])
        fanout("run", job, "--interchange", cep, "--python", PYTHON, cwd=root, timeout=600)
        pool_log = open(os.path.join(ixdir, "gpus.log")).read()
    rows = parse_rows(out)
    support.check_rows_once([r[0] for r in rows], items, "the --accelerators job")
    by_proc = devices_by_process(rows)
    if len(by_proc) != 4 or any(len(d) != 1 for d in by_proc.values()):
        fail("expected 4 workers with one device each, got %s" % by_proc)
    if sorted(d for ds in by_proc.values() for d in ds) != ["0", "1", "2", "3"]:
        fail("expected devices 0..3, one per worker, got %s" % by_proc)
    # The killed worker: its slot's attempts, before and after, name one device.
    lost = sql(db, "select process, device from attempts where status = 'WORKER_LOST'")
    if len(lost) != 1:
        fail("expected one WORKER_LOST attempt, got %s" % lost)
    proc, dev = lost[0]
    pids = sql(db, "select count(distinct worker_pid), group_concat(distinct device) "
                   "from attempts where process = '%s'" % proc)[0]
    if pids[0] < 2 or pids[1] != dev:
        fail("%s: expected a replacement worker on device %s, got %s" % (proc, dev, pids))
    if sql(db, "select count(*) from attempts where device is null or device = ''")[0][0]:
        fail("attempts without a device: %s" % sql(db, "select * from attempts"))
    ps = {r["Process"].split("/")[-1]: r["Device"] for r in process_summary(db)}
    want = {p: next(iter(d)) for p, d in by_proc.items()}
    if ps != want:
        fail("process_summary.csv devices %s, rows say %s" % (ps, want))
    # No NVML here: said once, and the job ran all the same.
    said = pool_log.count("no accelerator samples on this node")
    nvml_here = sql(db, "select count(*) from gpu_samples")[0][0] > 0
    if not nvml_here and said != 1:
        fail("the pool said %d times that it has no accelerator samples:\n%s" % (said, pool_log))
    if "accelerators from --accelerators" not in pool_log:
        fail("the pool did not log its accelerators:\n%s" % pool_log)
    print("ok: 4 workers on devices 0..3; %s kept device %s across SIGKILL; store and "
          "process_summary.csv name them; no-NVML note said %d time(s)" % (proc, dev, said))


def job_file_accelerators(root):
    """fanout.accelerators with workers_per_accelerator 2 and no worker count: 4 workers."""
    items = ["f%02d.txt" % i for i in range(8)]
    top = "fanout:\n  accelerators: \"0,1\"\n  workers_per_accelerator: 2\n"
    job, out = make_job(root, "file", items, 4, top=top)
    db = os.path.join(root, "store", "fanout.db")
    fanout("run", job, "--db", db, "--python", PYTHON, "-q", cwd=root, timeout=600)
    rows = parse_rows(out)
    support.check_rows_once([r[0] for r in rows], items, "the fanout.accelerators job")
    by_proc = devices_by_process(rows)
    per_dev = {}
    for p, ds in by_proc.items():
        if len(ds) != 1:
            fail("%s used several devices: %s" % (p, ds))
        per_dev.setdefault(next(iter(ds)), set()).add(p)
    if sorted(per_dev) != ["0", "1"] or any(len(p) != 2 for p in per_dev.values()):
        fail("expected 4 workers, two per device 0 and 1, got %s" % per_dev)
    stored = sql(db, "select device, count(distinct process) from attempts group by device "
                     "order by device")
    if stored != [("0", 2), ("1", 2)]:
        fail("attempts.device: %s" % stored)
    # fanout status and history --json name them.
    st = fanout("status", "1", "--db", db).stdout
    if "devices 0,1" not in st:
        fail("fanout status does not name the devices:\n%s" % st)
    hist = json.loads(fanout("history", "--db", db, "--json").stdout)
    if hist[0].get("devices") != ["0", "1"]:
        fail("fanout history --json: %s" % hist)
    html = open(os.path.join(sql(db, "select log_dir from jobs")[0][0], "report.html")).read()
    if "(device 0)" not in html or "(device 1)" not in html:
        fail("report.html's timeline rows do not name the devices")
    print("ok: fanout.accelerators \"0,1\" x workers_per_accelerator 2: %s" %
          {d: sorted(p) for d, p in per_dev.items()})


def cpu_affinity(root):
    """cpu_affinity block and list with 2 workers: CPUs and threads as asked, and recorded."""
    have = sorted(os.sched_getaffinity(0))
    if len(have) < 2:
        print("SKIP part: this process may run on %s only; cpu_affinity needs 2 CPUs" % have)
        return
    a, b = have[0], have[1]
    cases = [("block", "block", {str(a), str(b)}, None, "1"),
             ("list", "list:%d:%d" % (b, a), {str(a), str(b)}, None, "1"),
             ("own", "block", {str(a), str(b)}, {"OMP_NUM_THREADS": "3"}, "3")]
    for name, affinity, want_cpus, env, threads in cases:
        items = ["f%02d.txt" % i for i in range(4)]
        top = "fanout:\n  workers: 2\n  cpu_affinity: \"%s\"\n" % affinity
        if affinity == "block" and len(have) > 2:
            top += "  cores_per_worker: 1\n"
        job, out = make_job(root, "cpu-" + name, items, 2, top=top, env=env)
        db = os.path.join(root, "store-" + name, "fanout.db")
        fanout("run", job, "--db", db, "--python", PYTHON, "-q", cwd=root, timeout=600)
        rows = parse_rows(out)
        by_proc = {}
        for _item, _dev, proc, _pid, t, cpus in rows:
            by_proc.setdefault(proc, set()).add((t, cpus))
        got_cpus = {c for ts in by_proc.values() for _t, c in ts}
        if len(by_proc) != 2 or got_cpus != want_cpus or \
                any(len(ts) != 1 for ts in by_proc.values()):
            fail("cpu_affinity %s: expected the 2 workers on CPUs %s, got %s" %
                 (affinity, sorted(want_cpus), by_proc))
        if {t for ts in by_proc.values() for t, _c in ts} != {threads}:
            fail("cpu_affinity %s: expected OMP_NUM_THREADS=%s, got %s" %
                 (affinity, threads, by_proc))
        if affinity.startswith("list"):
            if by_proc.get("process001") != {(threads, str(b))}:
                fail("list:%d:%d: process001 should be on CPU %d: %s" % (b, a, b, by_proc))
        stored = sql(db, "select distinct process, cpus, threads from attempts order by 1")
        want = sorted((p, c, int(t)) for p, ts in by_proc.items() for t, c in ts)
        if stored != want:
            fail("cpu_affinity %s: attempts record %s, the workers saw %s" %
                 (affinity, stored, want))
        print("ok: cpu_affinity %s: %s" % (affinity, stored))


CASES = [pool_flag_accelerators, job_file_accelerators, cpu_affinity]


def main():
    support.require_fanout()
    wanted = sys.argv[1:]
    for case in CASES:
        if wanted and case.__name__ not in wanted:
            continue
        print("== %s" % case.__name__, flush=True)
        with scratch("devices") as root:
            case(root)


if __name__ == "__main__":
    main()
