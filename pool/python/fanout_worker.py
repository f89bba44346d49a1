"""fanout worker shim: hosts one user entry script in one worker process.

Started by fanout-pool as

    <python> -u <shim_dir>/fanout_worker.py [user args...]

with fd 3 = the pipe it reads requests from and fd 4 = the pipe it writes
replies to. stdin/stdout/stderr belong to the user's script. The frames are
defined by pool/worker_pipe.hpp and described in docs/worker-pipe.md; the
constants below are checked against the header by
tests/python/test_worker_pipe_catalogue.py.

Only the Python standard library is needed (pandas only for tabular input),
and any python3 >= 3.8 works. The per-task path is kept short on purpose:
one buffered read per frame, struct packing, one os.write per reply, no json
for plain file mini-batches, no per-task logging.
"""

import importlib.machinery
import importlib.util
import json
import os
import struct
import sys
import time
import traceback
import types

REQUEST_FD = 3
REPLY_FD = 4

# Exit codes (see docs/worker-pipe.md).
EXIT_OK = 0
EXIT_USAGE = 2
EXIT_LOAD_ERROR = 3
EXIT_RUN_FATAL = 4
EXIT_PROTOCOL = 5

# Task status in a D frame (DoneStatus).
STATUS_OK = 0
STATUS_EXCEPTION = 1
STATUS_BAD_RETURN = 2
STATUS_EXITING = 3  # as STATUS_EXCEPTION, and the worker exits after this reply

# Frame kinds (FrameKind): every frame is a u32 length, then the kind, then its payload.
KIND_TASK = b"T"  # pool -> worker
KIND_QUIT = b"Q"  # pool -> worker
KIND_READY = b"R"
KIND_LOAD_ERROR = b"L"
KIND_RUN_STARTED = b"S"  # only with FANOUT_RUN_MARKERS=1
KIND_RUN_ENDED = b"E"  # likewise
KIND_DONE = b"D"
# T payload header after the kind byte (TaskLayout).
_TASK = struct.Struct("<QQII")  # task_id, minibatch_index, detail_len, n_items
_TASK_BODY_OFFSET = 1 + _TASK.size  # 25: where the detail starts, counted from the kind byte
# A whole D frame's header (DoneLayout): length, kind, task_id, status, n_result, out_len, run_s,
# cpu_s.
_DONE = struct.Struct("<IcQBQQdd")
_DONE_FIXED = _DONE.size - 4  # bytes counted by the length field before output: 42
# A whole S or E frame (MarkerLayout): length, kind, task_id.
_MARK = struct.Struct("<IcQ")
_MARK_LEN = _MARK.size - 4  # 9
_LEN = struct.Struct("<I")
# The longest N the pool accepts (pool/worker_pipe.hpp kMaxReplyLength): a longer reply would be
# taken for a broken worker.
_MAX_FRAME = 512 * 1024 * 1024

_EXPECTED = "expected a list, tuple or pandas DataFrame"

# The error category of a mini-batch whose input changed after the client listed it
# (pool/worker_pipe.hpp kInputChangedCategory); the interchange does not retry it.
INPUT_CHANGED = "INPUT_CHANGED"

# Frames whose code lives in this file (or in importlib's frozen bootstrap)
# are left out of the tracebacks shown to users.
_SHIM_FILE = (lambda: None).__code__.co_filename


class MiniBatchContext(object):
    """The second argument of run(mini_batch, mini_batch_context)."""

    __slots__ = ("partition_key_value", "minibatch_index", "dataset", "global_row_offset")

    def __init__(self, partition_key_value, minibatch_index, dataset, global_row_offset=None):
        self.partition_key_value = partition_key_value
        self.minibatch_index = minibatch_index
        self.dataset = dataset
        self.global_row_offset = global_row_offset

    def __repr__(self):
        return "MiniBatchContext(partition_key_value=%r, minibatch_index=%r, dataset=%r, global_row_offset=%r)" % (
            self.partition_key_value, self.minibatch_index, self.dataset, self.global_row_offset)


class ProtocolError(Exception):
    pass


class InputChanged(Exception):
    """The input of a mini-batch is not what the client listed: reported as INPUT_CHANGED."""


def _check_listed(f, part, begin, end, data):
    """Raises InputChanged when the open file `f` is not the one listed or `data` is short.

    The client records each file's size and mtime_ns when it lists it (docs/worker-pipe.md,
    "Changed input"); a detail without them (an older client) is read unchecked, but a short
    read is always an error.
    """
    name = part["file"]
    if "size" in part:
        st = os.fstat(f.fileno())
        size, mtime_ns = int(part["size"]), int(part.get("mtime_ns", st.st_mtime_ns))
        if st.st_size != size or st.st_mtime_ns != mtime_ns:
            raise InputChanged("%s: changed since it was listed: expected size %d and mtime_ns %d, "
                               "found size %d and mtime_ns %d" % (name, size, mtime_ns, st.st_size,
                                                                  st.st_mtime_ns))
    if len(data) != end - begin:
        raise InputChanged("%s: bytes %d to %d: expected %d bytes, found %d (the file is %d bytes "
                           "now)" % (name, begin, end, end - begin, len(data),
                                     os.fstat(f.fileno()).st_size))


