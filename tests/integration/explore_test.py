"""`fanout explore` on a synthetic workload with a known answer.

run() costs a fixed 0.3 s per mini-batch plus 5 ms per item, so over 16 files the time per item
falls steeply with mini_batch_size (1: 0.305 s/item, 8: ~0.04 s/item), while log_level changes
nothing measurable. explore must rank mini_batch_size first, pick mini_batch_size 8 and write it.
Then a budget of one second stops after the first run (a run is never cut) and --resume continues
the same experiment to its end. explore.html opens in headless Chromium with every chart holding
data (the check of report_html_test.py). Real binaries, real store, real workers.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import fail, fanout, job_yaml, make_files, require_fanout, scratch, sql, sql_int, write  # noqa: E402
import report_html_test  # noqa: E402

SCRIPT = """import time
def run(mini_batch):
    time.sleep(0.3 + 0.005 * len(mini_batch))
    return mini_batch
"""

FACTORS = ["--factors", "log_level", "--factor", "mini_batch_size=1,8",
           "--factor", "log_level=INFO,WARNING", "--repeats", "2", "--sample", "100%"]


def make_job(root):
    make_files(os.path.join(root, "data"), ["f%02d" % i for i in range(16)])
    write(os.path.join(root, "src", "score.py"), SCRIPT)
    return write(os.path.join(root, "job.yaml"),
                 job_yaml("explore-synthetic", mini_batch_size="1", concurrency=1))


def experiment_id(out):
    m = re.search(r"experiment (exp-[0-9-]+)", out)
    if not m:
        fail("no experiment id in:\n" + out)
    return m.group(1)


def check_answer(out, best_file, label):
    ranked = re.findall(r"^  (\w+) +spread", out, re.M)
    if not ranked or ranked[0] != "mini_batch_size":
        fail("%s: mini_batch_size is not ranked first: %s\n%s" % (label, ranked, out))
    with open(best_file) as f:
        best = f.read()
    if 'mini_batch_size: "8"' not in best:
        fail("%s: the written settings do not choose mini_batch_size 8:\n%s\n%s" % (label, best, out))


def main():
    require_fanout()
    with scratch("explore") as root:
        job = make_job(root)
        db = os.path.join(root, "f.db")
        best = os.path.join(root, "best.yaml")
        p = fanout("explore", job, "--db", db, "--budget", "10m", "--write", best, *FACTORS,
                   timeout=400)
        exp = experiment_id(p.stdout)
        check_answer(p.stdout, best, "full run")
        runs = sql_int(db, "SELECT count(*) FROM experiment_runs WHERE experiment = '%s'" % exp)
        tagged = sql_int(db, "SELECT count(DISTINCT job_id) FROM experiment_runs "
                         "WHERE experiment = '%s' AND job_id IN (SELECT id FROM jobs)" % exp)
        if runs < 4 or tagged != runs:
            fail("experiment %s: %d runs, %d of them jobs in the store" % (exp, runs, tagged))
        # The user's output is never written: the runs write under the scratch folder.
        if os.path.exists(os.path.join(root, "out.txt")):
            fail("explore wrote the job's own output file")
        # Each invocation gets its own private scratch folder: explore/<EXP>-XXXXXX, mode 0700.
        m = re.search(r"^page written to (.*)$", p.stdout, re.M)
        page = m.group(1) if m else ""
        folder = os.path.dirname(page)
        if not re.fullmatch(re.escape(os.path.join(root, "explore", exp)) + r"-\w{6}", folder) \
                or os.stat(folder).st_mode & 0o777 != 0o700:
            fail("explore.html is not in a private folder explore/%s-XXXXXX: %s" % (exp, page))
        chromium = report_html_test.find_chromium()
        if chromium:
            report_html_test.check_page(chromium, page, 4, "explore.html")
        else:
            print("note: chromium is not installed; explore.html not opened")

        # A budget of one second: one run, then it stops and reports what it has.
        p = fanout("explore", job, "--db", db, "--budget", "1s", *FACTORS, timeout=200)
        exp2 = experiment_id(p.stdout)
        if "stopped at the budget" not in p.stdout:
            fail("budget 1s: no stop reported:\n" + p.stdout)
        n = sql_int(db, "SELECT count(*) FROM experiment_runs WHERE experiment = '%s'" % exp2)
        if n != 1:
            fail("budget 1s: %d runs, expected 1" % n)
        # --resume continues it to its end, keeping the first run.
        first = sql(db, "SELECT job_id FROM experiment_runs WHERE experiment = '%s' AND seq = 0"
                    % exp2)
        p = fanout("explore", "--resume", exp2, "--db", db, "--budget", "10m", "--write", best,
                   *FACTORS[-4:], timeout=400)
        check_answer(p.stdout, best, "resumed")
        n = sql_int(db, "SELECT count(*) FROM experiment_runs WHERE experiment = '%s'" % exp2)
        again = sql(db, "SELECT job_id FROM experiment_runs WHERE experiment = '%s' AND seq = 0"
                    % exp2)
        if n < 4 or again != first:
            fail("--resume: %d runs (first %s, was %s)" % (n, again, first))
        if sql(db, "SELECT state FROM experiments WHERE id = '%s'" % exp2) != [("done",)]:
            fail("--resume: the experiment is not done")
        print("ok: explore ranked mini_batch_size first, chose 8, stopped at the budget, resumed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
