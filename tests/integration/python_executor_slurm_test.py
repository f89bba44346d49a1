#!/usr/bin/env python3
"""fanout.Executor(launcher="slurm", nodes=...) against a real Slurm (tools/slurm_bed.sh: munged,
slurmctld and two slurmd "nodes" on this host, in a scratch folder, always brought down): the
Executor's job runs its pools as an sbatch job over Curve TCP; map and submit results come back
exactly once, the store records each mini-batch once, and squeue is empty afterwards. Run under
`fanout python` so the package is the tree's. Exit 77 (meson: skipped) with the reason when not
root or when slurm-wlm and munge cannot be installed. Environment: tests/meson.build."""

import faulthandler
import os
import sqlite3
import subprocess
import sys
import time

import support
from support import SKIP, TOOLS, fail, scratch

import fanout

BED = os.path.join(TOOLS, "slurm_bed.sh")


def cube(x):
    return x * x * x


def squeue_empty(env):
    deadline = time.time() + 60
    out = ""
    while time.time() < deadline:
        r = subprocess.run(["squeue", "-h", "-o", "%i %T"], env=env, capture_output=True,
                           text=True, timeout=60)
        out = r.stdout.strip()
        if r.returncode == 0 and not out:
            return
        time.sleep(0.5)
    fail("squeue still lists jobs after the Executor shut down: %s" % out)


def run_on_slurm(root, env):
    keys = os.path.join(root, "keys")
    db = os.path.join(root, "fanout.db")
    with fanout.Executor(max_workers=2, launcher="slurm", nodes=1, db=db, keys=keys,
                         name="pyexec-slurm", work_dir=root, interchange_address="127.0.0.1",
                         run_dir=os.path.join(root, "runs")) as ex:
        got = list(ex.map(cube, range(60), chunksize=4))
        futs = [ex.submit(cube, i) for i in range(10)]
        sub = [f.result(timeout=300) for f in futs]
    if got != [x ** 3 for x in range(60)] or sub != [x ** 3 for x in range(10)]:
        fail("on Slurm: map gave %s..., submit %s..." % (got[:5], sub[:5]))
    chunks = 60 // 4 + 10
    if ex.rows_read != chunks or ex.rows_unexpected:
        fail("on Slurm: %d result rows read, %d unexpected, for %d mini-batches" %
             (ex.rows_read, ex.rows_unexpected, chunks))
    rows = support.sql_int(db, "SELECT count(*) FROM minibatches WHERE job_id = %d AND state = "
                           "'succeeded'" % ex.job_id)
    if rows != chunks:
        fail("on Slurm: the store holds %d succeeded mini-batches, expected %d" % (rows, chunks))
    con = sqlite3.connect(db)
    try:
        settings = con.execute("SELECT settings FROM jobs WHERE id = ?", (ex.job_id,)).fetchone()[0]
    finally:
        con.close()
    if '"launcher":"slurm"' not in settings:
        fail("on Slurm: the job's settings do not record the launcher: %s" % settings)
    print("ok: Executor on Slurm: %d calls, each result once; state %s" % (70, ex.state))


def main():
    support.require_fanout()
    chk = subprocess.run(["bash", BED, "check"], capture_output=True, text=True)
    if chk.returncode == SKIP:
        print("SKIP: " + (chk.stdout + chk.stderr).strip())
        return SKIP
    faulthandler.dump_traceback_later(540, exit=True)  # where it hung, before meson's timeout
    with scratch("pyexec-slurm") as root:
        bed = os.path.join(root, "bed")
        env = dict(os.environ)
        env["SLURM_CONF"] = os.path.join(bed, "slurm.conf")
        os.environ["SLURM_CONF"] = env["SLURM_CONF"]
        os.chdir(root)
        try:
            up = subprocess.run(["bash", BED, "up", bed, "--nodes", "2"], capture_output=True,
                                text=True, timeout=300)
            if up.returncode != 0:
                fail("slurm_bed.sh up: " + up.stdout + up.stderr)
            run_on_slurm(root, env)
            squeue_empty(env)
        finally:
            subprocess.run(["bash", BED, "down", bed], timeout=120)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