# MLTable encoding names -> Python codec names.
_ENCODINGS = {
    "utf8": "utf-8", "utf8bom": "utf-8-sig", "iso88591": "iso-8859-1", "latin1": "latin-1",
    "ascii": "ascii", "windows1252": "cp1252", "utf16": "utf-16", "utf32": "utf-32",
}
# pandas' default missing-value strings, without "" (for empty_as_string: true).
_NA_NOT_EMPTY = ["#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
                 "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "n/a", "nan", "null"]


def _json_lines_frame(part, data, encoding, detail):
    """One part of a read_json_lines table: a line per row, each a JSON object.

    An invalid line (not JSON, or not an object) fails the mini-batch naming the file and
    line, or is left out with invalid_lines: drop.
    """
    import json

    import pandas as pd

    text = data.decode(encoding)
    line = int(part.get("line") or 1) - 1  # the line before the part's first
    drop = detail.get("invalid_lines") == "drop"
    records = []
    for raw in text.split("\n"):
        line += 1
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
            if not isinstance(rec, dict):
                raise ValueError("a JSON %s, not an object" % type(rec).__name__)
        except ValueError as e:
            if drop:
                _REMOVED[0] += 1
                continue
            raise ValueError("%s: line %d: not a JSON object (%s); read_json_lines.invalid_lines: "
                             "drop leaves such lines out" % (part["file"], line, e))
        records.append(rec)
    df = pd.DataFrame.from_records(records) if records else pd.DataFrame()
    for k, v in (part.get("path_values") or {}).items():
        df[k] = v
    if detail.get("include_path_column"):
        df["Path"] = part["file"]
    return df


# Rows of the current tabular mini-batch that the table's own steps left out (filter,
# invalid_lines: drop): they are items, counted as succeeded without a result (n_result).
_REMOVED = [0]

_TRUE = ["true", "True", "TRUE", "1", "yes", "Yes", "YES"]
_FALSE = ["false", "False", "FALSE", "0", "no", "No", "NO"]


def _convert(df, entry):
    """convert_column_types: one {columns, type, ...} entry, as the mltable library converts."""
    import pandas as pd

    kind = entry.get("type")
    for c in entry.get("columns") or []:
        if c not in df.columns:
            raise ValueError("convert_column_types: '%s' is not a column (columns: %s)"
                             % (c, ", ".join(map(str, df.columns))))
        s = df[c]
        if kind == "int":
            n = pd.to_numeric(s, errors="coerce")
            df[c] = n.astype("int64") if not n.isna().any() else n.astype("Int64")
        elif kind == "float":
            df[c] = pd.to_numeric(s, errors="coerce").astype("float64")
        elif kind == "string":
            df[c] = s.map(lambda v: v if pd.isna(v) else str(v)).astype(object)
        elif kind == "boolean":
            true_values = [str(v) for v in entry.get("true_values") or _TRUE]
            false_values = [str(v) for v in entry.get("false_values") or _FALSE]
            mismatch = entry.get("mismatch_as", "error")

            def to_bool(v, c=c):
                t = str(v)
                if t in true_values:
                    return True
                if t in false_values:
                    return False
                if mismatch == "error":
                    raise ValueError("convert_column_types: column '%s': %r is neither a true "
                                     "nor a false value" % (c, v))
                return mismatch == "true"
            df[c] = s.map(to_bool).astype(bool)
        elif kind == "datetime":
            formats = entry.get("formats") or [None]
            out = None
            for fmt in formats:
                try:
                    out = pd.to_datetime(s, format=fmt)
                    break
                except (ValueError, TypeError):
                    continue
            if out is None:
                raise ValueError("convert_column_types: column '%s' does not fit the formats %s"
                                 % (c, ", ".join(map(str, formats))))
            df[c] = out
    return df


def _column_step(df, step):
    """A convert_column_types or filter step (the "column_steps" of docs/worker-pipe.md)."""
    import operator

    import pandas as pd

    if "convert" in step:
        for entry in step["convert"]:
            df = _convert(df, entry)
        return df
    ops = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
           ">": operator.gt, ">=": operator.ge}
    mask = pd.Series(True, index=df.index)
    for column, op, value in step.get("filter") or []:
        if column not in df.columns:
            raise ValueError("filter: '%s' is not a column (columns: %s)"
                             % (column, ", ".join(map(str, df.columns))))
        s = df[column]
        if isinstance(value, bool):
            s = s.astype(str).str.lower().map({"true": True, "false": False, "1": True, "0": False})
        elif isinstance(value, (int, float)):
            s = pd.to_numeric(s, errors="coerce")
        else:
            s = s.map(lambda v: v if pd.isna(v) else str(v))
        mask &= ops[op](s, value).fillna(False).astype(bool)
    _REMOVED[0] += int((~mask).sum())
    return df[mask].reset_index(drop=True)


