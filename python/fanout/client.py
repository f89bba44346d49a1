"""fanout.Client and fanout.Job: run, follow and query fanout jobs from Python. Each call runs the
`fanout` program (run, status --json, history --json, wait, cancel, resume, report), so the jobs
are the CLI's own: the same store, reports and interchanges. See docs/python.md."""

import atexit
import csv
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from fanout import _jobfile
from fanout._cli import FanoutError, error_message, find_fanout, run_cli

# The states of a job that has ended (the store's spelling).
ENDED_STATES = ("succeeded", "partial", "failed", "cancelled")

_job_files = itertools.count(1)


def _flag(name):
    return "--" + name.replace("_", "-")


def _override_args(overrides):
    """`fanout run` options from keyword arguments: workers=4 is --workers 4, allow_partial=True
    is --allow-partial; False and None are left out."""
    args = []
    for key, value in overrides.items():
        if value is None or value is False:
            continue
        if value is True:
            args.append(_flag(key))
        else:
            args += [_flag(key), str(value)]
    return args


class _JobFile:
    """The job file of a job given as a dict or an SDK-shaped object: written (a dict as JSON,
    which is YAML, its relative paths made absolute against the current folder, where they are
    meant from; an object with dump(path)) to a private folder (_jobfile.py), and removed once
    the run that read it has ended (the folder when this goes, or at exit). write() makes it
    again for a resume, which reads the job file anew."""

    def __init__(self, job):
        if not isinstance(job, dict) and not hasattr(job, "dump"):
            raise TypeError("fanout: a job is a job file path, a dict shaped like the job YAML, "
                            "or an object with dump(path); got %s" % type(job).__name__)
        self.job = _jobfile.anchored(job, os.getcwd()) if isinstance(job, dict) else job
        self.folder = _jobfile.PrivateFolder()
        self.name = ".fanout-job-%d-%d.yml" % (os.getpid(), next(_job_files))
        self.path = os.path.join(self.folder.path, self.name)

    def write(self):
        _live_job_files.add(self.path)
        if isinstance(self.job, dict):
            with os.fdopen(self.folder.create(self.name), "w") as f:
                json.dump(self.job, f, indent=1)
        else:
            self.job.dump(self.path)  # in the private folder: no other user can make that name
        return self.path

    def remove(self):
        _remove_job_file(self.path)


_live_job_files = set()


def _remove_job_file(path):
    _live_job_files.discard(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


@atexit.register
def _remove_live_job_files():
    for path in list(_live_job_files):
        _remove_job_file(path)


def _job_file(job):
    """(the path of the job file for `job`, its _JobFile or None): a path is used as it is."""
    if isinstance(job, (str, os.PathLike)):
        return os.fspath(job), None
    f = _JobFile(job)
    return f.write(), f


# The exit status `fanout wait` gives a job that ended in each state.
_STATE_EXIT = {"succeeded": 0, "partial": 4, "failed": 1, "cancelled": 1}


class Client:
    """Runs and finds fanout jobs. `db`: the store (default: the CLI's, $FANOUT_DB or
    ~/.local/share/fanout/fanout.db); `interchange`: the client endpoint of a running
    interchange (default: a private one per run); `keys`: the key folder for a tcp://
    interchange; `fanout`: the program (default: $FANOUT_BIN, else `fanout` on PATH)."""

    def __init__(self, db=None, interchange=None, keys=None, fanout=None):
        self.db = os.fspath(db) if db is not None else None
        self.interchange = interchange
        self.keys = os.fspath(keys) if keys is not None else None
        self.fanout = find_fanout(fanout)

    def _db_args(self):
        return ["--db", self.db] if self.db else []

    def _connect_args(self):
        args = self._db_args()
        if self.interchange:
            args += ["--interchange", self.interchange]
        if self.keys:
            args += ["--keys", self.keys]
        return args

    def cli(self, *args, ok=(0,)):
        """Runs `fanout ARGS` and returns its standard output; FanoutError on failure."""
        return run_cli(self.fanout, list(args), ok=ok).stdout

    def submit(self, job, **overrides):
        """Starts a run of `job` (a job file, a dict shaped like its YAML, or an SDK-shaped object
        with dump(path)) and returns its Job once the interchange accepted it. `overrides` are
        `fanout run` options (workers=4, allow_partial=True, python=...). Raises FanoutError when
        the run ends before its job is accepted (a bad job file: exit status 2)."""
        path, job_file = _job_file(job)
        cmd = [self.fanout, "run", path, "--json"] + self._connect_args() + _override_args(
            overrides)
        err = tempfile.TemporaryFile(mode="w+")
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=err, text=True)
        except BaseException:
            if job_file is not None:
                job_file.remove()
            raise
        run = _Run(proc, err, cmd, job_file)
        accepted = run.wait_accepted()
        if accepted is None:
            rc = proc.wait()
            run.wait(None)
            raise FanoutError(error_message(run.stderr(), "fanout run: exit status %d" % rc), rc,
                              cmd)
        return Job(self, accepted["job_id"], run=run, job_file=job_file)

    def run(self, job, **overrides):
        """Runs `job` to its end (see submit()) and returns its Job; its state says how it
        ended. Progress goes to stderr unless progress=False."""
        progress = overrides.pop("progress", True)
        j = self.submit(job, **overrides)
        j.wait(progress=progress)
        return j

    def job(self, id):
        """The job `id` of this client's store. Raises FanoutError when the store has none."""
        j = Job(self, int(id))
        j.status()
        return j

    def history(self, limit=20, state=None):
        """The newest `limit` jobs of the store (0: all), newest first, as dicts (`fanout
        history --json`); `state`: only those in that state."""
        args = ["history", "--json", "--limit", str(limit)] + self._db_args()
        if state:
            args += ["--state", state]
        return json.loads(self.cli(*args))


