"""Shared support of the Python integration tests (tests/integration/*_test.py): failing and
skipping the way `meson test` reads it, running `fanout`, scratch folders, polling waits, reading
the store, a standalone interchange with pools, and the check that every expected row came
exactly once. The tests import it as `support` (their own folder is on sys.path when Python runs
them). Paths of the programs come from the environment tests/meson.build sets."""

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

SKIP = 77  # meson: the test was skipped
FANOUT = os.environ.get("FANOUT_BIN", "")
INTERCHANGE = os.environ.get("FANOUT_INTERCHANGE_BIN", "")
POOL = os.environ.get("FANOUT_POOL_BIN", "")
PYTHON = os.environ.get("FANOUT_TEST_PYTHON", "python3")
SOURCE_ROOT = os.environ.get("FANOUT_SOURCE_ROOT", "")
TOOLS = os.environ.get("FANOUT_TOOLS_DIR", "")


def fail(msg):
    """Ends the test as failed, saying why."""
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def skip(reason):
    """Ends the test as skipped (exit 77), saying why."""
    print("SKIP: " + reason, file=sys.stderr)
    sys.exit(SKIP)


def require_fanout():
    """Skips unless FANOUT_BIN is set (the test runs outside `meson test`)."""
    if not FANOUT:
        skip("FANOUT_BIN is not set (run through meson test)")


def wait_until(pred, timeout, what, step=0.1):
    """Polls pred() every `step` s until it returns something true, and returns that; fails the
    test naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    fail("timed out after %.0f s waiting for %s" % (timeout, what))


def fanout(*args, cwd=None, stdin=None, env=None, timeout=240, check=True):
    """Runs `fanout ARGS...` to its end, output captured as text. With `check`, a non-zero exit
    fails the test with the command, its exit status and its output."""
    p = subprocess.run([FANOUT, *args], cwd=cwd, input=stdin, env=env, capture_output=True,
                       text=True, timeout=timeout)
    if check and p.returncode != 0:
        fail("fanout %s: exit %d\n%s\n%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


@contextlib.contextmanager
def scratch(prefix):
    """A fresh folder under $TMPDIR named fanout-<prefix>-..., removed at the end unless
    FANOUT_KEEP_TMP is set."""
    root = tempfile.mkdtemp(prefix="fanout-%s-" % prefix)
    try:
        yield root
    finally:
        if not os.environ.get("FANOUT_KEEP_TMP"):
            shutil.rmtree(root, ignore_errors=True)


def write(path, text, mode=None):
    """Writes `text` to `path`, making its folders; `mode`: chmod it."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    if mode is not None:
        os.chmod(path, mode)
    return path


def make_files(folder, names, text="x\n"):
    """Files `names` in `folder` (made), each holding `text` (or text(name) when callable)."""
    os.makedirs(folder, exist_ok=True)
    for n in names:
        write(os.path.join(folder, n), text(n) if callable(text) else text)
    return folder


RUN_FUNCTION = "  type: run_function\n  code: ./src\n  entry_script: score.py\n"
# An entry script returning each mini-batch unchanged (its items' paths are its rows).
PASS_THROUGH = "def run(mini_batch):\n    return mini_batch\n"