def load_tabular(detail, items):
    """Turns a tabular mini-batch descriptor into the pandas DataFrame passed to run().

    `detail` is the decoded "kind": "tabular" detail (docs/worker-pipe.md): a list of
    parts, each a byte range of one file with its column names and the values taken
    from its path, plus the read options. Only those byte ranges are read. With
    partition_key_value, rows whose key columns hold other values are dropped (key
    values compare as text). `items` (one empty string per row) is not needed.
    """
    import io

    import pandas as pd

    encoding = _ENCODINGS.get(detail.get("encoding") or "utf8", "utf-8")
    sep = detail.get("delimiter") or ","
    keys = detail.get("partition_key_value")
    keys = keys if isinstance(keys, dict) else None
    frames = []
    for part in detail.get("parts") or []:
        columns = list(part.get("columns") or [])
        begin, end = int(part["begin"]), int(part["end"])
        with open(part["file"], "rb") as f:
            f.seek(begin)
            data = f.read(max(0, end - begin))
            _check_listed(f, part, begin, end, data)
        if detail.get("format") == "json_lines":
            frames.append(_json_lines_frame(part, data, encoding, detail))
            continue
        kw = {"sep": sep, "header": None, "names": columns or None, "encoding": encoding,
              "index_col": False}
        if detail.get("empty_as_string"):
            kw["keep_default_na"] = False
            kw["na_values"] = _NA_NOT_EMPTY
        if keys:
            kw["dtype"] = dict((k, str) for k in keys if k in columns)
        if data.strip():
            df = pd.read_csv(io.BytesIO(data), **kw)
        else:
            df = pd.DataFrame(columns=columns)
        for k, v in (part.get("path_values") or {}).items():
            df[k] = v
        if detail.get("include_path_column"):
            df["Path"] = part["file"]
        if keys:
            mask = None
            for k, v in keys.items():
                m = df[k].fillna("").astype(str) == str(v)
                mask = m if mask is None else (mask & m)
            if mask is not None:
                df = df[mask]
        frames.append(df)
    if not frames:
        df = pd.DataFrame()
    elif len(frames) == 1:
        df = frames[0].reset_index(drop=True)
    else:
        df = pd.concat(frames, ignore_index=True)
    for step in detail.get("column_steps") or []:
        df = _column_step(df, step)
    keep = detail.get("keep_columns") or []
    if keep:
        df = df[list(keep)]
    drop = [c for c in (detail.get("drop_columns") or []) if c in df.columns]
    if drop:
        df = df.drop(columns=drop)
    return df


# ---------------------------------------------------------------------------
# Error text


def _user_traceback(tb):
    """Skips the leading frames that belong to the shim or to importlib."""
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name == _SHIM_FILE or name.startswith("<frozen importlib"):
            tb = tb.tb_next
        else:
            break
    return tb


def _safe_str(obj):
    try:
        return str(obj)
    except BaseException:  # noqa: B036 - a broken __str__ must not kill the worker
        return "<unprintable %s>" % type(obj).__name__


def describe_exception(e):
    """Returns "<Type>: <message>\\n<traceback>" (just "<Type>" when the message is empty).

    The first line is a one-line summary (newlines in the message become spaces).
    """
    name = type(e).__name__
    msg = _safe_str(e)
    first = name + ": " + " ".join(msg.splitlines()) if msg else name
    try:
        tb_text = "".join(traceback.format_exception(type(e), e, _user_traceback(e.__traceback__)))
    except BaseException:  # noqa: B036
        tb_text = ""
    return first + "\n" + tb_text


# ---------------------------------------------------------------------------
# Pipe I/O


def _write_all(data):
    """Writes one whole frame to the reply pipe (one os.write unless it comes back short)."""
    done = os.write(REPLY_FD, data)
    if done != len(data):
        _write_rest(data, done)


def _send_text_frame(kind, text):
    payload = kind + text.encode("utf-8", "backslashreplace")
    _write_all(_LEN.pack(len(payload)) + payload)


def _encode_text(text):
    # surrogateescape turns non-UTF-8 file names we decoded back into their bytes.
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace")


def _done_frame(task_id, status, n_result, out, err, run_s, cpu_s):
    err_b = err.encode("utf-8", "backslashreplace") if err else b""  # always valid UTF-8
    if _DONE_FIXED + len(out) + len(err_b) > _MAX_FRAME:
        err_b = ("ResultTooLarge: the mini-batch's rows are %d bytes; a reply to the pool holds at "
                 "most %d (docs/protocol.md#limits)\n" % (len(out), _MAX_FRAME)).encode()
        status, n_result, out = STATUS_EXCEPTION, 0, b""
    head = _DONE.pack(_DONE_FIXED + len(out) + len(err_b), KIND_DONE, task_id, status, n_result,
                      len(out), run_s, cpu_s)
    if out or err_b:
        return b"".join((head, out, err_b))
    return head


# ---------------------------------------------------------------------------
# Loading the entry script


class _Config(object):
    def __init__(self, env):
        self.entry_script = env.get("FANOUT_ENTRY_SCRIPT", "")
        self.script_name = os.path.basename(self.entry_script) or "entry script"
        self.input_name = env.get("FANOUT_INPUT_NAME", "")
        self.append_row = env.get("FANOUT_APPEND_ROW", "1").strip() not in ("0", "", "false", "False")
        sep = env.get("FANOUT_ROW_SEP")
        self.row_sep = " " if sep is None or sep == "" else sep
        self.row_header = env.get("FANOUT_ROW_HEADER", "0").strip() in ("1", "true", "True")
        self.run_markers = env.get("FANOUT_RUN_MARKERS", "0").strip() == "1"
        self.code_on_path = env.get("FANOUT_CODE_ON_SYS_PATH", "1").strip() != "0"