class _Run:
    """A `fanout run --json` process of this Python process: its events are read as they come
    (so its pipe never fills), the newest progress and the end kept."""

    def __init__(self, proc, err, cmd, job_file=None):
        self.proc, self.err, self.cmd = proc, err, cmd
        self.job_file = job_file  # removed when the run has ended
        self.accepted = None
        self.progress = None
        self.ended = None
        self.printer = None  # set by Job.wait(progress=True)
        self._cond = threading.Condition()
        self._done = False
        threading.Thread(target=self._read, name="fanout-run-events", daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                kind = ev.get("event")
                if kind == "accepted":
                    self.accepted = ev
                elif kind == "progress":
                    self.progress = ev
                elif kind == "ended":
                    self.ended = ev
                self._cond.notify_all()
            if self.printer is not None and kind in ("progress", "ended"):
                self.printer(ev)
        self.proc.wait()
        if self.job_file is not None:
            self.job_file.remove()
        with self._cond:
            self._done = True
            self._cond.notify_all()

    def wait_accepted(self):
        with self._cond:
            self._cond.wait_for(lambda: self.accepted is not None or self._done)
            return self.accepted

    def wait(self, timeout):
        """Waits for the process to exit; False after `timeout` s."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._done, timeout):
                return False
        self.proc.wait()
        return True

    def stderr(self):
        self.err.seek(0)
        return self.err.read()


def _print_progress(ev):
    done = ev.get("done", ev.get("succeeded", 0) + ev.get("failed", 0))
    total = ev.get("total") or "?"
    line = "job %s: %s/%s mini-batches, %s failed" % (ev.get("job_id"), done, total,
                                                      ev.get("failed", 0))
    if ev.get("event") == "ended":
        line += ": %s" % ev.get("state")
        if ev.get("reason"):
            line += " (%s)" % ev["reason"]
    print(line, file=sys.stderr, flush=True)


class Job:
    """A job in a Client's store. Each call reads the store through the CLI, so what it returns
    is current; a job this Client submitted is also followed through its run's events."""

    def __init__(self, client, id, run=None, job_file=None):
        self.client = client
        self.id = int(id)
        self._run = run
        self._job_file = job_file  # a dict or SDK job's file, written again for resume()
        self._exit_status = None

    def __repr__(self):
        return "<fanout.Job %d>" % self.id

    def status(self):
        """What `fanout status ID --json` says: a dict (state, counts, rates, pools,
        last_errors, output_path, log_dir, ...)."""
        return json.loads(self.client.cli("status", str(self.id), "--json",
                                          *self.client._db_args()))

    @property
    def state(self):
        """running, succeeded, partial, failed or cancelled."""
        return self.status()["state"]

    @property
    def exit_status(self):
        """The CLI's exit status for this job (README, exit status): that of the `fanout run`,
        `wait` or `resume` this Job followed to the job's end; for a job it did not follow, the
        one its state gives (succeeded 0, partial 4, failed or cancelled 1). None while the job
        runs."""
        if self._exit_status is not None:
            return self._exit_status
        if self._run is not None and self._run.proc.poll() is not None:
            self._run.wait(None)
            self._exit_status = self._run.proc.returncode
            return self._exit_status
        return _STATE_EXIT.get(self.state)

    returncode = exit_status  # subprocess.Popen's name for it

    def wait(self, timeout=None, progress=True):
        """Follows the job to its end and returns its state. `progress`: a line on stderr as it
        goes. Raises TimeoutError after `timeout` s (the job goes on), FanoutError when the job
        did not end (its interchange went away: the CLI's message and exit status)."""
        if self._run is not None:
            return self._wait_run(timeout, progress)
        deadline = None if timeout is None else time.monotonic() + timeout
        if progress:
            args = ["wait", str(self.id)] + self.client._connect_args()
            cmd = [self.client.fanout] + args
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=sys.stderr,
                                 stderr=subprocess.PIPE, text=True)
            try:
                _, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                raise TimeoutError("job %d still running after %s s" % (self.id, timeout))
            return self._state_after(p.returncode, err, cmd)
        while True:
            st = self.status()
            if st["state"] in ENDED_STATES:
                return st["state"]
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("job %d still running after %s s" % (self.id, timeout))
            time.sleep(0.2)

    def _wait_run(self, timeout, progress):
        run = self._run
        if progress:
            run.printer = _print_progress
        try:
            if not run.wait(timeout):
                raise TimeoutError("job %d still running after %s s" % (self.id, timeout))
        finally:
            run.printer = None
        return self._state_after(run.proc.returncode, run.stderr(), run.cmd)

    def _state_after(self, rc, err, cmd):
        st = self.status()["state"]
        if st not in ENDED_STATES:
            raise FanoutError(error_message(err, "job %d did not end" % self.id), rc, cmd)
        self._exit_status = rc
        return st

    def cancel(self):
        """Asks the job to stop (`fanout cancel`); returns its state once it ended."""
        self.client.cli("cancel", str(self.id), "--quiet", *self.client._connect_args(),
                        ok=(0, 1))
        if self._run is not None:
            self._run.wait(None)
        return self.state

    def resume(self, failed=False, **options):
        """Finishes an unfinished job on a private interchange (`fanout resume`); `failed`: also
        runs again the mini-batches that failed. Returns its state when it ended; FanoutError
        when it could not be resumed."""
        args = ["resume", str(self.id), "--quiet"] + self.client._db_args() + _override_args(
            options)
        if failed:
            args.append("--failed")
        if self._job_file is not None:
            self._job_file.write()
        try:
            p = run_cli(self.client.fanout, args, ok=(0, 1, 4))
        finally:
            if self._job_file is not None:
                self._job_file.remove()
        self._run = None
        self._exit_status = p.returncode
        return self.state

    def rows(self, follow=True):
        """The job's output rows (its append_row file), a line at a time without the newline,
        read as they are written; `follow`: while the job runs, wait for more until it ends."""
        st = self.status()
        path = st.get("output_path") or ""
        if not path:
            raise FanoutError("job %d writes no rows (its output is summary_only)" % self.id)
        while not os.path.exists(path):
            if not follow or self.state in ENDED_STATES:
                return
            time.sleep(0.1)
        with open(path, "r", newline="\n", errors="surrogateescape") as f:
            pending = ""
            while True:
                chunk = f.readline()
                if chunk:
                    pending += chunk
                    if pending.endswith("\n"):
                        yield pending[:-1]
                        pending = ""
                    continue
                if not follow or self.state in ENDED_STATES:
                    # The end is committed after its rows: what is left is whole.
                    rest = f.read()
                    for line in (pending + rest).splitlines():
                        yield line
                    return
                time.sleep(0.1)

    def attempts(self):
        """Every attempt of every mini-batch, as dicts with the columns of the report's
        processed_mini-batches.csv (docs/reports.md)."""
        with tempfile.TemporaryDirectory(prefix="fanout-attempts-") as out:
            self.client.cli("report", str(self.id), "--out", out, *self.client._db_args())
            path = os.path.join(out, "sys", "job_report", "processed_mini-batches.csv")
            with open(path, newline="") as f:
                return list(csv.DictReader(f))

    def report(self, html=False, out=None):
        """Writes the job's report (`fanout report`): the logs folder, or with `html` the
        report.html page; `out`: where instead. Returns the path written."""
        args = ["report", str(self.id)] + self.client._db_args()
        if html:
            args.append("--html")
        if out is not None:
            args += ["--out", os.fspath(out)]
        self.client.cli(*args)
        if out is not None:
            return os.fspath(out)
        log_dir = self.status().get("log_dir", "")
        return os.path.join(log_dir, "report.html") if html else log_dir
