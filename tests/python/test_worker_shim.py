#!/usr/bin/env python3
"""Tests of pool/python/fanout_worker.py through its pipes (docs/worker-pipe.md).

Each test writes a tiny entry script to a temporary code folder and starts the
shim the way fanout-pool does: `<python> -u fanout_worker.py [user args]`, the
request pipe on fd 3, the reply pipe on fd 4, stdout/stderr to files.

    python3 tests/python/test_worker_shim.py [-v]

Environment:
    FANOUT_TEST_PYTHON   interpreter that runs the worker (default: this one)
    FANOUT_BENCH_TASKS   no-op tasks for the throughput figure (default 20000; 0 skips)
"""

import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHIM_DIR = os.path.join(ROOT, "pool", "python")
SHIM = os.path.join(SHIM_DIR, "fanout_worker.py")
PYTHON = os.environ.get("FANOUT_TEST_PYTHON") or sys.executable
TIMEOUT = 30.0

_HAS_PANDAS = []


def has_pandas():
    """True if the interpreter that runs the worker can import pandas."""
    if not _HAS_PANDAS:
        _HAS_PANDAS.append(_worker_has("pandas"))
    return _HAS_PANDAS[0]


TASK = struct.Struct("<QQII")
DONE = struct.Struct("<QBQQdd")
MARK = struct.Struct("<Q")
LEN = struct.Struct("<I")

# Popen(pass_fds=(3, 4)) needs fds 3 and 4 open here; the child's copies are then
# replaced by the pipes (dup2 in preexec_fn), as the pool's dup2 does.
_placeholders = []
while True:
    try:
        os.fstat(3)
        os.fstat(4)
        break
    except OSError:
        _placeholders.append(os.open(os.devnull, os.O_RDONLY))


def task_frame(task_id, items, minibatch_index=0, detail=b""):
    if isinstance(detail, dict):
        detail = json.dumps(detail).encode()
    data = "\0".join(items).encode("utf-8", "surrogateescape")
    body = b"T" + TASK.pack(task_id, minibatch_index, len(detail), len(items)) + detail + data
    return LEN.pack(len(body)) + body


QUIT_FRAME = LEN.pack(1) + b"Q"