def _fix_sys_path(script_dir, code_on_path=True):
    """cwd (the job's code folder) first, then the entry script's folder. `code_on_path` False
    (a fanout.Executor's job, whose working folder is its caller's, not code of the job): cwd is
    not on sys.path at all (nor '' or a relative entry, which mean it), so that a module planted
    there cannot replace one of the standard library; the entry script's own folder still leads.

    The shim's own folder (azureml_user, fanout_runtime) loses the place Python gave
    it as the script's folder and keeps the one PYTHONPATH gives it, right after those
    two and before site-packages, so that an installed package of the same name cannot
    replace EntryScript; it goes at the end only when PYTHONPATH lacks it."""
    shim_dir = os.path.dirname(os.path.abspath(_SHIM_FILE))
    if sys.path and sys.path[0] and os.path.realpath(sys.path[0]) == os.path.realpath(shim_dir):
        del sys.path[0]
    if shim_dir not in sys.path:
        sys.path.append(shim_dir)
    cwd = os.getcwd()
    if not code_on_path:
        # '' or a relative entry (an empty PYTHONPATH element gives one) means the working folder.
        sys.path[:] = [p for p in sys.path if p and os.path.isabs(p) and p != cwd]
    for d in (script_dir, cwd) if code_on_path else (script_dir,):
        while d in sys.path:
            sys.path.remove(d)
        sys.path.insert(0, d)


def _module_name(path):
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem.isidentifier() and stem not in sys.modules:
        return stem
    return "fanout_entry_script"


def _load_error(text):
    """Sends an L frame and ends the process with EXIT_LOAD_ERROR."""
    try:
        _send_text_frame(KIND_LOAD_ERROR, text)
    except OSError:
        pass
    _flush_std()
    os._exit(EXIT_LOAD_ERROR)


def _flush_std():
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except BaseException:  # noqa: B036
            pass


def _takes_context(run):
    """True if run accepts two positional arguments (a *args-only signature does not count).

    Plain functions and methods are read from their code object; anything else goes
    through inspect.signature (importing inspect costs ~10 ms of worker start-up).
    """
    fn, bound = run, 0
    if type(fn) is types.MethodType:
        fn, bound = fn.__func__, 1
    if type(fn) is types.FunctionType and not hasattr(fn, "__wrapped__"):
        return fn.__code__.co_argcount - bound >= 2
    import inspect

    try:
        sig = inspect.signature(run)
    except (TypeError, ValueError):
        return False
    positional = 0
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional += 1
    return positional >= 2


def _check_run(module, script_name):
    run = getattr(module, "run", None)
    if run is None:
        _load_error("LoadError: %s does not define run(mini_batch)\n" % script_name)
    if not callable(run):
        _load_error("LoadError: %s: run is not callable (it is a %s)\n" % (script_name, type(run).__name__))
    return run


def load_entry_script(cfg):
    """Imports the entry script and calls init(). Returns the module; on failure sends L and exits."""
    module = import_entry_script(cfg)
    run_init(module, cfg)
    return module


def import_entry_script(cfg):
    """Imports the entry script (its top level runs) without calling init()."""
    path = cfg.entry_script
    if not path:
        _load_error("LoadError: FANOUT_ENTRY_SCRIPT is not set\n")
    if not os.path.isfile(path):
        _load_error("LoadError: entry script not found: %s\n" % path)
    name = _module_name(path)
    try:
        loader = importlib.machinery.SourceFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except BaseException as e:  # noqa: B036 - SystemExit from argparse is a load error too
        sys.modules.pop(name, None)
        _load_error(describe_exception(e))
    _check_run(module, cfg.script_name)
    return module


def run_init(module, cfg):
    """Calls the entry script's init(), if it has one; on failure sends L and exits."""
    init = getattr(module, "init", None)
    if init is not None:
        if not callable(init):
            _load_error("LoadError: %s: init is not callable (it is a %s)\n" % (cfg.script_name, type(init).__name__))
        try:
            init()
        except BaseException as e:  # noqa: B036
            _load_error(describe_exception(e))


def call_shutdown(module):
    """Calls shutdown() if the script defines it; an exception is reported on stderr only."""
    fn = getattr(module, "shutdown", None) if module is not None else None
    if fn is None or not callable(fn):
        return
    try:
        fn()
    except BaseException as e:  # noqa: B036
        try:
            sys.stderr.write("fanout: shutdown() raised " + describe_exception(e))
        except BaseException:  # noqa: B036
            pass


# ---------------------------------------------------------------------------
# Serving tasks


