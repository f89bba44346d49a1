"""`fanout explore` end to end: real binaries, real store, real Python workers.

1. The shipped file-scoring example (40 files, 5 per mini-batch, 2 workers): its default 10%
   sample (4 files, one mini-batch per run) is grown to the 40 files (4 mini-batches per worker);
   the workers are busy about 0.1% of each run's wall time, so no change is called real and
   nothing is written. The same job over 4 files is too small for any setting to be told apart:
   explore says so, runs nothing, records no experiment and writes nothing, even with --write.
2. The fixed-cost job: run() costs 20 ms per mini-batch plus 0.2 ms per item, 2,000
   files, mini_batch_size "1", 2 workers. A budget of one second stops after the first run (a run
   is never cut) and writes nothing; --resume continues the same experiment: the levels of
   mini_batch_size walk past 4 to 16 (64 would leave fewer than 4 mini-batches per worker in the
   10% sample, and explore says so), the winner is confirmed against the job's own settings
   and only then written, with its measured gain in a comment. `fanout history` shows the
   experiment as one row, `--experiment` lists its runs. explore.html opens in headless Chromium
   with every chart holding data when Chromium is installed.
"""
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import fail, fanout, job_yaml, make_files, require_fanout, scratch, sql, sql_int, write  # noqa: E402
import report_html_test  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "docs", "examples", "file-scoring", "job.yaml")

FIXED_COST = """import time
def run(mini_batch):
    time.sleep(0.020 + 0.0002 * len(mini_batch))
    return mini_batch
"""


def experiment_id(out):
    m = re.search(r"experiment (exp-[0-9-]+)", out)
    if not m:
        fail("no experiment id in:\n" + out)
    return m.group(1)


def example_case(root):
    db = os.path.join(root, "example.db")
    best = os.path.join(root, "example-best.yaml")
    p = fanout("explore", EXAMPLE, "--db", db, "--budget", "5m", "--write", best, timeout=900)
    if "sample grown from 4 to 40 items" not in p.stdout or "nothing written" not in p.stdout:
        fail("file-scoring: the sample was not grown, or something was written:\n" + p.stdout)
    if os.path.exists(best):
        fail("file-scoring: explore wrote %s from runs that are start-up" % best)
    print("ok: file-scoring: sample grown, nothing written")


def too_small_case(root):
    folder = os.path.join(root, "small")
    shutil.copytree(os.path.dirname(EXAMPLE), folder, ignore=shutil.ignore_patterns("out"))
    for name in sorted(os.listdir(os.path.join(folder, "data")))[4:]:
        os.remove(os.path.join(folder, "data", name))
    db = os.path.join(root, "small.db")
    best = os.path.join(root, "small-best.yaml")
    p = fanout("explore", os.path.join(folder, "job.yaml"), "--db", db, "--budget", "3m",
               "--write", best, check=False, timeout=120)
    if p.returncode != 2 or "too small" not in p.stdout or "nothing written" not in p.stdout:
        fail("file-scoring: expected 'too small', nothing written and exit 2, got %d:\n%s\n%s"
             % (p.returncode, p.stdout, p.stderr))
    if os.path.exists(best):
        fail("file-scoring: explore wrote %s from an input too small to tell anything" % best)
    if os.path.exists(db) and sql_int(db, "SELECT count(*) FROM experiments") != 0:
        fail("file-scoring: an experiment was recorded although nothing could run")
    print("ok: file-scoring: %s" % p.stdout.strip().splitlines()[0])