def job_yaml(name, data="./data", output="./out.txt", mini_batch_size="1", instance_count=None,
             concurrency=None, retries=None, timeout=None, env=None, task=RUN_FUNCTION,
             program_arguments="", top=""):
    """A job file's text from a few fields (as tests/support/job_fixture.hpp's JobSpec): inputs
    from the folder `data`, rows appended to `output` (declared as outputs.out; None: the job
    writes no rows file). Keys left None
    are not written, so the product's defaults apply. `env`: environment_variables as a dict;
    `task`: the lines under task: before append_row_to (two-space indented); `top`: more
    top-level YAML, whole lines."""
    y = "type: parallel\nname: %s\ninputs:\n  files:\n    type: uri_folder\n    path: %s\n" % (
        name, data)
    if output is not None:
        y += "outputs:\n  out:\n    type: uri_file\n    path: %s\n" % output
    y += "input_data: ${{inputs.files}}\nmini_batch_size: \"%s\"\n" % mini_batch_size
    if instance_count is not None:
        y += "resources:\n  instance_count: %d\n" % instance_count
    if concurrency is not None:
        y += "max_concurrency_per_instance: %d\n" % concurrency
    if retries is not None or timeout is not None:
        y += "retry_settings:\n"
        y += "  max_retries: %d\n" % retries if retries is not None else ""
        y += "  timeout: %d\n" % timeout if timeout is not None else ""
    if env:
        y += "environment_variables:\n" + "".join(
            "  %s: \"%s\"\n" % (k, v) for k, v in env.items())
    y += top + "task:\n" + task
    if program_arguments:
        y += "  program_arguments: \"%s\"\n" % program_arguments
    return y + ("  append_row_to: ${{outputs.out}}\n" if output is not None else "")


def sql(db, query):
    """The rows of `query` on the store `db`, opened read-only."""
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=30)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def sql_int(db, query, default=0):
    """The first column of the first row of `query`, or `default` when there is none or the
    store cannot be read yet."""
    try:
        rows = sql(db, query)
    except sqlite3.Error:
        return default
    return rows[0][0] if rows and rows[0][0] is not None else default


def read_rows(path):
    """The non-empty lines of an output file ([] when it does not exist)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line for line in f.read().splitlines() if line]


def check_rows_once(rows, expected, what):
    """Every expected row exactly once. `expected`: the rows, in any order (then nothing else may
    appear), or their count when only that is known (then: that many rows, none twice). Fails the
    test naming `what`, the rows missing and those seen twice."""
    twice = sorted({r for r in rows if rows.count(r) > 1})
    if isinstance(expected, int):
        if len(rows) != expected or twice:
            fail("%s: %d rows, %d distinct, of %d (twice: %s)" %
                 (what, len(rows), len(set(rows)), expected, twice[:5]))
        return
    if sorted(rows) != sorted(expected):
        missing = sorted(set(expected) - set(rows))
        extra = sorted(set(rows) - set(expected))
        fail("%s: rows not exactly once: %d rows of %d, missing %s, twice %s, unexpected %s" %
             (what, len(rows), len(expected), missing[:5], twice[:5], extra[:5]))


class Cluster:
    """A standalone fanout-interchange on `db` with its ready file and log in `folder`, and the
    pools started with start_pool(); stop() (or leaving a `with` block) ends them all. `ix_args`:
    more interchange flags (for example --client-endpoint, --write-root)."""

    def __init__(self, folder, db, ix_args=(), timeout=30):
        os.makedirs(folder, exist_ok=True)
        self.folder = folder
        self.ready = os.path.join(folder, "ix.ready")
        self.log = os.path.join(folder, "ix.log")
        self.pools = []
        self.ix = subprocess.Popen([INTERCHANGE, "--db", db, "--ready-file", self.ready,
                                    "--log-file", self.log, *ix_args],
                                   stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: os.path.exists(self.ready) and "pool=" in open(self.ready).read(),
                       timeout, "the interchange to start")
        except SystemExit:
            self.stop()
            raise
        kv = dict(line.split("=", 1) for line in open(self.ready).read().splitlines()
                  if "=" in line)
        self.client_ep, self.pool_ep = kv.get("client", ""), kv.get("pool", "")

    def start_pool(self, workers=2, extra=(), name=None):
        """A pool of `workers` on this interchange (running PYTHON), logging to
        <folder>/<name or pool-N>.log."""
        name = name or "pool-%d" % len(self.pools)
        argv = [POOL, "--interchange", self.pool_ep, "--workers", str(workers), "--python",
                PYTHON, "--log-file", os.path.join(self.folder, name + ".log"), *extra]
        self.pools.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL))
        return self.pools[-1]

    def stop(self):
        """SIGTERM to the pools and the interchange, each waited for (30 s)."""
        for p in self.pools + [self.ix]:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