def _classify(result, cfg):
    """Slow path for results that are not a list or tuple: (status, n_result, out, err)."""
    import collections.abc

    if result is None:
        return STATUS_BAD_RETURN, 0, b"", "BadReturn: %s: run() returned None; %s\n" % (cfg.script_name, _EXPECTED)
    if isinstance(result, (str, bytes, bytearray)):
        return STATUS_BAD_RETURN, 0, b"", "BadReturn: %s: run() returned %s; %s\n" % (
            cfg.script_name, type(result).__name__, _EXPECTED)
    if isinstance(result, collections.abc.Sequence):
        n = len(result)
        out = _encode_text("".join([str(x) + "\n" for x in result])) if cfg.append_row and n else b""
        # fanout.Executor's entry script: one row for all the calls of a mini-batch, one item per
        # call, the calls that raised counted as failed items (docs/python.md, section 2).
        ok = getattr(result, "fanout_items_succeeded", None)
        if type(ok) is int and ok >= 0:
            n = ok
        return STATUS_OK, n, out, ""
    if hasattr(result, "to_csv") and hasattr(result, "__len__"):  # pandas DataFrame (or Series)
        n = len(result)
        out = b""
        if cfg.append_row and n:
            out = _encode_text(result.to_csv(sep=cfg.row_sep, header=cfg.row_header, index=False))
        return STATUS_OK, n, out, ""
    if hasattr(result, "__array__") and hasattr(result, "__len__") and getattr(result, "ndim", 0) >= 1:
        # numpy array: one row per element along the first axis.
        n = len(result)
        out = _encode_text("".join([str(x) + "\n" for x in result])) if cfg.append_row and n else b""
        return STATUS_OK, n, out, ""
    return STATUS_BAD_RETURN, 0, b"", "BadReturn: %s: run() returned %s; %s\n" % (
        cfg.script_name, type(result).__name__, _EXPECTED)


def _decode_detail(detail):
    # surrogateescape: a file name that is not UTF-8 reaches open() as its original bytes.
    try:
        obj = json.loads(bytes(detail).decode("utf-8", "surrogateescape"))
    except ValueError as e:
        raise ProtocolError("mini-batch detail is not valid JSON: %s" % e)
    return obj if isinstance(obj, dict) else {}


def _prepare_slow(body, n, detail_len, n_items, minibatch_index, cfg, two_args):
    """Builds (mini_batch, context) when the detail must be read or the item count is off."""
    _REMOVED[0] = 0
    start = _TASK_BODY_OFFSET + detail_len
    if start > n:
        raise ProtocolError("T frame: detail_len %d runs past the frame (%d bytes)" % (detail_len, n))
    items = body[start:].decode("utf-8", "surrogateescape").split("\0") if n_items else []
    if len(items) != n_items:
        raise ProtocolError("T frame: n_items is %d but the frame holds %d items" % (n_items, len(items)))
    detail = {}
    if detail_len:
        raw = body[_TASK_BODY_OFFSET:start]
        if b"tabular" in raw or (two_args and (b"partition_key_value" in raw or b"global_row_offset" in raw)):
            detail = _decode_detail(raw)
    mini_batch = items
    if detail.get("kind") == "tabular":
        mini_batch = load_tabular(detail, items)
    ctx = None
    if two_args:
        pkv = detail.get("partition_key_value")
        ctx = MiniBatchContext(pkv if isinstance(pkv, dict) else {}, minibatch_index, cfg.input_name,
                               detail.get("global_row_offset"))
    return mini_batch, ctx


