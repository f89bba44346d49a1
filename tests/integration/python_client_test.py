#!/usr/bin/env python3
"""fanout.Client and fanout.Job (python/fanout/client.py) end to end, run under `fanout python`:
jobs that succeed, end partial, fail, are cancelled and are resumed; rows streamed, status,
history, attempts, reports; CLI errors as FanoutError with the CLI's message and exit status.
Real fanout, interchange, pools and workers. Environment: tests/meson.build."""

import os

from support import fail, scratch
import support

import fanout

# Fails the items named bad* unless the file ok-now exists beside the job (then they pass).
SCRIPT = """import os, time
def run(mini_batch):
    out = []
    for p in mini_batch:
        name = os.path.basename(p)
        if name.startswith("slow"):
            time.sleep(2)
        if name.startswith("bad") and not os.path.exists(os.path.join(%r, "ok-now")):
            raise RuntimeError("bad item " + name)
        out.append("row " + name)
    return out
"""


def job(tmp, name, files, **kw):
    folder = os.path.join(tmp, name)
    support.make_files(os.path.join(folder, "data"), files)
    support.write(os.path.join(folder, "src", "score.py"), SCRIPT % folder)
    task = "  type: run_function\n  code: ./src\n  entry_script: score.py\n"
    path = os.path.join(folder, "job.yml")
    support.write(path, support.job_yaml(name, task=task, **kw))
    return path, folder


def expect(what, got, want):
    if got != want:
        fail("%s: got %r, expected %r" % (what, got, want))


def main():
    support.require_fanout()
    with scratch("pyclient") as tmp:
        db = os.path.join(tmp, "store", "fanout.db")
        c = fanout.Client(db=db)

        # Succeeded: rows, status, history, attempts, reports.
        path, _ = job(tmp, "ok", ["a", "b", "c", "d"])
        j = c.run(path, workers=2, progress=False)
        expect("succeeded job state", j.state, "succeeded")
        expect("succeeded exit_status", (j.exit_status, j.returncode), (0, 0))
        expect("job(id) exit_status (from its state)", c.job(j.id).exit_status, 0)
        expect("its rows", sorted(j.rows()), ["row a", "row b", "row c", "row d"])
        st = j.status()
        expect("status total", (st["total"], st["succeeded"]), (4, 4))
        expect("history", [h["id"] for h in c.history(limit=1)], [j.id])
        expect("job(id)", c.job(j.id).state, "succeeded")
        expect("attempts", len(j.attempts()), 4)
        if not os.path.isdir(j.report()):
            fail("report() returned no folder")
        if not os.path.isfile(j.report(html=True)):
            fail("report(html=True) wrote no report.html")

        # Partial: a failed item within the thresholds.
        path, _ = job(tmp, "part", ["a", "bad1", "c"])
        j = c.run(path, allow_partial=True, progress=False)
        expect("partial job state", j.state, "partial")
        expect("partial exit_status with allow_partial", j.exit_status, 0)
        expect("job(id) of a partial job: exit_status", c.job(j.id).exit_status, 4)
        expect("partial rows", sorted(j.rows()), ["row a", "row c"])

        # Failed: past mini_batch_error_threshold; then resumed with failed=True once fixed.
        path, folder = job(tmp, "fail", ["a", "bad1", "bad2", "d"],
                           top="mini_batch_error_threshold: 0\n")
        j = c.run(path, progress=False)
        expect("failed job state", j.state, "failed")
        expect("failed exit_status", j.exit_status, 1)
        if not any("bad item" in e["message"] for e in j.status()["last_errors"]):
            fail("the failed job's status names no error: %s" % j.status()["last_errors"])
        support.write(os.path.join(folder, "ok-now"), "")
        expect("resumed job state", j.resume(failed=True), "succeeded")
        expect("resumed exit_status", j.exit_status, 0)

        # Cancelled: a running job stopped.
        path, _ = job(tmp, "slow", ["slow%02d" % i for i in range(30)])
        j = c.submit(path, workers=1)
        support.wait_until(lambda: j.status()["succeeded"] >= 1, 120, "a slow mini-batch")
        expect("cancelled job state", j.cancel(), "cancelled")
        expect("its state after", j.wait(progress=False), "cancelled")
        expect("cancelled exit_status", j.exit_status, 1)

        # Errors carry the CLI's message and exit status.
        try:
            c.run(os.path.join(tmp, "missing.yml"))
            fail("running a missing job file raised nothing")
        except fanout.FanoutError as e:
            if e.exit_status != 2 or "missing.yml" not in e.message:
                fail("a missing job file: %r (exit %s)" % (e.message, e.exit_status))
        try:
            c.job(987654)
            fail("job(987654) raised nothing")
        except fanout.FanoutError as e:
            if e.exit_status == 0 or "987654" not in e.message:
                fail("an unknown job: %r (exit %s)" % (e.message, e.exit_status))

        # A dict shaped like the YAML is a job too.
        d = os.path.join(tmp, "ok")
        j = c.run({"type": "parallel", "name": "from-dict",
                   "inputs": {"files": {"type": "uri_folder", "path": d + "/data"}},
                   "outputs": {"out": {"type": "uri_file", "path": d + "/dict-out.txt"}},
                   "input_data": "${{inputs.files}}", "mini_batch_size": "2",
                   "task": {"type": "run_function", "code": d + "/src",
                            "entry_script": "score.py", "append_row_to": "${{outputs.out}}"}},
                  progress=False)
        expect("dict job", (j.state, len(list(j.rows()))), ("succeeded", 4))

        # A dict job's relative paths are meant from the working folder, and its job file is
        # gone once its run ended: after run(), after submit() and wait(), after a refusal.
        os.chdir(d)
        rel = {"type": "parallel", "name": "rel-dict",
               "inputs": {"files": {"type": "uri_folder", "path": "./data"}},
               "outputs": {"out": {"type": "uri_file", "path": "rel-out.txt"}},
               "input_data": "${{inputs.files}}", "mini_batch_size": "2",
               "task": {"type": "run_function", "code": "./src", "entry_script": "score.py",
                        "append_row_to": "${{outputs.out}}"}}
        j = c.run(rel, progress=False)
        expect("relative dict job", (j.state, j.exit_status), ("succeeded", 0))
        expect("its rows", sorted(j.rows()), ["row a", "row b", "row c", "row d"])
        left = lambda: sorted(f for f in os.listdir(d) if f.startswith(".fanout-job-"))
        expect("job files left after run()", left(), [])
        j = c.submit(dict(rel, name="rel-dict-2"), overwrite=True)
        j.wait(progress=False)
        support.wait_until(lambda: not left(), 30, "the submitted job's file removed")
        try:
            c.submit(dict(rel, mini_batch_size="two"))
            fail("a bad dict job raised nothing")
        except fanout.FanoutError as e:
            expect("a bad dict job's exit status", e.exit_status, 2)
        expect("job files left after a refusal", left(), [])
    print("ok")


if __name__ == "__main__":
    main()
