"""What the Azure-shaped modules of this folder share (docs/azure-sdk.md): the job YAML writer and a
small reader, notices for what is cloud-only, and a run of fanout jobs in a thread that the SDKs'
`stream` / `wait_for_completion` follow. Only `fanout python` puts this folder on sys.path."""

import json
import os
import re
import sys
import threading
import traceback

_noted = set()


def note_ignored(what, why="cloud-only; fanout runs it locally"):
    """Says once per process on stderr that `what` is accepted and not used."""
    if what in _noted:
        return
    _noted.add(what)
    print("fanout: %s: ignored (%s)" % (what, why), file=sys.stderr, flush=True)


class Bag:
    """An object that takes any attribute (settings objects of the SDKs whose values fanout keeps
    but does not use): Bag(a=1).b = 2 works, a missing attribute is None."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join(
            "%s=%r" % kv for kv in sorted(self.__dict__.items())))


# ---------------------------------------------------------------------------------------------
# YAML

def _scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    # A JSON string is a YAML double-quoted scalar.
    return json.dumps(str(v))


def _lines(value, indent):
    pad = "  " * indent
    out = []
    for key, v in value.items():
        if v is None:
            continue
        if isinstance(v, dict):
            if not v:
                out.append("%s%s: {}" % (pad, key))
            else:
                out.append("%s%s:" % (pad, key))
                out += _lines(v, indent + 1)
        elif isinstance(v, (list, tuple)):
            out.append("%s%s: [%s]" % (pad, key, ", ".join(_scalar(x) for x in v)))
        else:
            out.append("%s%s: %s" % (pad, key, _scalar(v)))
    return out


def dump_yaml(mapping, path, header=None):
    """Writes `mapping` (nested dicts of scalars and lists of scalars; None values left out) as
    block YAML to `path`."""
    text = "\n".join(([header] if header else []) + _lines(mapping, 0)) + "\n"
    with open(path, "w") as f:
        f.write(text)


def _parse_scalar(text):
    t = text.strip()
    if t == "" or t in ("~", "null", "Null", "NULL"):
        return None
    if t.startswith('"'):
        return json.loads(t)
    if t.startswith("'") and t.endswith("'"):
        return t[1:-1].replace("''", "'")
    if t.startswith("[") and t.endswith("]"):
        inner = t[1:-1].strip()
        return [] if not inner else [_parse_scalar(x) for x in _split_flow(inner)]
    if t.lower() in ("true", "yes", "on"):
        return True
    if t.lower() in ("false", "no", "off"):
        return False
    if re.fullmatch(r"[-+]?\d+", t):
        return int(t)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", t):
        return float(t)
    return t


def _split_flow(text):
    parts, cur, quote = [], "", None
    for ch in text:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            cur += ch
        elif ch == ",":
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def _mini_load(text, path):
    """Block mappings of scalars and flow lists (what dump_yaml writes), for a Python without
    PyYAML."""
    root = {}
    stack = [(-1, root)]
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith('"') else raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        m = re.match(r"\s*([^:]+?)\s*:(\s+(.*))?$", line)
        if not m:
            raise ValueError("%s:%d: cannot read this line without PyYAML (python3-yaml): %s" %
                             (path, n, raw.strip()))
        while stack[-1][0] >= indent:
            stack.pop()
        key, rest = m.group(1).strip().strip('"'), (m.group(3) or "")
        parent = stack[-1][1]
        if rest.strip() == "":
            parent[key] = {}
            stack.append((indent, parent[key]))
        else:
            parent[key] = {} if rest.strip() == "{}" else _parse_scalar(rest)
    return root


def load_yaml(path):
    """The mapping in the YAML file `path` (PyYAML when it is importable)."""
    with open(path) as f:
        text = f.read()
    try:
        import yaml
    except ImportError:
        return _mini_load(text, path)
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError("%s: expected a mapping at the top" % path)
    return data


# ---------------------------------------------------------------------------------------------
# Running

def fanout_client():
    import fanout
    return fanout.Client()


# The exit status `fanout run` / `fanout wait` gives a job that ended in each state (README).
STATE_EXIT = {"succeeded": 0, "partial": 4, "failed": 1, "cancelled": 1}

_SDK_DIR = os.path.dirname(os.path.abspath(__file__))
# Where fanout.Client.submit writes an SDK job's file (and the line in it), as an error names it.
_JOB_FILE_AT = re.compile(r"\S*\.fanout-job-\d+-\d+\.yml(?::\d+)?: ")


def call_site(what):
    """"FILE:LINE: WHAT" for the call of the user's program being made now: the innermost frame
    outside this folder (the SDK-shaped modules), so an error in what that call built can name
    the user's own line."""
    for frame in reversed(traceback.extract_stack()[:-1]):
        name = frame.filename
        if name.startswith("<") or os.path.abspath(name).startswith(_SDK_DIR + os.sep):
            continue
        return "%s:%d: %s" % (name, frame.lineno, what)
    return what