def fixed_cost_case(root):
    make_files(os.path.join(root, "data"), ["f%04d" % i for i in range(2000)])
    write(os.path.join(root, "src", "score.py"), FIXED_COST)
    job = write(os.path.join(root, "job.yaml"),
                job_yaml("explore-fixed-cost", mini_batch_size="1", concurrency=2))
    db = os.path.join(root, "f.db")
    best = os.path.join(root, "best.yaml")
    args = ["--factors", "mini_batch_size", "--seed", "7"]
    # A budget of one second: one run, then it stops, reports what it has and writes nothing.
    p = fanout("explore", job, "--db", db, "--budget", "1s", "--write", best, *args, timeout=300)
    exp = experiment_id(p.stdout)
    if "stopped at the budget" not in p.stdout or "nothing written" not in p.stdout:
        fail("budget 1s: no stop reported, or something written:\n" + p.stdout)
    if os.path.exists(best):
        fail("budget 1s: a single run was written to " + best)
    if sql_int(db, "SELECT count(*) FROM experiment_runs WHERE experiment = '%s'" % exp) != 1:
        fail("budget 1s: expected one run")
    first = sql(db, "SELECT job_id FROM experiment_runs WHERE experiment = '%s' AND seq = 0" % exp)
    # --resume continues it to its end.
    p = fanout("explore", "--resume", exp, "--db", db, "--budget", "15m", "--write", best,
               *args, timeout=1200)
    out = p.stdout
    if not os.path.exists(best):
        fail("resumed: nothing written:\n" + out)
    with open(best) as f:
        yaml = f.read()
    m = re.search(r'^mini_batch_size: "(\d+)"$', yaml, re.M)
    if not m or int(m.group(1)) < 16:
        fail("resumed: mini_batch_size below 16 written:\n%s\n%s" % (yaml, out))
    if not re.search(r"^# mini_batch_size 1 -> %s: time per item -[0-9.]+%% \[" % m.group(1),
                     yaml, re.M):
        fail("resumed: the written setting lacks its gain and interval:\n" + yaml)
    if "confirmed" not in out or "larger --sample" not in out:
        fail("resumed: no confirmation or no note about the sample's limit:\n" + out)
    again = sql(db, "SELECT job_id FROM experiment_runs WHERE experiment = '%s' AND seq = 0" % exp)
    runs = sql_int(db, "SELECT count(*) FROM experiment_runs WHERE experiment = '%s'" % exp)
    if again != first or runs < 12:
        fail("--resume: %d runs (first %s, was %s)" % (runs, again, first))
    if sql(db, "SELECT state FROM experiments WHERE id = '%s'" % exp) != [("done",)]:
        fail("--resume: the experiment is not done")
    if os.path.exists(os.path.join(root, "out.txt")):
        fail("explore wrote the job's own output file")
    # One experiment, one row in history; its runs on demand.
    h = fanout("history", "--db", db).stdout
    rows = [line for line in h.splitlines()[1:] if line.startswith(("exp ", "exp\t")) or
            re.match(r"^\d+ ", line)]
    if len(rows) != 1 or exp not in rows[0] or "%d runs" % runs not in rows[0]:
        fail("history: expected the experiment as one row of %d runs:\n%s" % (runs, h))
    h = fanout("history", "--db", db, "--experiment", exp).stdout
    if len([line for line in h.splitlines() if re.match(r"^\d+ ", line)]) != runs:
        fail("history --experiment: expected %d runs:\n%s" % (runs, h))
    # Each invocation has its own private scratch folder: explore/<EXP>-XXXXXX, mode 0700.
    m_page = re.search(r"^page written to (.*)$", out, re.M)
    page = m_page.group(1) if m_page else ""
    folder = os.path.dirname(page)
    if not re.fullmatch(re.escape(os.path.join(root, "explore", exp)) + r"-\w{6}", folder) \
            or os.stat(folder).st_mode & 0o777 != 0o700:
        fail("explore.html is not in a private folder explore/%s-XXXXXX: %s" % (exp, page))
    chromium = report_html_test.find_chromium()
    if chromium:
        report_html_test.check_page(chromium, page, 3, "explore.html")
    else:
        print("note: chromium is not installed; explore.html not opened")
    print(out)
    print("ok: fixed cost: wrote mini_batch_size %s after %d runs; history shows one row"
          % (m.group(1), runs))


def main():
    require_fanout()
    with scratch("explore") as root:
        too_small_case(root)
        fixed_cost_case(root)
        example_case(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
