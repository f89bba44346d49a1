"""What the Azure-shaped modules of this folder share (docs/azure-sdk.md): the job YAML writer and a
small reader, notices for what is cloud-only, and a run of fanout jobs in a thread that the SDKs'
`stream` / `wait_for_completion` follow. Only `fanout python` puts this folder on sys.path."""

import json
import os
import re
import sys
import threading

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


def run_fanout_job(obj, log=None):
    """Submits `obj` (anything with dump(path)) through fanout.Client and follows it to its end.
    Returns (state, exit status of `fanout run`, fanout.Job or None); a job file fanout refuses
    is (\"failed\", its exit status, None) with the message on stderr."""
    import fanout
    try:
        job = fanout_client().submit(obj)
    except fanout.FanoutError as e:
        print("fanout: %s" % e, file=sys.stderr, flush=True)
        return "failed", e.exit_status if e.exit_status is not None else 1, None
    if log:
        log("fanout job %d started" % job.id)
    state = job.wait(progress=bool(log))
    rc = job._run.proc.returncode if job._run is not None else (0 if state == "succeeded" else 1)
    return state, rc, job


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