def located(message, obj, submitted_at=None):
    """`message` (fanout's, about the job file written for `obj`) with that hidden file's
    FILE:LINE replaced by where the user built `obj` (its `_origin`, a call_site()), and
    `submitted_at` added: the key and the reason stay fanout's."""
    origin = getattr(obj, "_origin", None)
    if origin and _JOB_FILE_AT.search(message):
        message = _JOB_FILE_AT.sub(lambda m: origin + ": ", message)
    if submitted_at:
        message += " [submitted at %s]" % submitted_at
    return message


def exit_status_of(state, job=None):
    """The exit status of a job that ended in `state`: that of the `fanout run` that followed
    it when there is one, else the one the CLI gives the state (partial: 4)."""
    run = getattr(job, "_run", None)
    if run is not None and run.proc.returncode is not None:
        return run.proc.returncode
    return STATE_EXIT.get(state, 1)


def run_fanout_job(obj, log=None, submitted_at=None):
    """Submits `obj` (anything with dump(path)) through fanout.Client and follows it to its end.
    Returns (state, exit status of `fanout run`, fanout.Job or None); a job file fanout refuses
    is (\"failed\", its exit status, None) with the message on stderr, located at the user's
    own lines (located())."""
    import fanout
    try:
        job = fanout_client().submit(obj)
    except fanout.FanoutError as e:
        where = located(e.message, obj, submitted_at)
        status = " (exit status %d)" % e.exit_status if e.exit_status is not None else ""
        print("fanout: %s%s" % (where, status), file=sys.stderr, flush=True)
        return "failed", e.exit_status if e.exit_status is not None else 1, None
    if log:
        log("fanout job %d started" % job.id)
    state = job.wait(progress=bool(log))
    return state, exit_status_of(state, job), job


class Runner:
    """Runs `steps` (callables returning (state, exit status of `fanout run`)) one after another
    in a thread, stopping at the first whose `fanout run` did not exit 0; the SDKs' run objects
    follow it."""

    def __init__(self, steps):
        self.steps = steps
        self.status = "NotStarted"
        self.exit_status = None
        self.error = None
        self._thread = threading.Thread(target=self._go, name="fanout-azure-run", daemon=True)

    def start(self):
        self.status = "Running"
        self._thread.start()
        return self

    def _go(self):
        rc = 0
        try:
            for step in self.steps:
                state, rc = step()
                if rc != 0:
                    self.status, self.exit_status = "Failed", rc
                    return
            self.status, self.exit_status = "Completed", rc
        except BaseException as e:  # noqa: B902 - the caller's wait reports it
            self.error = e
            self.status, self.exit_status = "Failed", 1

    def join(self, timeout=None):
        self._thread.join(timeout)
        return not self._thread.is_alive()


def absolute(path, base=None):
    """`path` made absolute (against `base`, else the working folder); a file:// prefix removed;
    anything with a scheme (azureml:, https://, ...) kept as written for fanout to judge."""
    if path is None:
        return None
    p = os.fspath(path)
    if p.startswith("file://"):
        p = p[len("file://"):]
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", p):
        return p
    return os.path.abspath(os.path.join(base or os.getcwd(), p))