def serve(run, two_args, cfg):
    """Answers T frames until Q or EOF. Returns normally for Q/EOF; exits the process otherwise.

    cpu_seconds is the process CPU time from the previous reading to the one taken
    just before this task's reply is written: reading and decoding the request,
    run(), and turning its result into rows (plus the previous reply's write), so
    one process_time() call per task instead of two. run_seconds is run() alone.

    With cfg.run_markers an S frame goes out just before run() is called and an E frame just
    after it returns or raises, so that the pool can bound the time spent outside run(); other
    jobs pay one test of a local per marker and no frame.
    """
    reader = open(REQUEST_FD, "rb", buffering=1 << 16, closefd=False)
    read = reader.read
    unpack_len = _LEN.unpack
    unpack_task = _TASK.unpack_from
    pack_done = _DONE.pack
    fixed = _DONE_FIXED
    perf = time.perf_counter
    cpu = time.process_time
    write = os.write
    fd = REPLY_FD
    append_row = cfg.append_row
    input_name = cfg.input_name
    body_offset = _TASK_BODY_OFFSET
    list_t, tuple_t = list, tuple
    empty = b""
    max_out = _MAX_FRAME - _DONE_FIXED
    markers = cfg.run_markers
    pack_mark = _MARK.pack
    mark_len = _MARK_LEN
    task_kind, quit_kind = KIND_TASK[0], KIND_QUIT[0]
    started_kind, ended_kind, done_kind = KIND_RUN_STARTED, KIND_RUN_ENDED, KIND_DONE
    cpu_mark = cpu()

    while True:
        head = read(4)
        if len(head) != 4:
            if head:
                sys.stderr.write("fanout: request pipe closed inside a frame header\n")
            return
        (n,) = unpack_len(head)
        body = read(n)
        if len(body) != n:
            sys.stderr.write("fanout: request pipe closed inside a frame\n")
            return
        if n == 0:
            _protocol_exit("empty frame")
        kind = body[0]
        if kind != task_kind:
            if kind == quit_kind:
                return
            _protocol_exit("unknown frame kind %r" % bytes(body[:1]))
        if n < body_offset:
            _protocol_exit("T frame of %d bytes is shorter than its header" % n)

        task_id, minibatch_index, detail_len, n_items = unpack_task(body, 1)
        run_s = 0.0
        out = empty
        err = ""
        try:
            if detail_len == 0:  # fast path: plain file mini-batch
                if n_items:
                    mini_batch = body[body_offset:].decode("utf-8", "surrogateescape").split("\0")
                    if len(mini_batch) != n_items:
                        raise ProtocolError("T frame: n_items is %d but the frame holds %d items"
                                             % (n_items, len(mini_batch)))
                else:
                    mini_batch = []
                ctx = MiniBatchContext({}, minibatch_index, input_name) if two_args else None
            else:
                mini_batch, ctx = _prepare_slow(body, n, detail_len, n_items, minibatch_index, cfg, two_args)

            if markers:
                write(fd, pack_mark(mark_len, started_kind, task_id))
            t0 = perf()
            try:
                result = run(mini_batch) if ctx is None else run(mini_batch, ctx)
            finally:
                run_s = perf() - t0
                if markers:
                    write(fd, pack_mark(mark_len, ended_kind, task_id))

            tr = type(result)
            if tr is list_t or tr is tuple_t:
                status = 0
                n_result = len(result)
                if append_row and n_result:
                    text = "\n".join(map(str, result)) + "\n"
                    try:
                        out = text.encode("utf-8", "surrogateescape")
                    except UnicodeEncodeError:
                        out = text.encode("utf-8", "backslashreplace")
            else:
                status, n_result, out, err = _classify(result, cfg)
            if detail_len and status == 0:
                n_result += _REMOVED[0]
        except InputChanged as e:
            status, n_result, out, err = STATUS_EXCEPTION, 0, empty, INPUT_CHANGED + ": " + _safe_str(e)
        except Exception as e:
            status, n_result, out, err = STATUS_EXCEPTION, 0, empty, describe_exception(e)
        except BaseException as e:  # noqa: B036 - SystemExit/KeyboardInterrupt: report, then leave
            c = cpu()
            frame = _done_frame(task_id, STATUS_EXITING, 0, empty, describe_exception(e), run_s, c - cpu_mark)
            try:
                _write_all(frame)
            except OSError:
                pass
            _flush_std()
            os._exit(EXIT_RUN_FATAL)
        result = mini_batch = ctx = None

        c = cpu()
        if err or len(out) > max_out:
            frame = _done_frame(task_id, status, n_result, out, err, run_s, c - cpu_mark)
        elif out:
            frame = pack_done(fixed + len(out), done_kind, task_id, status, n_result, len(out), run_s, c - cpu_mark) + out
        else:
            frame = pack_done(fixed, done_kind, task_id, status, n_result, 0, run_s, c - cpu_mark)
        cpu_mark = c
        try:
            done = write(fd, frame)
            if done != len(frame):
                _write_rest(frame, done)
        except BrokenPipeError:
            return


def _write_rest(frame, done):
    """Finishes a reply that os.write wrote only in part (a signal interrupted a large write)."""
    view = memoryview(frame)[done:]
    while view:
        view = view[os.write(REPLY_FD, view):]


# ---------------------------------------------------------------------------
# Profiling (--profiling_module cProfile|profile): run() calls only. The unprofiled path above
# is not touched: profiling wraps run() before serve() starts.


def _start_profiler(env):
    """Returns a profiler (cProfile.Profile or profile.Profile) when one is asked for, else None."""
    name = env.get("FANOUT_PROFILING_MODULE", "")
    if not name:
        return None
    if name not in ("cProfile", "profile"):
        sys.stderr.write("fanout: FANOUT_PROFILING_MODULE=%s: expected cProfile or profile; "
                         "not profiling\n" % name)
        return None
    module = importlib.import_module(name)
    return module.Profile()


def _profiled(run, profiler, counter):
    """run() called under the profiler; counter[0] counts the calls."""
    runcall = profiler.runcall

    def run_profiled(*args):
        counter[0] += 1
        return runcall(run, *args)

    return run_profiled


def profile_path(env):
    """<log_dir>/sys/node/<node>/<process>.profile, or None without a log folder."""
    log_dir = env.get("FANOUT_LOG_DIR", "")
    if not log_dir:
        return None
    node = env.get("FANOUT_NODE", "") or "localhost"
    process = env.get("FANOUT_PROCESS", "") or ("pid%d" % os.getpid())
    return os.path.join(log_dir, "sys", "node", node, process + ".profile")


def dump_profile(profiler, path):
    """Writes the profile to `path` in pstats format, merged with what an earlier worker of the same
    name (a restart, or a worker of another pool on this node) wrote there. A lock on the folder
    keeps two workers from merging at once."""
    import fcntl
    import pstats

    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    stats = pstats.Stats(profiler)
    lock = os.open(folder, os.O_RDONLY)  # the folder itself is the lock: no file left behind
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(path):
            try:
                stats.add(path)
            except Exception as e:  # a truncated or foreign file: replaced, and said so
                sys.stderr.write("fanout: %s could not be merged (%s); replacing it\n" % (path, e))
        tmp = "%s.tmp%d" % (path, os.getpid())
        stats.dump_stats(tmp)
        os.replace(tmp, path)
    finally:
        os.close(lock)


def _protocol_exit(what):
    sys.stderr.write("fanout: worker pipe protocol error: %s\n" % what)
    _flush_std()
    os._exit(EXIT_PROTOCOL)


# ---------------------------------------------------------------------------