def _worker_has(module):
    return subprocess.run([PYTHON, "-c", "import " + module], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


class Done(object):
    def __init__(self, payload):
        (self.task_id, self.status, self.n_result, out_len, self.run_seconds,
         self.cpu_seconds) = DONE.unpack_from(payload, 0)
        self.out = payload[DONE.size:DONE.size + out_len]
        self.err = payload[DONE.size + out_len:].decode("utf-8")

    def __repr__(self):
        return "Done(%r)" % (self.__dict__,)


class Worker(object):
    """One shim process with its pipes."""

    def __init__(self, folder, script="score.py", args=(), env=None):
        req_r, self.req_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        # Move the child's ends above 10 so the dup2 onto 3/4 cannot clobber either.
        child_req = fcntl.fcntl(req_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_rep = fcntl.fcntl(rep_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(req_r)
        os.close(rep_w)

        def wire():
            os.dup2(child_req, 3)
            os.dup2(child_rep, 4)

        self.script = os.path.join(folder, script)
        full_env = dict(os.environ)
        full_env.pop("AZUREML_BI_OUTPUT_PATH", None)
        full_env.update({
            "FANOUT_ENTRY_SCRIPT": self.script,
            "FANOUT_NODE": "node-a",
            "FANOUT_PROCESS": "process001",
            "FANOUT_LOG_DIR": os.path.join(folder, "logs"),
            "FANOUT_OUTPUT_DIR": os.path.join(folder, "out"),
            "FANOUT_INPUT_NAME": "images",
            "FANOUT_APPEND_ROW": "1",
            "PYTHONPATH": SHIM_DIR,
        })
        full_env.update(env or {})
        self.stdout_path = os.path.join(folder, "stdout.txt")
        self.stderr_path = os.path.join(folder, "stderr.txt")
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [PYTHON, "-u", SHIM] + list(args), cwd=folder, env=full_env, stdin=subprocess.DEVNULL,
                stdout=out, stderr=err, pass_fds=(3, 4), preexec_fn=wire)
        os.close(child_req)
        os.close(child_rep)
        self.reader = os.fdopen(self.rep_r, "rb", buffering=0)
        self.buf = b""

    # -- pipe helpers
    def send(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self.req_w, view):]

    def _read_exact(self, n):
        while len(self.buf) < n:
            ready, _, _ = select.select([self.rep_r], [], [], TIMEOUT)
            if not ready:
                raise AssertionError("no reply within %ss; stderr:\n%s" % (TIMEOUT, self.stderr()))
            chunk = os.read(self.rep_r, 1 << 16)
            if not chunk:
                raise EOFError("reply pipe closed; stderr:\n%s" % self.stderr())
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def recv(self):
        (n,) = LEN.unpack(self._read_exact(4))
        body = self._read_exact(n)
        return body[:1], body[1:]

    def expect_ready(self, test):
        kind, payload = self.recv()
        test.assertEqual(kind, b"R", payload)
        return payload.decode()

    def task(self, task_id, items, **kw):
        self.send(task_frame(task_id, items, **kw))
        kind, payload = self.recv()
        if kind != b"D":
            raise AssertionError("expected D, got %r %r" % (kind, payload))
        return Done(payload)

    def quit(self):
        self.send(QUIT_FRAME)
        return self.wait()

    def close_requests(self):
        if self.req_w is not None:
            os.close(self.req_w)
            self.req_w = None

    def wait(self):
        try:
            return self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("worker did not exit; stderr:\n" + self.stderr())

    def at_eof(self):
        ready, _, _ = select.select([self.rep_r], [], [], TIMEOUT)
        return bool(ready) and not self.buf and os.read(self.rep_r, 1) == b""

    def stdout(self):
        with open(self.stdout_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stderr(self):
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def cleanup(self):
        self.close_requests()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.reader.close()


class ShimTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="fanout_shim_")
        self.workers = []

    def tearDown(self):
        for w in self.workers:
            w.cleanup()
        shutil.rmtree(self.folder, ignore_errors=True)

    def start(self, source, script="score.py", **kw):
        with open(os.path.join(self.folder, script), "w") as f:
            f.write(textwrap.dedent(source))
        w = Worker(self.folder, script=script, **kw)
        self.workers.append(w)
        return w

    def started(self, source, **kw):
        w = self.start(source, **kw)
        w.expect_ready(self)
        return w

    def assertLoadError(self, w, first_line):
        kind, payload = w.recv()
        self.assertEqual(kind, b"L", payload)
        text = payload.decode()
        self.assertEqual(text.splitlines()[0], first_line, text)
        self.assertEqual(w.wait(), 3, w.stderr())
        return text

    # -- ready and rows
    def test_ready_then_one_row_per_file(self):
        w = self.start("""
            import os
            def init():
                pass
            def run(mini_batch):
                return ["%s,%d" % (os.path.basename(p), len(p)) for p in mini_batch]
        """)
        ready = w.expect_ready(self)
        pid, version = ready.split(" ")
        self.assertEqual(int(pid), w.proc.pid)
        self.assertRegex(version, r"^3\.\d+\.\d+")
        d = w.task(41, ["/data/a.jpg", "/data/bb.jpg", "/data/ccc.jpg"], minibatch_index=5)
        self.assertEqual((d.task_id, d.status, d.n_result, d.err), (41, 0, 3, ""))
        self.assertEqual(d.out, b"a.jpg,11\nbb.jpg,12\nccc.jpg,13\n")
        self.assertGreaterEqual(d.run_seconds, 0.0)
        self.assertGreaterEqual(d.cpu_seconds, 0.0)
        self.assertEqual(w.quit(), 0)
        self.assertTrue(w.at_eof())

    def test_list_of_numbers_rows_are_str(self):
        w = self.started("""
            def run(mini_batch):
                return [1, 2.5, -3, None, "x y"]
        """)
        d = w.task(1, ["a", "b", "c", "d", "e"])
        self.assertEqual((d.status, d.n_result), (0, 5))
        self.assertEqual(d.out, b"1\n2.5\n-3\nNone\nx y\n")

    def test_tuple_result(self):
        w = self.started("""
            def run(mini_batch):
                return tuple(p.upper() for p in mini_batch)
        """)
        d = w.task(2, ["a", "\u00e9t\u00e9"])
        self.assertEqual((d.status, d.n_result), (0, 2))
        self.assertEqual(d.out, "A\n\u00c9T\u00c9\n".encode())

    def test_other_sequence_and_dataframe_like_results(self):
        w = self.started("""
            import collections
            class Frame:
                def __init__(self, rows): self.rows = rows
                def __len__(self): return len(self.rows)
                def to_csv(self, sep=",", header=True, index=True):
                    lines = (["a" + sep + "b"] if header else []) + [sep.join(r) for r in self.rows]
                    return "".join(l + "\\n" for l in lines)
            def run(mini_batch):
                if mini_batch[0] == "set":
                    return set(mini_batch)  # not a Sequence: bad return
                if mini_batch[0] == "deque":
                    return collections.deque(mini_batch)  # a registered Sequence
                if mini_batch[0] == "range":
                    return range(3)
                return Frame([(p, p + p) for p in mini_batch])
        """, env={"FANOUT_ROW_SEP": "|", "FANOUT_ROW_HEADER": "1"})
        d = w.task(1, ["x", "y"])
        self.assertEqual((d.status, d.n_result, d.out), (0, 2, b"a|b\nx|xx\ny|yy\n"))
        d = w.task(2, ["range"])
        self.assertEqual((d.status, d.n_result, d.out), (0, 3, b"0\n1\n2\n"))
        d = w.task(3, ["deque", "z"])
        self.assertEqual((d.status, d.n_result, d.out), (0, 2, b"deque\nz\n"))
        d = w.task(4, ["set"])
        self.assertEqual((d.status, d.n_result, d.out), (2, 0, b""))
        self.assertTrue(d.err.startswith("BadReturn: score.py: run() returned set;"), d.err)

    @unittest.skipUnless(_worker_has("pandas"), "the worker's python has no pandas")
    def test_pandas_dataframe_and_numpy_array(self):
        source = """
            import numpy as np
            import pandas as pd
            def run(mini_batch):
                if mini_batch[0] == "array":
                    return np.array([1.5, 2.0, 3.25])
                return pd.DataFrame({"name": mini_batch, "size": [len(p) for p in mini_batch]})
        """
        w = self.started(source)
        d = w.task(1, ["a b", "cc"])
        self.assertEqual((d.status, d.n_result, d.out), (0, 2, b'"a b" 3\ncc 2\n'))
        d = w.task(2, ["array"])
        self.assertEqual((d.status, d.n_result, d.out), (0, 3, b"1.5\n2.0\n3.25\n"))
        w2 = self.started(source, env={"FANOUT_ROW_SEP": ",", "FANOUT_ROW_HEADER": "1"})
        d = w2.task(1, ["x", "yy", "zzz"])
        self.assertEqual((d.status, d.n_result, d.out), (0, 3, b"name,size\nx,1\nyy,2\nzzz,3\n"))
        w3 = self.started(source, env={"FANOUT_APPEND_ROW": "0"})
        d = w3.task(1, ["x", "yy"])
        self.assertEqual((d.status, d.n_result, d.out), (0, 2, b""))

    # -- run signature and context
    def test_two_argument_run_gets_context(self):
        w = self.started("""
            def run(mini_batch, mini_batch_context):
                c = mini_batch_context
                return [repr((c.minibatch_index, c.partition_key_value, c.dataset, c.global_row_offset,
                              list(mini_batch)))]
        """)
        d = w.task(9, ["f1", "f2"], minibatch_index=7,
                   detail={"partition_key_value": {"region": "eu", "year": 2020}})
        self.assertEqual(d.status, 0, d.err)
        self.assertEqual(d.out, repr((7, {"region": "eu", "year": 2020}, "images", None, ["f1", "f2"])).encode()
                         + b"\n")
        d = w.task(10, ["f3"], minibatch_index=8)  # no detail: empty partition_key_value
        self.assertEqual(d.out, repr((8, {}, "images", None, ["f3"])).encode() + b"\n")
        d = w.task(11, ["f4"], minibatch_index=9, detail={"files": 1})  # detail without a key value
        self.assertEqual(d.out, repr((9, {}, "images", None, ["f4"])).encode() + b"\n")

    def test_default_second_parameter_counts_varargs_does_not(self):
        w = self.started("""
            def run(mini_batch, context=None):
                return [type(context).__name__]
        """)
        self.assertEqual(w.task(1, ["a"]).out, b"MiniBatchContext\n")
        w2 = self.started("def run(*args):\n    return [len(args)]\n", script="star.py")
        self.assertEqual(w2.task(1, ["a"]).out, b"1\n")

    def test_run_signature_kinds(self):
        cases = [
            ("method2.py", "class M:\n    def predict(self, mb, ctx):\n        return [type(ctx).__name__]\n"
                           "run = M().predict\n", b"MiniBatchContext\n"),
            ("method1.py", "class M:\n    def predict(self, mb):\n        return [len(mb)]\n"
                           "run = M().predict\n", b"1\n"),
            ("callable1.py", "class R:\n    def __call__(self, mb):\n        return [len(mb)]\nrun = R()\n", b"1\n"),
            ("callable2.py", "class R:\n    def __call__(self, mb, c):\n        return [c.minibatch_index]\n"
                             "run = R()\n", b"0\n"),
            ("posonly.py", "def run(mb, ctx, /):\n    return [ctx.dataset]\n", b"images\n"),
            ("wrapped.py", "import functools\n"
                           "def deco(f):\n"
                           "    @functools.wraps(f)\n"
                           "    def w(*a, **k):\n"
                           "        return f(*a, **k)\n"
                           "    return w\n"
                           "@deco\n"
                           "def run(mb, ctx):\n    return [ctx.dataset]\n", b"images\n"),
            ("lambda.py", "run = lambda mb: mb\n", b"a\n"),
        ]
        for script, source, expected in cases:
            with self.subTest(script=script):
                w = self.started(source, script=script)
                d = w.task(1, ["a"])
                self.assertEqual((d.status, d.out), (0, expected), d.err)

    # -- failures of run()
    def test_exception_reported_and_worker_keeps_serving(self):
        w = self.started("""
            def helper(p):
                raise ValueError("cannot read " + p)
            def run(mini_batch):
                if mini_batch[0] == "bad":
                    helper(mini_batch[0])
                return mini_batch
        """)
        d = w.task(1, ["bad", "x"])
        self.assertEqual((d.task_id, d.status, d.n_result, d.out), (1, 1, 0, b""))
        lines = d.err.splitlines()
        self.assertEqual(lines[0], "ValueError: cannot read bad")
        self.assertIn("Traceback (most recent call last):", d.err)
        self.assertIn("score.py", d.err)
        self.assertIn("in helper", d.err)
        self.assertNotIn("fanout_worker.py", d.err)
        d = w.task(2, ["good"])
        self.assertEqual((d.task_id, d.status, d.n_result, d.out), (2, 0, 1, b"good\n"))

    def test_none_is_bad_return_naming_the_script(self):
        w = self.started("""
            def run(mini_batch):
                if mini_batch:
                    return {"not": "a list"}
        """)
        d = w.task(3, [])
        self.assertEqual((d.status, d.n_result, d.out), (2, 0, b""))
        self.assertEqual(d.err.splitlines()[0],
                         "BadReturn: score.py: run() returned None; expected a list, tuple or pandas DataFrame")
        d = w.task(4, ["a"])
        self.assertEqual(d.status, 2)
        self.assertTrue(d.err.startswith("BadReturn: score.py: run() returned dict;"), d.err)

    def test_shorter_result(self):
        w = self.started("""
            def run(mini_batch):
                return mini_batch[:1]
        """)
        d = w.task(5, ["a", "b", "c"])
        self.assertEqual((d.status, d.n_result, d.out), (0, 1, b"a\n"))

    def test_system_exit_in_run_reports_then_exits_4(self):
        w = self.started("""
            import sys
            def run(mini_batch):
                sys.exit("bye")
            def shutdown():
                open("shutdown.marker", "w").close()
        """)
        d = w.task(6, ["a"])
        self.assertEqual(d.status, 3)  # STATUS_EXITING: the worker exits after this reply
        self.assertEqual(d.err.splitlines()[0], "SystemExit: bye")
        self.assertEqual(w.wait(), 4)
        self.assertFalse(os.path.exists(os.path.join(self.folder, "shutdown.marker")))

    def test_timings(self):
        w = self.started("""
            import time
            def run(mini_batch):
                if mini_batch[0] == "sleep":
                    time.sleep(0.2)
                else:
                    end = time.process_time() + 0.2
                    while time.process_time() < end:
                        pass
                return mini_batch
        """)
        d = w.task(1, ["sleep"])
        self.assertGreaterEqual(d.run_seconds, 0.19)
        self.assertLess(d.cpu_seconds, 0.1)
        d = w.task(2, ["spin"])
        self.assertGreaterEqual(d.cpu_seconds, 0.19)
        self.assertGreaterEqual(d.run_seconds, 0.19)

    # -- output modes
    def test_summary_only_has_no_output(self):
        w = self.started("""
            def run(mini_batch):
                return [p * 3 for p in mini_batch]
        """, env={"FANOUT_APPEND_ROW": "0"})
        d = w.task(7, ["a", "b"])
        self.assertEqual((d.status, d.n_result, d.out, d.err), (0, 2, b"", ""))

    def test_empty_mini_batch(self):
        w = self.started("""
            seen = []
            def run(mini_batch):
                seen.append(mini_batch)
                return [repr(mini_batch)] if len(seen) > 1 else []
        """)
        d = w.task(8, [])
        self.assertEqual((d.status, d.n_result, d.out), (0, 0, b""))
        d = w.task(9, [])
        self.assertEqual((d.status, d.n_result, d.out), (0, 1, b"[]\n"))

    def test_tabular_detail_reads_only_its_byte_range(self):
        w = self.started("""
            def run(mini_batch):
                if isinstance(mini_batch, list):
                    return mini_batch
                return [repr(list(mini_batch.columns)), repr(mini_batch.values.tolist())]
        """)
        data = os.path.join(self.folder, "t.csv")
        with open(data, "wb") as f:
            f.write(b'a,b,c\n1,x,"q,1"\n2,y,"q\n2"\n3,z,q3\n')
        begin = len(b"a,b,c\n1,x,\"q,1\"\n")
        end = begin + len(b'2,y,"q\n2"\n')
        detail = {"kind": "tabular", "delimiter": ",", "encoding": "utf8",
                  "parts": [{"file": data, "begin": begin, "end": end, "columns": ["a", "b", "c"],
                             "path_values": {"day": "mon"}}],
                  "drop_columns": ["b"], "global_row_offset": 1}
        d = w.task(1, [""], detail=detail)
        if has_pandas():
            self.assertEqual(d.status, 0, d.err)
            self.assertEqual(d.out, b"['a', 'c', 'day']\n[[2, 'q\\n2', 'mon']]\n")
        else:
            self.assertEqual(d.status, 1)
            self.assertIn("pandas", d.err)
        self.assertEqual(w.task(2, ["f"]).out, b"f\n")

    def test_tabular_file_name_that_is_not_utf8(self):
        if not has_pandas():
            self.skipTest("the worker's interpreter has no pandas")
        w = self.started("""
            def run(mini_batch):
                return [repr(mini_batch.values.tolist())]
        """)
        data = os.path.join(os.fsencode(self.folder), b"Z\xfcrich.csv")
        with open(data, "wb") as f:
            f.write(b"1,a\n")
        detail = ('{"kind": "tabular", "parts": [{"file": "%s", "begin": 0, "end": 4, '
                  '"columns": ["n", "s"]}]}' % os.fsdecode(data)).encode("utf-8", "surrogateescape")
        d = w.task(1, [""], detail=detail)
        self.assertEqual(d.status, 0, d.err)
        self.assertEqual(d.out, b"[[1, 'a']]\n")

    def test_tabular_file_changed_since_listing_is_input_changed(self):
        # A table truncated or replaced after the client listed it was read silently (a row cut
        # short, rows of another version): the task fails as INPUT_CHANGED, naming the file.
        if not has_pandas():
            self.skipTest("the worker's interpreter has no pandas")
        w = self.started("""
            def run(mini_batch):
                return [repr(mini_batch.values.tolist())]
        """)
        data = os.path.join(self.folder, "c.csv")
        with open(data, "wb") as f:
            f.write(b"1,a\n2,b\n")
        st = os.stat(data)
        part = {"file": data, "begin": 4, "end": 8, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                "columns": ["n", "s"]}
        detail = {"kind": "tabular", "parts": [part]}
        d = w.task(1, [""], detail=detail)
        self.assertEqual((d.status, d.out), (0, b"[[2, 'b']]\n"), d.err)
        os.truncate(data, 6)
        d = w.task(2, [""], detail=detail)
        self.assertEqual(d.status, 1)
        self.assertTrue(d.err.startswith("INPUT_CHANGED: %s: changed since it was listed: expected "
                                         "size 8" % data), d.err)
        self.assertIn("found size 6", d.err)
        del part["size"]  # an older client: only the short read is seen
        d = w.task(3, [""], detail=detail)
        self.assertEqual(d.status, 1)
        self.assertTrue(d.err.startswith("INPUT_CHANGED: %s: bytes 4 to 8: expected 4 bytes, "
                                         "found 2" % data), d.err)

    def test_tabular_partition_rows_are_filtered(self):
        if not has_pandas():
            self.skipTest("the worker's interpreter has no pandas")
        w = self.started("""
            def run(mini_batch, ctx):
                return [repr(ctx.partition_key_value), repr(mini_batch["v"].tolist())]
        """)
        data = os.path.join(self.folder, "p.csv")
        with open(data, "wb") as f:
            f.write(b"k,v\n01,1\n2,2\n01,3\n")
        detail = {"kind": "tabular", "parts": [{"file": data, "begin": 4, "end": 19,
                                                 "columns": ["k", "v"]}],
                  "partition_key_value": {"k": "01"}}
        d = w.task(1, ["", ""], detail=detail)
        self.assertEqual(d.status, 0, d.err)
        self.assertEqual(d.out, b"{'k': '01'}\n[1, 3]\n")

    # -- loading
    def test_init_raising_is_load_error(self):
        w = self.start("""
            def init():
                1 / 0
            def run(mini_batch):
                return mini_batch
        """)
        text = self.assertLoadError(w, "ZeroDivisionError: division by zero")
        self.assertIn("in init", text)
        self.assertNotIn("fanout_worker.py", text)

    def test_script_without_run_is_load_error(self):
        w = self.start("""
            def init():
                pass
        """)
        self.assertLoadError(w, "LoadError: score.py does not define run(mini_batch)")

    def test_run_not_callable_is_load_error(self):
        w = self.start("run = 3\n")
        self.assertLoadError(w, "LoadError: score.py: run is not callable (it is a int)")

    def test_import_errors_are_load_errors(self):
        w = self.start("import no_such_module_fanout\n")
        self.assertLoadError(w, "ModuleNotFoundError: No module named 'no_such_module_fanout'")
        w = self.start("def run(mini_batch:\n", script="broken.py")
        kind, payload = w.recv()
        self.assertEqual(kind, b"L")
        self.assertTrue(payload.decode().startswith("SyntaxError: "), payload)
        self.assertEqual(w.wait(), 3)

    def test_argparse_exit_at_import_is_load_error(self):
        w = self.start("""
            import argparse
            p = argparse.ArgumentParser()
            p.add_argument("--model", required=True)
            args = p.parse_args()
            def run(mini_batch):
                return mini_batch
        """, args=["--other", "1"])
        self.assertLoadError(w, "SystemExit: 2")
        self.assertIn("--model", w.stderr())

    def test_sys_argv_and_sys_path(self):
        os.makedirs(os.path.join(self.folder, "sub"))
        with open(os.path.join(self.folder, "helper_mod.py"), "w") as f:
            f.write("VALUE = 'from code folder'\n")
        with open(os.path.join(self.folder, "sub", "sibling_mod.py"), "w") as f:
            f.write("VALUE = 'next to script'\n")
        w = self.started("""
            import argparse, os, sys, json
            import helper_mod, sibling_mod
            ARGV = list(sys.argv)
            p = argparse.ArgumentParser()
            p.add_argument("--model")
            ARGS, REST = p.parse_known_args()
            def run(mini_batch):
                return [json.dumps(ARGV), ARGS.model, json.dumps(REST), helper_mod.VALUE, sibling_mod.VALUE,
                        __name__, os.getcwd()]
        """, script=os.path.join("sub", "score.py"), args=["--model", "m.pkl", "--threshold=0.5", "x"])
        rows = w.task(1, ["a"]).out.decode().splitlines()
        script = os.path.join(self.folder, "sub", "score.py")
        self.assertEqual(json.loads(rows[0]), [script, "--model", "m.pkl", "--threshold=0.5", "x"])
        self.assertEqual(rows[1], "m.pkl")
        self.assertEqual(json.loads(rows[2]), ["--threshold=0.5", "x"])
        self.assertEqual(rows[3:6], ["from code folder", "next to script", "score"])
        self.assertEqual(os.path.realpath(rows[6]), os.path.realpath(self.folder))

    def test_sys_path_puts_the_shim_folder_after_the_users_folders(self):
        # docs/worker-pipe.md: the code folder, the entry script's folder, then the shim's folder
        # (where PYTHONPATH put it, before site-packages), once.
        os.makedirs(os.path.join(self.folder, "sub"))
        w = self.started("""
            import json, sys
            def run(mini_batch):
                return [json.dumps(sys.path)]
        """, script=os.path.join("sub", "score.py"))
        path = [os.path.realpath(p) for p in json.loads(w.task(1, ["a"]).out.decode())]
        shim = os.path.realpath(SHIM_DIR)
        self.assertEqual(path[:3], [os.path.realpath(self.folder),
                                    os.path.realpath(os.path.join(self.folder, "sub")), shim])
        self.assertEqual(path.count(shim), 1)

    def test_code_folder_kept_off_sys_path_for_executor_jobs(self):
        # FANOUT_CODE_ON_SYS_PATH=0 (fanout.Executor's jobs, whose working folder is the
        # caller's): a base64.py planted there is not imported, nor is the folder on sys.path,
        # even through an empty PYTHONPATH element; the entry script's folder still leads.
        os.makedirs(os.path.join(self.folder, "sub"))
        with open(os.path.join(self.folder, "base64.py"), "w") as f:
            f.write("PLANTED = True\n")
        w = self.started("""
            import base64, json, sys
            def run(mini_batch):
                return [json.dumps(sys.path), str(hasattr(base64, "PLANTED"))]
        """, script=os.path.join("sub", "score.py"),
            env={"FANOUT_CODE_ON_SYS_PATH": "0", "PYTHONPATH": SHIM_DIR + "::"})
        rows = w.task(1, ["a"]).out.decode().splitlines()
        path = json.loads(rows[0])
        self.assertEqual(rows[1], "False")
        self.assertEqual(os.path.realpath(path[0]),
                         os.path.realpath(os.path.join(self.folder, "sub")))
        self.assertNotIn(os.path.realpath(self.folder), [os.path.realpath(p) for p in path])
        self.assertNotIn("", path)

    # -- stdout, shutdown, EOF
    def test_print_goes_to_stdout_and_frames_survive(self):
        w = self.started("""
            import sys
            print("imported")
            def init():
                print("init", flush=False)
            def run(mini_batch):
                print("run got", mini_batch)
                print("x" * 100000)
                sys.stderr.write("to stderr\\n")
                return mini_batch
        """)
        for i in range(3):
            d = w.task(i, ["item%d" % i])
            self.assertEqual((d.task_id, d.status, d.out), (i, 0, ("item%d\n" % i).encode()))
        self.assertEqual(w.quit(), 0)
        out = w.stdout()
        self.assertTrue(out.startswith("imported\ninit\nrun got ['item0']\n"), out[:100])
        self.assertIn("run got ['item2']", out)
        self.assertEqual(w.stderr().count("to stderr"), 3)

    def test_quit_calls_shutdown(self):
        w = self.started("""
            def run(mini_batch):
                return mini_batch
            def shutdown():
                with open("shutdown.marker", "w") as f:
                    f.write("done")
        """)
        self.assertEqual(w.task(1, ["a"]).status, 0)
        self.assertEqual(w.quit(), 0)
        with open(os.path.join(self.folder, "shutdown.marker")) as f:
            self.assertEqual(f.read(), "done")

    def test_eof_calls_shutdown_and_shutdown_error_is_not_fatal(self):
        w = self.started("""
            def run(mini_batch):
                return mini_batch
            def shutdown():
                open("shutdown.marker", "w").close()
                raise RuntimeError("cleanup failed")
        """)
        w.close_requests()
        self.assertEqual(w.wait(), 0)
        self.assertTrue(os.path.exists(os.path.join(self.folder, "shutdown.marker")))
        self.assertIn("RuntimeError: cleanup failed", w.stderr())

    def test_frames_split_across_writes_and_batched(self):
        w = self.started("""
            def run(mini_batch):
                return mini_batch
        """)
        frame = task_frame(1, ["slow", "write"])
        for i in range(len(frame)):
            w.send(frame[i:i + 1])
            if i % 7 == 0:
                time.sleep(0.001)
        d = Done(w.recv()[1])
        self.assertEqual((d.task_id, d.out), (1, b"slow\nwrite\n"))
        w.send(b"".join(task_frame(i, ["b%d" % i]) for i in range(2, 50)))
        for i in range(2, 50):
            d = Done(w.recv()[1])
            self.assertEqual((d.task_id, d.out), (i, ("b%d\n" % i).encode()))

    def test_run_markers_surround_run_only_when_asked(self):
        source = """
            def run(mini_batch):
                if mini_batch[0] == "bad":
                    raise ValueError("bad")
                return mini_batch
        """
        w = self.started(source, env={"FANOUT_RUN_MARKERS": "1"})
        # Batched, as when the pool queues a task in a busy worker's pipe: each task's S and E
        # come before its D, and nothing of the next task before that D.
        w.send(task_frame(7, ["a"]) + task_frame(8, ["bad"]) + task_frame(9, ["c"]))
        seen = []
        for _ in range(9):
            kind, payload = w.recv()
            if kind in (b"S", b"E"):
                self.assertEqual(len(payload), 8, payload)
                seen.append((kind, MARK.unpack(payload)[0]))
            else:
                d = Done(payload)
                seen.append((kind, d.task_id, d.status))
        self.assertEqual(seen, [(b"S", 7), (b"E", 7), (b"D", 7, 0),
                                (b"S", 8), (b"E", 8), (b"D", 8, 1),
                                (b"S", 9), (b"E", 9), (b"D", 9, 0)])
        self.assertEqual(w.quit(), 0)
        self.assertTrue(w.at_eof())

        # Without FANOUT_RUN_MARKERS (or with another value) only D frames come back.
        for env in ({}, {"FANOUT_RUN_MARKERS": "0"}):
            w = self.started(source, env=env)
            w.send(task_frame(1, ["a"]) + task_frame(2, ["bad"]))
            self.assertEqual([w.recv()[0] for _ in range(2)], [b"D", b"D"])
            self.assertEqual(w.quit(), 0)
            self.assertTrue(w.at_eof())

    def test_non_utf8_file_names_round_trip(self):
        w = self.started("""
            import os
            def run(mini_batch):
                return [os.fsencode(p).hex() for p in mini_batch] + mini_batch
        """)
        raw = b"/data/caf\xe9.txt"
        body = b"T" + TASK.pack(1, 0, 0, 1) + raw
        w.send(LEN.pack(len(body)) + body)
        d = Done(w.recv()[1])
        self.assertEqual(d.status, 0, d.err)
        self.assertEqual(d.out, raw.hex().encode() + b"\n" + raw + b"\n")

    # -- EntryScript
    def test_entry_script_logger_and_dirs(self):
        w = self.started("""
            import os
            from azureml_user.parallel_run import EntryScript
            import fanout_runtime
            def init():
                EntryScript().logger.info("hello from init")
            def run(mini_batch):
                e = EntryScript()
                e.get_logger().debug("not shown at INFO")
                e.logger.warning("processing %d files", len(mini_batch))
                assert fanout_runtime.EntryScript is EntryScript
                return [e.output_dir, str(os.path.isdir(e.output_dir)), e.working_dir, e.agent_name,
                        e.node_id, e.log_dir, os.environ.get("AZUREML_BI_OUTPUT_PATH")]
        """)
        rows = w.task(1, ["a", "b"]).out.decode().splitlines()
        out_dir = os.path.join(self.folder, "out")
        self.assertEqual(rows[0], out_dir)
        self.assertEqual(rows[1], "True")
        self.assertEqual(os.path.realpath(rows[2]), os.path.realpath(self.folder))
        self.assertEqual(rows[3:6], ["process001", "node-a", os.path.join(self.folder, "logs")])
        self.assertEqual(rows[6], out_dir)
        self.assertEqual(w.quit(), 0)
        log = os.path.join(self.folder, "logs", "user", "entry_script_log", "node-a", "process001.log.txt")
        with open(log) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 2, lines)
        first, second = lines[0].split("|"), lines[1].split("|")
        self.assertEqual(first[1:4], ["process001", "INFO", str(w.proc.pid)])
        self.assertTrue(first[4].isdigit(), first)
        self.assertEqual(first[5:], ["init():6", "hello from init"])
        self.assertEqual(second[1:3], ["process001", "WARNING"])
        self.assertEqual(second[5:], ["run():10", "processing 2 files"])

    def test_entry_script_logging_level(self):
        w = self.started("""
            from fanout_runtime import EntryScript
            def run(mini_batch):
                EntryScript().logger.debug("debug line")
                return []
        """, env={"FANOUT_LOGGING_LEVEL": "DEBUG"})
        w.task(1, [])
        w.quit()
        log = os.path.join(self.folder, "logs", "user", "entry_script_log", "node-a", "process001.log.txt")
        with open(log) as f:
            self.assertIn("|DEBUG|", f.read())

    def test_entry_script_without_environment(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FANOUT_", "AZUREML_"))}
        env["PYTHONPATH"] = SHIM_DIR
        env["TMPDIR"] = self.folder
        code = ("from azureml_user.parallel_run import EntryScript as E\n"
                "e = E(); e.logger.info('x'); import os\n"
                "print(os.path.isdir(e.output_dir), e.agent_name, e.log_dir)\n")
        out = subprocess.check_output([PYTHON, "-c", code], env=env, cwd=self.folder).decode()
        exists, agent, log_dir = out.split()
        self.assertEqual(exists, "True")
        self.assertTrue(agent.startswith("pid"))
        self.assertTrue(log_dir.startswith(self.folder))

    def test_shim_without_pipes_exits_2(self):
        # close_fds (the default) leaves the child without fds 3 and 4.
        proc = subprocess.run([PYTHON, SHIM], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=dict(os.environ, FANOUT_ENTRY_SCRIPT="/nonexistent.py"), timeout=TIMEOUT)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn(b"fd 3", proc.stderr)

    # -- throughput (reported, not asserted)
    def test_zz_noop_throughput(self):
        count = int(os.environ.get("FANOUT_BENCH_TASKS", "20000"))
        if count <= 0:
            self.skipTest("FANOUT_BENCH_TASKS=0")
        w = self.started("""
            def run(mini_batch):
                return mini_batch
        """)
        for label, items, reply_size in (("0 items, run returns []", [], 4 + 1 + DONE.size),
                                         ("1 item, run returns it (1 row)", ["f"], 4 + 1 + DONE.size + 2)):
            rate = _throughput(w, count, items, reply_size)
            sys.stderr.write("\n  no-op throughput (%s, worker %s): %d tasks in %.3f s = %.0f tasks/s\n"
                             % (label, os.path.basename(PYTHON), count, count / rate, rate))


def _throughput(w, count, items, reply_size):
    """Pipelined: a thread writes all T frames while this thread reads the D frames."""
    chunk = 1000
    frames = [b"".join(task_frame(i, items) for i in range(start, min(start + chunk, count)))
              for start in range(0, count, chunk)]

    def writer():
        for f in frames:
            w.send(f)

    t = threading.Thread(target=writer)
    begin = time.perf_counter()
    t.start()
    done = 0
    while done < count:
        n = min(chunk, count - done)
        data = w._read_exact(n * reply_size)
        for off in range(0, len(data), reply_size):
            if data[off + 4:off + 5] != b"D" or data[off + 13] != 0:
                raise AssertionError("bad reply in throughput run")
        done += n
    elapsed = time.perf_counter() - begin
    t.join()
    return count / elapsed


if __name__ == "__main__":
    unittest.main()
