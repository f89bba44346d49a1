"""Where fanout.Client writes the job file of a job given as a dict or an SDK-shaped object: a
fresh folder only this user can use (tempfile.mkdtemp: mode 0700, under $TMPDIR), the file in it
created with O_EXCL and without following links, never a name in the current folder that another
user could have made first. fanout reads a job file's relative paths from the file's folder, so
a dict's local paths are made absolute against the folder they were meant from (the current one)
before it is written. See docs/python.md."""

import copy
import os
import re
import shutil
import tempfile
import weakref

# A URI (azureml:, https://, ...): not a local path, left for fanout to judge.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class PrivateFolder:
    """A fresh 0700 folder, removed with its files when this object goes (or at exit)."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="fanout-job-")
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.path, True)

    def create(self, name):
        """A new file `name` in the folder, mode 0600, opened for writing: O_EXCL (never one
        that was there) and O_NOFOLLOW. Returns its descriptor."""
        return os.open(os.path.join(self.path, name),
                       os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def _local(value, base):
    """`value` made absolute against `base` when it is a relative local path (what fanout would
    resolve against the job file's folder); anything else as it is."""
    if not isinstance(value, str):
        return value
    v = value.strip()
    if v.startswith("file://"):
        v = v[len("file://"):]
    elif v.startswith("file:"):
        v = v[len("file:"):]
    elif _SCHEME.match(v):
        return value
    if not v or "${{" in v or os.path.isabs(v):
        return value
    return os.path.join(base, v)


def _anchor_key(mapping, key, base):
    if isinstance(mapping, dict) and key in mapping:
        mapping[key] = _local(mapping[key], base)


def _anchor_ports(ports, base):
    """inputs: or outputs: {name: {path: ...}}."""
    if isinstance(ports, dict):
        for port in ports.values():
            _anchor_key(port, "path", base)


def _anchor_parallel(job, base):
    _anchor_ports(job.get("inputs"), base)
    _anchor_ports(job.get("outputs"), base)
    task = job.get("task")
    if isinstance(task, dict):
        if task.get("code") is None:
            task["code"] = base  # fanout's default is the job file's folder
        _anchor_key(task, "code", base)
        _anchor_key(task, "append_row_to", base)
        args = task.get("program_arguments")
        if (task.get("append_row_to") is None and isinstance(args, str)
                and "append_row_file_name" in args):
            _row_file_beside(job, task, args, base)
    env = job.get("environment_variables")
    if isinstance(env, dict):
        for name, v in env.items():
            if isinstance(v, str) and (v in (".", "..") or v.startswith(("./", "../"))):
                env[name] = os.path.join(base, v)
    settings = job.get("fanout")
    if isinstance(settings, dict):
        _anchor_key(settings, "db", base)
        _anchor_key(settings, "run_dir", base)
        if "/" in str(settings.get("python") or ""):
            _anchor_key(settings, "python", base)


def _row_file_beside(job, task, args, base):
    """--append_row_file_name NAME without append_row_to: the file goes to the first output when
    it is a folder, else to the job file's folder, which is `base` here."""
    outputs = job.get("outputs")
    first = next(iter(outputs.values()), None) if isinstance(outputs, dict) and outputs else None
    if isinstance(first, dict) and first.get("type") != "uri_file":
        return
    words = args.replace("=", " ").split()
    for i, w in enumerate(words[:-1]):
        if w == "--append_row_file_name":
            task["append_row_to"] = os.path.join(base, words[i + 1])


def anchored(job, base):
    """A copy of the dict `job` (a parallel job or a pipeline) whose local paths are absolute
    against `base`, so that they mean the same from a job file written elsewhere."""
    job = copy.deepcopy(job)
    if job.get("type") == "pipeline":
        _anchor_ports(job.get("inputs"), base)
        _anchor_ports(job.get("outputs"), base)
        jobs = job.get("jobs")
        for step in (jobs.values() if isinstance(jobs, dict) else ()):
            if not isinstance(step, dict):
                continue
            _anchor_ports(step.get("inputs"), base)
            _anchor_ports(step.get("outputs"), base)
            component = step.get("component")
            if isinstance(component, dict):
                _anchor_parallel(component, base)
            elif component is not None:
                _anchor_key(step, "component", base)
            else:  # a job written in place
                _anchor_parallel(step, base)
    else:
        _anchor_parallel(job, base)
    return job
