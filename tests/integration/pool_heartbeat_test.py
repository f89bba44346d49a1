#!/usr/bin/env python3
"""A pool's heartbeat reaches the store (pools.last_seen, docs/store.md) and `fanout status`.

A standalone fanout-interchange and one real pool run a small real job; the pool then stays
connected and idle. Its pools.last_seen must move past the end of its last attempt (the
interchange writes the connected pools' heartbeats every few seconds), and `fanout status` shows
the heartbeat's age, in text and JSON.

Environment: FANOUT_BIN, FANOUT_INTERCHANGE_BIN, FANOUT_POOL_BIN (set by tests/meson.build).
"""
import json
import os
import subprocess

import support
from support import FANOUT, PYTHON, fail, fanout, scratch, sql, wait_until

ENTRY = '''
def run(mini_batch):
    return mini_batch
'''


def main():
    support.require_fanout()
    with scratch("pool-heartbeat") as root:
        ixdir = os.path.join(root, "ix")
        db = os.path.join(ixdir, "store.db")
        cep, pep = "ipc://%s/client" % ixdir, "ipc://%s/pool" % ixdir
        support.make_files(os.path.join(root, "data"), ["f%d.txt" % i for i in range(3)])
        support.write(os.path.join(root, "src", "score.py"), ENTRY)
        job = support.write(os.path.join(root, "job.yaml"), support.job_yaml(
            "beat", output=None, mini_batch_size=1, concurrency=1, retries=0, timeout=60))
        with support.Cluster(ixdir, db, ["--client-endpoint", cep, "--pool-endpoint", pep,
                                         "--write-root", root]) as cl:
            cl.start_pool(workers=1, extra=["--heartbeat-period-ms", "500"])
            run = subprocess.run([FANOUT, "run", job, "--interchange", cep, "--python", PYTHON,
                                  "--quiet"], capture_output=True, text=True, timeout=240)
            if run.returncode != 0:
                fail("fanout run: exit %d\n%s" % (run.returncode, run.stderr))
            job_id, pool_id, last_end = sql(
                db, "SELECT job_id, pool_id, max(start + elapsed_s) FROM attempts "
                    "WHERE pool_id != 0")[0]
            # Idle and connected: its heartbeats go on, and the store follows them.
            seen = wait_until(lambda: (lambda v: v if v is not None and v > last_end + 3 else None)(
                sql(db, "SELECT last_seen FROM pools WHERE id = %d AND state = 'connected'"
                    % pool_id)[0][0]), 60,
                "pools.last_seen of the idle pool to pass its last attempt's end (%.3f) by 3 s"
                % last_end)
            status = fanout("status", str(job_id), "--db", db, "--json")
            pools = json.loads(status.stdout)["pools"]
            if len(pools) != 1 or pools[0]["heartbeat_age_s"] is None or \
                    not 0 <= pools[0]["heartbeat_age_s"] < 60:
                fail("fanout status --json: pools %s, expected one with a heartbeat age" % pools)
            text = fanout("status", str(job_id), "--db", db).stdout
            if "connected, 1 workers, 3 attempts, last heartbeat " not in text:
                fail("fanout status: no heartbeat age in\n%s" % text)
            print("ok: pool %d idle, last_seen %.1f s after its last attempt's end; status shows "
                  "a heartbeat %.1f s old" % (pool_id, seen - last_end, pools[0]["heartbeat_age_s"]))


if __name__ == "__main__":
    main()