def _output_env(env):
    out_dir = env.get("FANOUT_OUTPUT_DIR")
    if out_dir:
        env.setdefault("AZUREML_BI_OUTPUT_PATH", out_dir)
        try:
            os.makedirs(out_dir, exist_ok=True)
        except OSError:
            pass


def _prepare(env):
    """What every worker (and the fork server) does before the entry script is imported."""
    cfg = _Config(env)
    _output_env(env)
    sys.argv = [cfg.entry_script] + sys.argv[1:]
    if cfg.entry_script:
        _fix_sys_path(os.path.dirname(os.path.abspath(cfg.entry_script)), cfg.code_on_path)
    return cfg


def _work(module, cfg, env):
    """A worker from init() on: init(), R, serve until Q or EOF, shutdown(). Returns the exit code."""
    run_init(module, cfg)
    run = _check_run(module, cfg.script_name)  # init() may have rebound it
    two_args = _takes_context(run)

    try:
        _send_text_frame(KIND_READY, "%d %s" % (os.getpid(), sys.version.split()[0]))
    except BrokenPipeError:
        call_shutdown(module)
        return EXIT_OK

    profiler = _start_profiler(env)
    calls = [0]
    if profiler is not None:
        run = _profiled(run, profiler, calls)

    serve(run, two_args, cfg)
    call_shutdown(module)
    if profiler is not None and calls[0] > 0:
        path = profile_path(env)
        if path:
            try:
                dump_profile(profiler, path)
            except Exception as e:
                sys.stderr.write("fanout: the profile could not be written to %s: %s\n" % (path, e))
    return EXIT_OK


# ---------------------------------------------------------------------------
# Fork server (fanout.worker_start: fork, docs/resources.md): one interpreter per job and pool
# imports the entry script once, then forks each worker, which runs init() and serves. The pool
# starts each worker as `fanout-worker fork-via NAME -- <this shim's command line>`, a small proxy
# that stays the pool's child: it hands its fds 0-4, process group, folder, CPUs and environment
# to this server over the unix socket, and exits as the forked worker exits (the server relays
# the status). A proxy that cannot reach the server runs the shim itself (plain spawning).


def _recv_exact(conn, n, fds):
    """n bytes from conn; file descriptors passed with them are appended to fds."""
    import socket

    buf = b""
    while len(buf) < n:
        data, got, _flags, _addr = socket.recv_fds(conn, n - len(buf), 8)
        if not data:
            raise EOFError("the proxy closed its connection")
        buf += data
        fds.extend(got)
    return buf


def _read_fork_request(conn):
    """(fds, pgid, cwd, cpus, env) as a proxy sends them: 8 bytes of length, then
    pgid NUL cwd NUL cpus(comma-separated) NUL KEY=VALUE NUL ..., with fds 0-4 attached."""
    fds = []
    try:
        (n,) = struct.unpack("<Q", _recv_exact(conn, 8, fds))
        parts = _recv_exact(conn, n, fds).split(b"\0")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    env = {}
    for kv in parts[3:]:
        k, eq, v = kv.partition(b"=")
        if eq:
            env[os.fsdecode(k)] = os.fsdecode(v)
    cpus = [int(c) for c in parts[2].split(b",") if c]
    return fds, int(parts[0]), os.fsdecode(parts[1]), cpus, env


def _become_worker(module, fds, pgid, cwd, cpus, env, keep_closed, joined):
    """In the forked child: take the proxy's place (its group, fds, folder, CPUs, environment),
    then run as a worker. Never returns."""
    code = EXIT_LOAD_ERROR
    try:
        for fd in keep_closed:
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.setpgid(0, pgid)  # fails once the proxy's group is gone: the pool gave up on it
        finally:
            os.close(joined)
        for target, fd in enumerate(fds[:5]):
            os.dup2(fd, target, inheritable=target < 3)
        for fd in fds:
            if fd > 4:
                os.close(fd)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        _output_env(os.environ)
        if cpus:
            os.sched_setaffinity(0, cpus)
        cfg = _Config(os.environ)
        sys.argv = [cfg.entry_script] + sys.argv[1:]
        code = _work(module, cfg, os.environ)
    except BaseException as e:  # noqa: B036
        try:
            sys.stderr.write("fanout: a forked worker failed before serving: %s" % describe_exception(e))
        except BaseException:  # noqa: B036
            pass
    _flush_std()
    os._exit(code)


def _status_line(status):
    if os.WIFSIGNALED(status):
        return b"signal %d\n" % os.WTERMSIG(status)
    return b"exit %d\n" % os.waitstatus_to_exitcode(status)


