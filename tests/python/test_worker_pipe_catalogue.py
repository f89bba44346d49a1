#!/usr/bin/env python3
"""Holds the Python shim (pool/python/fanout_worker.py) against pool/worker_pipe.hpp.

The C++ side is read through worker_pipe_catalogue (tests/python/worker_pipe_catalogue.cpp, built
by Meson), which prints the header's kinds, statuses and frame layouts, and encodes and decodes
frames with the header's own helpers. A change of a kind, a status, an offset or a field's type
on either side fails here.

    python3 tests/python/test_worker_pipe_catalogue.py <path of worker_pipe_catalogue> [-v]

FANOUT_PIPE_CATALOGUE may name the program instead of the first argument.
"""

import importlib.util
import json
import os
import struct
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHIM = os.path.join(ROOT, "pool", "python", "fanout_worker.py")
CATALOGUE = os.environ.get("FANOUT_PIPE_CATALOGUE", "")

# struct codes of the shim -> the header's type names
TYPES = {"Q": "u64", "I": "u32", "B": "u8", "d": "f64", "c": "kind"}


def load_shim():
    spec = importlib.util.spec_from_file_location("fanout_worker_under_test", SHIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # main() runs only as __main__
    return module


def fields(fmt, names, start):
    """{name: [offset, type]} of a struct format whose first field sits at byte `start`."""
    assert fmt[0] == "<", fmt
    codes = fmt[1:]
    assert len(codes) == len(names), (fmt, names)
    out = {}
    for i, (code, name) in enumerate(zip(codes, names)):
        out[name] = [start + struct.calcsize("<" + codes[:i]), TYPES.get(code, code)]
    return out


def catalogue(*args):
    return subprocess.run([CATALOGUE] + list(args), check=True, stdout=subprocess.PIPE,
                          universal_newlines=True).stdout


class CatalogueTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.shim = load_shim()
        cls.cat = json.loads(catalogue())

    def test_framing(self):
        self.assertEqual(self.shim._LEN.size, self.cat["length_bytes"])
        self.assertEqual(self.cat["kind_offset"], self.cat["length_bytes"])
        self.assertEqual(self.cat["payload_offset"], self.cat["kind_offset"] + 1)

    def test_kinds(self):
        s = self.shim
        shim_kinds = {"Task": s.KIND_TASK, "Quit": s.KIND_QUIT, "Ready": s.KIND_READY,
                      "LoadError": s.KIND_LOAD_ERROR, "RunStarted": s.KIND_RUN_STARTED,
                      "RunEnded": s.KIND_RUN_ENDED, "Done": s.KIND_DONE}
        self.assertEqual({k: v.decode() for k, v in shim_kinds.items()}, self.cat["kinds"])

    def test_done_status(self):
        s = self.shim
        self.assertEqual({"Ok": s.STATUS_OK, "Raised": s.STATUS_EXCEPTION,
                          "BadReturn": s.STATUS_BAD_RETURN,
                          "Exiting": s.STATUS_EXITING}, self.cat["done_status"])

    def test_input_changed_category(self):
        self.assertEqual(self.shim.INPUT_CHANGED, self.cat["input_changed_category"])

    def test_task_layout(self):
        s = self.shim
        cat = dict(self.cat["task"])
        header = cat.pop("header_bytes")
        # The shim unpacks the T header from the kind byte on: its fields start after it.
        self.assertEqual(fields(_format(s._TASK), ["task_id", "minibatch_index", "detail_len",
                                                   "n_items"], self.cat["payload_offset"]), cat)
        self.assertEqual(self.cat["length_bytes"] + s._TASK_BODY_OFFSET, header)

    def test_done_layout(self):
        s = self.shim
        cat = dict(self.cat["done"])
        header = cat.pop("header_bytes")
        got = fields(_format(s._DONE), ["length", "kind", "task_id", "status", "n_result", "out_len",
                                        "run_seconds", "cpu_seconds"], 0)
        self.assertEqual(got.pop("length"), [0, "u32"])
        self.assertEqual(got.pop("kind"), [self.cat["kind_offset"], "kind"])
        self.assertEqual(got, cat)
        self.assertEqual(s._DONE.size, header)
        self.assertEqual(s._DONE_FIXED, header - self.cat["length_bytes"])

    def test_marker_layout(self):
        s = self.shim
        got = fields(_format(s._MARK), ["length", "kind", "task_id"], 0)
        self.assertEqual(got.pop("length"), [0, "u32"])
        self.assertEqual(got.pop("kind"), [self.cat["kind_offset"], "kind"])
        self.assertEqual(got, {"task_id": self.cat["marker"]["task_id"]})
        self.assertEqual(s._MARK.size, self.cat["marker"]["frame_bytes"])
        self.assertEqual(s._MARK_LEN, self.cat["marker"]["frame_bytes"] - self.cat["length_bytes"])

    def test_shim_frames_decode_with_the_header(self):
        s = self.shim
        done = s._done_frame(7, s.STATUS_BAD_RETURN, 3, b"a\nb\n", "BadReturn: x", 0.5, 0.25)
        marks = s._MARK.pack(s._MARK_LEN, s.KIND_RUN_STARTED, 7) + s._MARK.pack(
            s._MARK_LEN, s.KIND_RUN_ENDED, 7)
        got = json.loads(catalogue("decode", (marks + done).hex()))
        self.assertEqual([f["kind"] for f in got], ["S", "E", "D"])
        self.assertEqual([f["task_id"] for f in got], [7, 7, 7])
        d = got[2]
        self.assertEqual((d["status"], d["n_result"], d["output"], d["error"]),
                         (2, 3, "a\nb\n", "BadReturn: x"))
        self.assertEqual((float(d["run_seconds"]), float(d["cpu_seconds"])), (0.5, 0.25))

    def test_rows_beyond_a_reply_fail_located(self):
        """Rows longer than the pool accepts from a worker fail the task as ResultTooLarge."""
        s = self.shim
        self.assertEqual(s._MAX_FRAME, 512 * 1024 * 1024)  # pool/worker_pipe.hpp kMaxReplyLength
        saved, s._MAX_FRAME = s._MAX_FRAME, 200
        try:
            done = s._done_frame(7, s.STATUS_OK, 1, b"x" * 300, "", 0.5, 0.25)
        finally:
            s._MAX_FRAME = saved
        d = json.loads(catalogue("decode", done.hex()))[0]
        self.assertEqual((d["status"], d["n_result"], d["output"]), (1, 0, ""))
        self.assertTrue(d["error"].startswith("ResultTooLarge: the mini-batch's rows are 300 bytes; "
                                              "a reply to the pool holds at most 200"), d["error"])

    def test_header_frames_serve_the_real_shim(self):
        """T and Q frames the header writes drive a real shim; its replies decode with the header."""
        sys.path.insert(0, HERE)
        import test_worker_shim as harness  # the shim's own test harness: pipes on fds 3 and 4

        with tempfile.TemporaryDirectory() as folder:
            with open(os.path.join(folder, "score.py"), "w") as f:
                f.write(textwrap.dedent("""\
                    def run(mini_batch, ctx):
                        return ["%s@%d" % (x, ctx.minibatch_index) for x in mini_batch]
                    """))
            w = harness.Worker(folder, env={"FANOUT_RUN_MARKERS": "1"})
            try:
                frames = [w.recv()]
                w.send(bytes.fromhex(catalogue("task", "41", "6", "", "a", "b").strip()))
                frames += [w.recv() for _ in range(3)]
                raw = b"".join(struct.pack("<I", len(k + p)) + k + p for k, p in frames)
                got = json.loads(catalogue("decode", raw.hex()))
                self.assertEqual([f["kind"] for f in got], ["R", "S", "E", "D"])
                self.assertEqual([f.get("task_id") for f in got[1:]], [41, 41, 41])
                self.assertEqual((got[3]["status"], got[3]["n_result"], got[3]["output"]),
                                 (0, 2, "a@6\nb@6\n"))
                w.send(bytes.fromhex(catalogue("quit").strip()))
                self.assertEqual(w.wait(), 0)
            finally:
                w.cleanup()


def _format(st):
    f = st.format
    return f if isinstance(f, str) else f.decode()


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        CATALOGUE = sys.argv.pop(1)
    if not CATALOGUE:
        sys.exit("usage: test_worker_pipe_catalogue.py <worker_pipe_catalogue> [-v]")
    unittest.main()
