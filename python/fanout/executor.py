"""fanout.Executor: a concurrent.futures.Executor whose calls run as the mini-batches of one
fanout job. It starts `fanout executor-serve` (client/commands/executor_serve.hpp), which opens
the job as `fanout run` does (the embedded default, --interchange with keys, the launchers) and
sends each line written to its stdin as a mini-batch; the job's entry script
(_entry/fanout_executor_entry.py) runs the pickled calls, and their pickled outcomes come back as
the job's append_row rows, read here as they are written. Each row carries an HMAC-SHA256 under a
key made for this Executor, and a row without a valid one is refused before anything in it is
unpickled. See docs/python.md and docs/security.md."""

import atexit
import base64
import concurrent.futures as cf
import errno
import hashlib
import hmac
import itertools
import json
import os
import pickle
import queue
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import weakref

from fanout._cli import FanoutError, error_message, find_fanout

try:  # what pickle cannot send by reference (lambdas, closures) travels by value with it
    import cloudpickle as _cloudpickle
except ImportError:
    _cloudpickle = None

_ENTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_entry",
                      "fanout_executor_entry.py")
_NO_TIMEOUT_S = 10 * 365 * 24 * 3600  # retry_settings.timeout must be > 0
_TIMEOUT_STATUSES = ("RUN_TIMEOUT", "LOAD_TIMEOUT")  # attempt statuses (docs/store.md)
_KEY_VAR = "FANOUT_EXECUTOR_KEY"  # the rows' MAC key, for the entry script (see _row_mac)
_live = weakref.WeakSet()
_prev_sigint = None  # the SIGINT handler before _on_sigint was chained in front of it


def _row_mac(key, ident, payload):
    """The MAC of a result row: HMAC-SHA256 over "ID PAYLOAD" (the entry script's _row_mac)."""
    return hmac.new(key, ident + b" " + payload, hashlib.sha256).hexdigest().encode("ascii")


def _private_folder(work_dir):
    """A fresh folder only this user can use (mkdtemp: 0700, made with O_EXCL semantics) under
    `work_dir` (default $TMPDIR), and a descriptor of it opened without following links, through
    which every file of the Executor is made and read. `work_dir` may be shared with others only
    if it has the sticky bit and is this user's or root's (as /tmp): else another user could
    rename this folder away and put theirs in its place."""
    parent = os.path.abspath(os.fspath(work_dir)) if work_dir is not None else None
    if parent is not None:
        st = os.stat(parent)
        if st.st_mode & 0o022 and (not st.st_mode & stat.S_ISVTX or
                                   st.st_uid not in (0, os.geteuid())):
            raise FanoutError("fanout.Executor: work_dir %s (owner uid %d, mode %04o) is "
                              "writable by other users and is not a sticky folder of yours or "
                              "root's: another user could replace this Executor's folder in it; "
                              "use a folder only you can write, or one like /tmp (root's, "
                              "`chmod 1777`)" % (parent, st.st_uid, stat.S_IMODE(st.st_mode)))
    path = tempfile.mkdtemp(prefix="fanout-executor-", dir=parent)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        os.close(fd)
        raise FanoutError("fanout.Executor: its folder %s is not private (owner uid %d, mode "
                          "%04o)" % (path, st.st_uid, stat.S_IMODE(st.st_mode)))
    return path, fd


class CallFailed(Exception):
    """A call that returned nothing: its worker crashed (a segfault, killed, out of memory) or
    it ran out of tries. `status` is the last attempt's status in the store (e.g.
    PROCESS_CRASHED, RUN_TIMEOUT), `tries` how many it had."""

    def __init__(self, message, status="", tries=0):
        super().__init__(message)
        self.status = status
        self.tries = tries


class CallTimeout(CallFailed, TimeoutError):
    """A call that ran past Executor(timeout=...) in each of its tries."""


class _RemoteTraceback(Exception):
    """The traceback of a call's exception in its worker, as its __cause__ (as
    ProcessPoolExecutor does)."""

    def __init__(self, tb):
        super().__init__(tb)
        self.tb = tb

    def __str__(self):
        return self.tb


