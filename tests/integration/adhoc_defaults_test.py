#!/usr/bin/env python3
"""`fanout run -c` defaults a GNU parallel user relies on, end to end (real fanout, interchange,
pools and workers): no run timeout unless --timeout N (what jobs.settings records and the
generated job file says: 0, none), stdin as the input when no other source is given,
--halt success=N ending as a success that says so (never "cancelled"), and `fanout resume` of an
ad-hoc job printing the remaining rows on stdout as the first run did. Environment: FANOUT_BIN
(set by tests/meson.build)."""

import glob
import json
import os

from support import fail, fanout, scratch, sql, sql_int
import support


def settings_of(db, job):
    return json.loads(sql(db, "SELECT settings FROM jobs WHERE id = %d" % job)[0][0])


def no_timeout(tmp, db):
    # A short command: what matters is what the job ran with, which the store records.
    fanout("run", "--db", db, "-c", "echo {}", ":::", "1", cwd=tmp)
    job = sql_int(db, "SELECT max(id) FROM jobs")
    if settings_of(db, job)["timeout_s"] != 0:
        fail("without --timeout, jobs.settings holds %r (expected 0: none)" %
             settings_of(db, job))
    newest = max(glob.glob(os.path.join(os.path.dirname(db), "adhoc", "*.yaml")),
                 key=os.path.getmtime)
    if "timeout: 0" not in open(newest).read():
        fail("the generated job file leaves the timeout out: %s" % newest)
    fanout("run", "--db", db, "--timeout", "0", "-c", "echo {}", ":::", "1", cwd=tmp)
    job = sql_int(db, "SELECT max(id) FROM jobs")
    if settings_of(db, job)["timeout_s"] != 0:
        fail("--timeout 0 recorded as %r" % settings_of(db, job)["timeout_s"])
    fanout("run", "--db", db, "--timeout", "7", "-c", "echo {}", ":::", "1", cwd=tmp)
    job = sql_int(db, "SELECT max(id) FROM jobs")
    if settings_of(db, job)["timeout_s"] != 7:
        fail("--timeout 7 recorded as %r" % settings_of(db, job)["timeout_s"])
    print("ok: no run timeout unless --timeout N; jobs.settings records 0 (none) and N")


def stdin_by_default(tmp, db):
    r = fanout("run", "--db", db, "-c", "echo {}", stdin="1\n2\n3\n", cwd=tmp)
    if sorted(r.stdout.split()) != ["1", "2", "3"]:
        fail("seq 3 | fanout run -c 'echo {}': %r" % r.stdout)
    print("ok: stdin is the input when no other source is given")


def halt_success(tmp, db):
    items = [str(i) for i in range(1, 21)]
    r = fanout("run", "--db", db, "-j", "1", "--halt", "now,success=1", "-c",
               "sleep 0.2; echo {}", ":::", *items, cwd=tmp, check=False)
    if r.returncode != 0 or "--halt success=1" not in r.stderr or "success" not in r.stderr:
        fail("--halt now,success=1: exit %d: %s" % (r.returncode, r.stderr))
    for word in ("cancel", "resume", "Ctrl-C"):
        if word in r.stderr:
            fail("--halt now,success=1 says %r: %s" % (word, r.stderr))
    print("ok: --halt success=1 ends as a success and says so: %s" % r.stderr.strip())


def resume_prints_rows(tmp, db):
    ok = os.path.join(tmp, "ok")
    cmd = "if [ {} = 2 ] && [ ! -e %s ]; then exit 3; fi; echo row{}" % ok
    r = fanout("run", "--db", db, "-c", cmd, ":::", "1", "2", "3", cwd=tmp, check=False)
    if r.returncode == 0 or sorted(r.stdout.split()) != ["row1", "row3"]:
        fail("first run: exit %d, %r" % (r.returncode, r.stdout))
    job = sql_int(db, "SELECT max(id) FROM jobs")
    open(ok, "w").close()
    r = fanout("resume", str(job), "--failed", "--db", db, "--quiet", cwd=tmp)
    if r.stdout.split() != ["row2"]:
        fail("resume of an ad-hoc job printed %r on stdout (expected the remaining row2): %s" %
             (r.stdout, r.stderr))
    print("ok: resume of an ad-hoc job prints the remaining rows on stdout")


def main():
    support.require_fanout()
    with scratch("adhoc-defaults") as tmp:
        db = os.path.join(tmp, "store", "fanout.db")
        no_timeout(tmp, db)
        stdin_by_default(tmp, db)
        halt_success(tmp, db)
        resume_prints_rows(tmp, db)
    print("PASS: ad-hoc defaults: no timeout, stdin, --halt success, resume to stdout")


if __name__ == "__main__":
    main()