def fork_server(env):
    """Serves fork requests on the listening socket at fd 3 until the pool ends this process or
    goes away (EOF on fd 4)."""
    import select
    import socket

    listener = socket.socket(fileno=REQUEST_FD)
    listener.set_inheritable(False)
    cfg = _prepare(env)
    module = import_entry_script(cfg)
    _flush_std()
    poller = select.poll()
    poller.register(listener, select.POLLIN)
    try:
        os.set_inheritable(REPLY_FD, False)
        poller.register(REPLY_FD, select.POLLIN)  # EOF: the pool is gone (pool/fork_server.cpp)
    except OSError:
        pass  # not given: the server lives until the pool stops it
    waiting = {}  # pidfd -> (pid, connection to its proxy)
    while True:
        for fd, _ev in poller.poll():
            if fd == REPLY_FD:
                _flush_std()
                os._exit(EXIT_OK)
            if fd == listener.fileno():
                conn, _ = listener.accept()
                try:
                    fds, pgid, cwd, cpus, wenv = _read_fork_request(conn)
                except (OSError, EOFError, ValueError, IndexError):
                    conn.close()
                    continue
                # The pid goes to the proxy only once the child is in the proxy's group, so that
                # whatever the pool sends to that group from then on reaches the worker too.
                joined_r, joined_w = os.pipe()
                keep_closed = [listener.fileno(), conn.fileno(), joined_r, REPLY_FD] + list(waiting)
                _flush_std()
                pid = os.fork()
                if pid == 0:
                    _become_worker(module, fds, pgid, cwd, cpus, wenv, keep_closed, joined_w)
                os.close(joined_w)
                for f in fds:
                    os.close(f)
                os.read(joined_r, 1)  # EOF once the child joined the group (or ended)
                os.close(joined_r)
                pidfd = os.pidfd_open(pid)
                waiting[pidfd] = (pid, conn)
                poller.register(pidfd, select.POLLIN)
                try:
                    conn.sendall(b"pid %d\n" % pid)
                except OSError:
                    pass
            else:
                pid, conn = waiting.pop(fd)
                poller.unregister(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                try:
                    conn.sendall(_status_line(status))
                except OSError:
                    pass
                conn.close()


def _read_warm_request(conn):
    """What the pool sends a warm interpreter (pool/fork_server.cpp, WarmInterpreter): 8 bytes of
    length, then cwd NUL stdout NUL stderr NUL nargs NUL arg ... NUL KEY=VALUE NUL ..., with the
    fork server's listening socket attached. Returns (listener fd, cwd, stdout, stderr, args,
    env); None when the pool closed the connection instead."""
    fds = []
    try:
        (n,) = struct.unpack("<Q", _recv_exact(conn, 8, fds))
        parts = [os.fsdecode(p) for p in _recv_exact(conn, n, fds).split(b"\0")]
    except EOFError:
        for fd in fds:
            os.close(fd)
        return None
    for fd in fds[1:]:
        os.close(fd)
    nargs = int(parts[3])
    args = parts[4:4 + nargs]
    env = dict(kv.split("=", 1) for kv in parts[4 + nargs:] if "=" in kv)
    return fds[0], parts[0], parts[1], parts[2], args, env


def _redirect(path, fd):
    """fd (1 or 2) to the end of the file at path, as fanout-pool opens a worker's log files."""
    f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    if f != fd:
        os.dup2(f, fd)
        os.close(f)


def warm_interpreter():
    """fanout-pool --warm-python: started before any job with the shim loaded, this waits on the
    pool's socket at fd 3 for the fork-server start of the first Python job it fits (its folder,
    log files, arguments, environment and listening socket), takes them as its own and serves as
    that job's fork server, so that the job's first workers do not wait for an interpreter to
    start. The pool sends it only a start whose environment differs from this one's in variables
    no interpreter reads at its start (docs/resources.md#worker-start). Ends on EOF on fd 3 or
    fd 4."""
    import select
    import socket

    conn = socket.socket(fileno=REQUEST_FD)
    poller = select.poll()
    poller.register(REQUEST_FD, select.POLLIN)
    try:
        os.set_inheritable(REPLY_FD, False)
        poller.register(REPLY_FD, select.POLLIN)
    except OSError:
        pass
    if any(fd == REPLY_FD for fd, _ev in poller.poll()):
        os._exit(EXIT_OK)  # the pool is gone
    request = _read_warm_request(conn)
    conn.detach()
    if request is None:
        os._exit(EXIT_OK)  # the pool started the job's server afresh instead
    listener, cwd, out, err, args, env = request
    os.dup2(listener, REQUEST_FD)  # in the control socket's place, as a fresh server has it
    os.close(listener)
    if out:
        _redirect(out, 1)
    if err:
        if err == out:
            os.dup2(1, 2)
        else:
            _redirect(err, 2)
    if cwd:
        os.chdir(cwd)
    os.environ.update(env)
    os.environ.pop("FANOUT_WARM_PYTHON", None)
    sys.argv = sys.argv[:1] + args
    fork_server(os.environ)


# ---------------------------------------------------------------------------


def main():
    env = os.environ
    if env.get("FANOUT_WARM_PYTHON") == "1":
        warm_interpreter()
        return EXIT_OK
    if env.get("FANOUT_FORK_SERVER") == "1":
        fork_server(env)
        return EXIT_OK
    for fd in (REQUEST_FD, REPLY_FD):
        try:
            os.fstat(fd)
            os.set_inheritable(fd, False)  # children of run() must not hold the pipes open
        except OSError:
            sys.stderr.write("fanout_worker.py: fd %d is not open; this program is started by fanout-pool "
                             "(fd 3 = requests, fd 4 = replies)\n" % fd)
            return EXIT_USAGE

    cfg = _prepare(env)
    module = import_entry_script(cfg)
    return _work(module, cfg, env)


if __name__ == "__main__":
    sys.exit(main())