def _exception(info):
    exc_bytes, tb, text = info
    exc = None
    if exc_bytes is not None:
        try:
            exc = pickle.loads(exc_bytes)
        except Exception:
            exc = None
    if not isinstance(exc, BaseException):
        exc = CallFailed(text)
    if tb:
        exc.__cause__ = _RemoteTraceback('\n"""\n%s"""' % tb)
    return exc


def _dumps(obj):
    """By reference, as multiprocessing does (fast, and small); by value with cloudpickle, when
    it is importable, for what has no importable name."""
    try:
        return pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError):
        if _cloudpickle is None:
            raise
        return _cloudpickle.dumps(obj, pickle.HIGHEST_PROTOCOL)


def _fail(chunk, reason, running=True, status=""):
    for f in chunk.futures:
        if not running:
            f.set_running_or_notify_cancel()
        if not f.done():
            f.set_exception(CallFailed(reason, status))


class _Chunk:
    """Calls sent as one mini-batch: the futures of submit() (one) or of a map() chunk."""

    __slots__ = ("futures",)

    def __init__(self, futures):
        self.futures = futures


class Executor(cf.Executor):
    """A concurrent.futures.Executor running each call as (part of) a mini-batch of one fanout
    job, recorded in the store like any job (`fanout history`, report, compare, tune).

    max_workers: worker processes per pool (default: the CPUs); db, interchange, keys: as
    Client; launcher, nodes: where the pools run (`fanout run --launcher slurm --nodes 4`);
    retries: tries after the first for a call whose worker crashed or timed out; timeout:
    seconds one mini-batch (one submit(), or one map() chunk) may run (default: no limit);
    python: the workers' interpreter (default: this one); name: the job's name; work_dir: where
    the job's private folder (its job file and result rows) is made (default: $TMPDIR; with a
    shared interchange, a folder it writes, under its --write-root, that this host reads too;
    one that others can write must be a sticky folder of yours or root's, as /tmp);
    max_in_flight: mini-batches handed to the job and not yet answered, at most (default: 16
    per worker, at least 256); the calls behind wait here, cancellable; other keyword arguments
    are `fanout run` options (pools=2, prefetch=8)."""

    def __init__(self, max_workers=None, *, db=None, interchange=None, keys=None, launcher=None,
                 nodes=None, retries=0, timeout=None, python=None, name="executor", fanout=None,
                 work_dir=None, max_in_flight=None, **options):
        self._fanout = find_fanout(fanout)
        self._max_workers = max_workers
        workers = (max_workers or os.cpu_count() or 1) * int(options.get("pools") or 1) * int(
            nodes or 1)
        self._max_in_flight = int(max(256, 16 * workers) if max_in_flight is None
                                  else max_in_flight)
        if self._max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)  # a sent mini-batch was answered
        self._chunks = {}  # id -> _Chunk, sent and not yet answered
        self._ids = itertools.count()  # mini-batch indexes, as sent
        self._queue = queue.Queue()
        self._shutdown = False
        self._interrupts = 0  # SIGINTs seen while live (see _on_interrupt)
        self._ended = None  # the "ended" event
        self._over = False  # the job ended and its rows were read: calls fail at once
        self.rows_read = 0  # result rows read; those of no call waiting for one:
        self.rows_unexpected = 0
        self.rows_refused = 0  # rows without a valid MAC: refused, never unpickled
        self.job_id = None
        self.db = None
        self._key = os.urandom(32)  # the rows' MAC key: this process and its job's workers
        self._dir, self._dir_fd = _private_folder(work_dir)
        self._results = os.path.join(self._dir, "results.txt")
        self._results_error = None  # why the rows file could not be read, if it could not
        job = self._write_job(name, retries, timeout, python)
        cmd = [self._fanout, "executor-serve", job, "--quiet"]
        for flag, value in (("--db", db), ("--interchange", interchange), ("--keys", keys),
                            ("--launcher", launcher), ("--nodes", nodes),
                            ("--workers", max_workers)):
            if value is not None:
                cmd += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
        for key, value in options.items():
            if value is True:
                cmd.append("--" + key.replace("_", "-"))
            elif value is not None and value is not False:
                cmd += ["--" + key.replace("_", "-"), str(value)]
        self._cmd = cmd
        self._reach = [a for flag, v in (("--interchange", interchange), ("--keys", keys))
                       if v is not None for a in (flag, os.fspath(v))]
        self._err = os.fdopen(self._create("serve.err"), "w+")
        # Its own session: a Ctrl-C at the terminal reaches this process only, which tells
        # executor-serve (_on_interrupt), so one interrupt is one, not one each.
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._err, cwd=os.getcwd(), start_new_session=True)
        accepted = self._read_accepted()
        if accepted is None:
            rc = self._proc.wait()
            self._err.seek(0)
            msg = error_message(self._err.read(), "fanout executor-serve: exit status %d" % rc)
            self._cleanup()
            raise FanoutError(msg, rc, cmd)
        self.job_id = accepted["job"]
        self.db = accepted.get("db")
        self._threads = [threading.Thread(target=f, name="fanout-executor-" + n, daemon=True)
                         for f, n in ((self._write_loop, "send"), (self._event_loop, "events"),
                                      (self._result_loop, "results"))]
        for t in self._threads:
            t.start()
        _live.add(self)
        _watch_interrupts()

    # ---- the job ----

    def _create(self, name):
        """A new file `name` in the Executor's folder, mode 0600: never one that was there (a
        link or a file planted by another), never through a link. Returns its descriptor."""
        return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                       0o600, dir_fd=self._dir_fd)

    def _write_job(self, name, retries, timeout, python):
        os.mkdir("calls", 0o700, dir_fd=self._dir_fd)
        main = getattr(sys.modules.get("__main__"), "__file__", None)
        env = {
            "FANOUT_EXECUTOR_PATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)),
            "FANOUT_EXECUTOR_MAIN": os.path.abspath(main) if main and main.endswith(".py") else "",
            # The job's variables are how the key reaches the workers that write the rows, on
            # the embedded default and on a shared interchange's pools alike; the job file stays
            # in the private folder (docs/security.md, "Python callers": who else holds it).
            _KEY_VAR: self._key.hex(),
            # The worker does not put the working folder (this process's) on sys.path: the
            # entry script appends this process's own sys.path, after the standard library.
            "FANOUT_CODE_ON_SYS_PATH": "0",
        }
        job = {
            "type": "parallel",
            "name": name,
            "inputs": {"calls": {"type": "uri_folder", "path": os.path.join(self._dir, "calls")}},
            "outputs": {"results": {"type": "uri_file", "path": self._results}},
            "input_data": "${{inputs.calls}}",
            "mini_batch_size": "1",
            "error_threshold": -1,
            "mini_batch_error_threshold": -1,
            "retry_settings": {"max_retries": int(retries),
                               "timeout": timeout if timeout is not None else _NO_TIMEOUT_S},
            "environment_variables": env,
            "task": {"type": "run_function", "code": os.getcwd(), "entry_script": _ENTRY,
                     "append_row_to": "${{outputs.results}}"},
            "fanout": {"python": python or sys.executable},
        }
        with os.fdopen(self._create("job.yml"), "w") as f:
            json.dump(job, f, indent=1)  # JSON is YAML
        return os.path.join(self._dir, "job.yml")

    def _read_accepted(self):
        for line in self._proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("event") == "accepted":
                return ev
            if ev.get("event") == "ended":
                return None
        return None

    # ---- the threads ----

    def _write_loop(self):
        """Sends the queued chunks, as many as are queued in one write; None ends the
        submission. Once the job is over (or executor-serve gone), what is left fails."""
        out = self._proc.stdin
        broken = False
        while True:
            item = self._queue.get()
            room = self._wait_for_room(broken) if item is not None else 1
            batch = [item]
            size = len(item[1]) if item is not None else 0
            try:
                # Calls left queued stay cancellable (Future.cancel(), shutdown(cancel_futures)).
                while item is not None and len(batch) < min(4096, room) and size < (256 << 10):
                    item = self._queue.get_nowait()
                    batch.append(item)
                    size += len(item[1]) if item is not None else 0
            except queue.Empty:
                pass
            lines = []
            end = False
            for it in batch:
                if it is None:
                    end = True
                    break
                chunk, payload = it
                if self._interrupts:  # Ctrl-C: what was not sent never runs
                    for f in chunk.futures:
                        f.cancel()
                if not any([f.set_running_or_notify_cancel() for f in chunk.futures]):
                    continue  # all cancelled: never sent
                with self._lock:
                    if broken or self._over:
                        _fail(chunk, self._over_reason())
                        continue
                    # The line's number is the mini-batch's index, which a failure names.
                    ident = next(self._ids)
                    self._chunks[ident] = chunk
                # "CALLS ID:BASE64": executor-serve makes one item per call of it.
                lines.append(b"%d %d:%s\n" % (len(chunk.futures), ident, payload))
            if end:
                lines.append(b"=end\n")
            if not broken:
                try:
                    out.write(b"".join(lines))
                    out.flush()
                    if end:
                        out.close()
                except (BrokenPipeError, ValueError, OSError):
                    broken = True  # executor-serve is gone: the result thread fails the rest
            if end:
                return

    def _wait_for_room(self, broken):
        """Waits until fewer than max_in_flight mini-batches are sent and unanswered (or the
        job is over, executor-serve gone, or an interrupt came). Returns how many more may go.
        The calls behind stay pending here, cancellable as a ProcessPoolExecutor's queued ones."""
        with self._room:
            while (len(self._chunks) >= self._max_in_flight and not self._over and not broken
                   and not self._interrupts):
                self._room.wait(0.1)
            return max(1, self._max_in_flight - len(self._chunks))

    def _event_loop(self):
        for line in self._proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            kind = ev.get("event")
            if kind == "failed":
                self._fail_chunk(ev)
            elif kind == "ended":
                self._ended = ev
        self._proc.wait()
        if self._ended is None or not self._ended.get("state"):
            self._ended = self._end_orphan(self._ended)

    def _end_orphan(self, ended):
        """executor-serve ended without the job's end (it was killed or crashed: `ended` is
        None; its interchange or pools went away: `ended` has no state): the job would stay
        `running` in the store, with no job file to resume it from. It is cancelled (through its
        interchange if one still runs, else in the store itself) with the reason. Returns the
        "ended" event to go by."""
        rc = self._proc.returncode
        if ended is not None:
            why = ended.get("reason") or "exit status %d" % rc
        else:
            self._err.seek(0)
            why = error_message(self._err.read(), "") or (
                "killed by signal %d" % -rc if rc < 0 else "exit status %d" % rc)
        reason = "fanout.Executor: its fanout executor-serve (pid %d) ended without the job's " \
                 "end: %s" % (self._proc.pid, why)
        if self.db or self._reach:
            cmd = [self._fanout, "cancel", str(self.job_id), "--quiet", "--reason", reason]
            cmd += (["--db", self.db] if self.db else []) + self._reach
            try:
                subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                pass
        return {"state": "cancelled", "reason": reason}

    def _fail_chunk(self, ev):
        ident = ev["index"]
        with self._lock:
            chunk = self._chunks.pop(ident, None)
            self._room.notify()
        if chunk is None:
            return
        last = ev.get("error", "")
        status = ev.get("status", "")
        cls = CallTimeout if status in _TIMEOUT_STATUSES else CallFailed
        msg = "fanout job %s, mini-batch %d, after %d tries: %s" % (
            self.job_id, ident, ev.get("tries", 0), last)
        for f in chunk.futures:
            if not f.done():
                f.set_exception(cls(msg, status, ev.get("tries", 0)))

    def _take_rows(self, data):
        for line in data.split(b"\n"):
            if not line:
                continue
            parts = line.split(b" ", 2)
            ident = parts[0]
            if len(parts) != 3 or not hmac.compare_digest(
                    parts[1], _row_mac(self._key, ident, parts[2])):
                self._refuse_row(ident)  # never unpickled
                continue
            try:
                ident = int(ident)
                outcomes = pickle.loads(base64.b64decode(parts[2]))
            except Exception:
                self._refuse_row(ident)
                continue
            with self._lock:
                chunk = self._chunks.pop(ident, None)
                self.rows_read += 1
                self._room.notify()
            if chunk is None:
                self.rows_unexpected += 1  # a row twice, or of no call: never, tests check
                continue
            if len(outcomes) != len(chunk.futures):  # the chunk itself failed to load
                outcomes = [outcomes[0]] * len(chunk.futures)
            for f, (ok, value) in zip(chunk.futures, outcomes):
                if f.done():
                    continue
                if ok:
                    f.set_result(value)
                else:
                    f.set_exception(_exception(value))

    def _refuse_row(self, ident):
        """A row this Executor's workers did not write (no valid MAC: another job appending to
        this file, or a forged row): counted, and the call it names, if one waits, fails."""
        try:
            ident = int(ident)
        except ValueError:
            ident = None
        with self._lock:
            self.rows_refused += 1
            chunk = self._chunks.pop(ident, None) if ident is not None else None
            self._room.notify()
        if chunk is not None:
            _fail(chunk, "fanout job %s, mini-batch %d: its result row in %s has no valid MAC "
                  "(this Executor's workers did not write it: another job appending to this file, "
                  "or a forged row); refused without unpickling it" % (
                      self.job_id, ident, self._results), status="ROW_REFUSED")

    def _open_results(self):
        """The rows file, opened without following a link; None while it is not there."""
        if self._dir_fd is None:  # removed already (_abandon)
            return None
        try:
            fd = os.open("results.txt", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=self._dir_fd)
        except FileNotFoundError:
            return None
        except OSError as e:
            self._results_error = "cannot read its rows file %s: %s" % (
                self._results, "a symbolic link" if e.errno == errno.ELOOP else e.strerror)
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            self._results_error = "its rows file %s is not a regular file" % self._results
            return None
        return os.fdopen(fd, "rb")

    def _result_loop(self):
        """Reads the rows as the interchange appends them (a row is whole once its newline is
        there), until the job ended and its file was read to the end."""
        pending = b""
        idle = 0.001
        f = None
        while True:
            ended = self._ended is not None
            if f is None and self._results_error is None:
                f = self._open_results()
            data = f.read() if f is not None else b""
            if data:
                pending += data
                cut = pending.rfind(b"\n")
                if cut >= 0:
                    self._take_rows(pending[:cut])
                    pending = pending[cut + 1:]
                idle = 0.001
                continue
            if ended:
                break
            time.sleep(idle)
            idle = min(idle * 2, 0.05)
        if f is not None:
            f.close()
        with self._lock:
            self._over = True
            left = list(self._chunks.values())
            self._chunks.clear()
            self._room.notify_all()
        for chunk in left:
            _fail(chunk, self._over_reason())
        self._cleanup()

    def _over_reason(self):
        ended = self._ended or {}
        return "fanout job %s ended %s%s without a result for this call%s" % (
            self.job_id, ended.get("state") or "(did not end)",
            ": " + ended["reason"] if ended.get("reason") else "",
            "; " + self._results_error if self._results_error else "")

    def _cleanup(self):
        with self._lock:  # the result thread's, or the exit hook's (_abandon), once
            fd, self._dir_fd = self._dir_fd, None
        if fd is None:
            return
        if not os.environ.get("FANOUT_KEEP_TMP"):
            shutil.rmtree(self._dir, ignore_errors=True)  # fd-based: never follows a link
        os.close(fd)

    def _abandon(self):
        """At exit after a second interrupt: executor-serve, which cancels the job, has a few
        seconds to end; the folder is removed in any case."""
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        self._cleanup()

    def _on_interrupt(self):
        """A SIGINT (in the main thread, between two bytecodes: no lock taken here). The first
        cancels the job in executor-serve, which cancels it in the interchange: the calls not
        yet running never run, the running ones are stopped, and the calls not yet sent are
        cancelled by the send thread. From the second on, shutdown() and the exit hook no
        longer wait for the job's end."""
        self._interrupts += 1
        if self._interrupts == 1 and self._proc.returncode is None:
            try:
                os.kill(self._proc.pid, signal.SIGINT)  # its first: cancel the job
            except OSError:
                pass

    # ---- concurrent.futures.Executor ----

    def _send(self, fn, calls, futures):
        payload = base64.b64encode(_dumps((fn, calls)))
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self._over:  # the job ended early (its interchange went away, cancelled)
                _fail(_Chunk(futures), self._over_reason(), running=False)
                return
            self._queue.put((_Chunk(futures), payload))

    def submit(self, fn, /, *args, **kwargs):
        f = cf.Future()
        self._send(fn, [(args, kwargs)], [f])
        return f

    def map(self, fn, *iterables, timeout=None, chunksize=None):
        """As Executor.map: the results in order, each call's exception raised at its place.
        Calls travel `chunksize` to a mini-batch (default: about 8 mini-batches per worker of
        this machine, at most 1024 calls each)."""
        calls = [(args, {}) for args in zip(*iterables)]
        if chunksize is None:
            slots = 8 * (self._max_workers or os.cpu_count() or 1)
            chunksize = max(1, min(1024, len(calls) // slots))
        if chunksize < 1:
            raise ValueError("chunksize must be >= 1")
        futures = []
        for i in range(0, len(calls), chunksize):
            part = [cf.Future() for _ in calls[i:i + chunksize]]
            self._send(fn, calls[i:i + chunksize], part)
            futures += part
        end = None if timeout is None else time.monotonic() + timeout

        def results():
            try:
                futures.reverse()
                while futures:
                    f = futures.pop()
                    if end is None:
                        yield f.result()
                    else:
                        yield f.result(end - time.monotonic())
            finally:
                for f in futures:
                    f.cancel()

        return results()

    def shutdown(self, wait=True, *, cancel_futures=False):
        """Ends the job's submission: no more calls. `cancel_futures`: the calls not yet sent are
        cancelled. `wait`: returns once every call has its outcome and the job ended."""
        with self._lock:
            first = not self._shutdown
            self._shutdown = True
            if first and cancel_futures:
                try:
                    while True:
                        item = self._queue.get_nowait()
                        for f in item[0].futures:
                            f.cancel()
                except queue.Empty:
                    pass
            if first:
                self._queue.put(None)
        if wait:
            for t in self._threads:
                while t.is_alive():
                    if self._interrupts > 1:
                        return  # interrupted twice: no waiting (the exit hook tidies up)
                    t.join(0.1)
            self._proc.wait()
            _live.discard(self)

    @property
    def state(self):
        """The job's end state once it ended (after shutdown), else None."""
        return self._ended.get("state") if self._ended else None


def _on_sigint(signum, frame):
    for ex in list(_live):
        ex._on_interrupt()
    if callable(_prev_sigint):
        _prev_sigint(signum, frame)  # Python's own raises KeyboardInterrupt
    else:
        raise KeyboardInterrupt


def _watch_interrupts():
    """Puts _on_sigint in front of the SIGINT handler, once, from the main thread (only it can
    set one), unless SIGINT is ignored (nohup, a shell's background job)."""
    global _prev_sigint
    if _prev_sigint is not None or threading.current_thread() is not threading.main_thread():
        return
    prev = signal.getsignal(signal.SIGINT)
    if prev == signal.SIG_IGN or prev is None or prev is _on_sigint:
        return
    _prev_sigint = prev
    signal.signal(signal.SIGINT, _on_sigint)


@atexit.register
def _end_all():
    for ex in list(_live):
        if ex._interrupts > 1:
            ex._abandon()
        else:
            ex.shutdown(wait=True)
