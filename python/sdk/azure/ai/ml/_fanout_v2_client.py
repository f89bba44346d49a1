"""azure.ai.ml's MLClient run by fanout (docs/azure-sdk.md): jobs.create_or_update starts a node
or a pipeline job on fanout in a thread; stream, get/show, list, download, cancel, archive,
restore and validate act on the jobs this MLClient started. Compute and the other operation
groups are cloud-only: accepted and noted."""

import os
import re
import shutil
import sys
import uuid

from _fanout_azure import Bag, Runner, absolute, call_site, note_ignored, run_fanout_job
from azure.ai.ml._fanout_v2 import Command, Input, Output, Parallel, PipelineJob


class JobException(Exception):
    """A job that did not complete; `exit_status` is the exit status of its `fanout run`."""

    def __init__(self, message, exit_status=None):
        super().__init__(message)
        self.exit_status = exit_status


class ValidationException(Exception):
    """What jobs.validate(job, raise_on_failure=True) raises: its message lists the failures."""


class ValidationResult:
    """What jobs.validate returns: `passed`, and `error_messages` {where: message}."""

    def __init__(self, errors):
        self.error_messages = dict(errors)

    @property
    def passed(self):
        return not self.error_messages

    def __repr__(self):
        return "ValidationResult(passed=%s, error_messages=%r)" % (self.passed,
                                                                   self.error_messages)


class ListViewType:
    """Which jobs jobs.list gives (azure.ai.ml.constants.ListViewType)."""
    ACTIVE_ONLY = "ActiveOnly"
    ARCHIVED_ONLY = "ArchivedOnly"
    ALL = "All"


_DATASTORE_URI = "azureml://datastores/"
_ENDED = ("Completed", "Failed", "Canceled")


def _default_outputs(node, job_name, node_name):
    """Outputs without a path get one under ./azureml-outputs/JOB/NODE/ (Azure's default
    datastore is a local folder here)."""
    for out_name, out in vars(node.outputs).items():
        if out.path is None:
            out.path = os.path.join(os.getcwd(), "azureml-outputs", job_name, node_name, out_name)
        elif isinstance(out.path, str) and out.path.startswith(_DATASTORE_URI):
            out.path = _datastore_path(out.path, job_name, out_name)


def _datastore_path(uri, job_name, out_name):
    """An output's azureml://datastores/STORE/paths/PATH as the local folder
    ./azureml-outputs/datastores/STORE/PATH (${{default_datastore}} is workspaceblobstore;
    ${{name}} the job's name, ${{output_name}} the output's)."""
    rest = uri[len(_DATASTORE_URI):]
    store, _, path = rest.partition("/paths/")
    store = store.replace("${{default_datastore}}", "workspaceblobstore")
    path = path.replace("${{name}}", job_name).replace("${{output_name}}", out_name)
    local = os.path.join(os.getcwd(), "azureml-outputs", "datastores", store, path)
    note_ignored("output datastore paths",
                 "an azureml://datastores/ output is written under ./azureml-outputs/datastores/")
    return local


def _note_cloud_settings(job, nodes):
    """The one-line notes docs/azure-sdk.md promises for settings that only mean something on
    Azure: the pipeline's default compute, a node's compute, an `azureml:` environment."""
    settings = getattr(job, "settings", None)
    compute = getattr(settings, "default_compute", None) if settings is not None else None
    for c in [compute, getattr(job, "compute", None)] + [getattr(n, "compute", None)
                                                          for n in nodes.values()]:
        if c:
            note_ignored("compute %s" % str(c).replace("azureml:", ""),
                         "fanout runs on this machine")
    for node in nodes.values():
        env = getattr(getattr(node, "task", None), "environment", None)
        if isinstance(env, str) and env:
            note_ignored("environment %s" % env,
                         "cloud-only; the workers use fanout's Python")


class _LocalJob:
    """A job this MLClient started: a node or a pipeline job and its run in a thread."""

    def __init__(self, job, name, runner, nodes):
        self.job, self.name, self.runner, self.nodes = job, name, runner, nodes
        self.display_name = getattr(job, "display_name", None)
        self.experiment_name = getattr(job, "experiment_name", None)
        self.type = "pipeline" if isinstance(job, PipelineJob) else (
            "command" if isinstance(job, Command) else "parallel")
        self.studio_url = "file://" + os.path.join(os.getcwd(), "azureml-outputs", name)
        self.fanout_jobs = []  # fanout.Job of each parallel step, in the order they ran
        self.node_jobs = {}  # node name -> its fanout.Job
        self.archived = False
        self.tags = dict(getattr(job, "tags", None) or {})

    @property
    def status(self):
        s = self.runner.status
        return "Canceled" if s == "Failed" and getattr(self, "_canceled", False) else s

    @property
    def outputs(self):
        return self.job.outputs

    @property
    def inputs(self):
        return getattr(self.job, "inputs", None)

    def __repr__(self):
        return "<%s job %s: %s>" % (self.type, self.name, self.status)


def _copy_into(src, dest):
    """Copies the file or folder `src` into the folder `dest` (a folder's contents, a file by
    its name); returns the files copied."""
    os.makedirs(dest, exist_ok=True)
    if os.path.isfile(src):
        shutil.copy2(src, os.path.join(dest, os.path.basename(src)))
        return 1
    n = 0
    for folder, _, files in os.walk(src):
        for f in files:
            s = os.path.join(folder, f)
            d = os.path.join(dest, os.path.relpath(s, src))
            os.makedirs(os.path.dirname(d), exist_ok=True)
            shutil.copy2(s, d)
            n += 1
    return n


class _Jobs:
    def __init__(self):
        self._jobs = {}

    def create_or_update(self, job, *, experiment_name=None, description=None, compute=None,
                         **kwargs):
        """Starts `job` (a node or a pipeline job) on fanout and returns it at once."""
        # A fresh name per submission, as Azure's, so that a second run gets its own outputs.
        # A name fit for paths and commands (Azure's are identifiers too): a display name's
        # spaces and the like become '_'.
        base = job.name or getattr(job, "display_name", None) or "job"
        name = "%s-%s" % (re.sub(r"[^A-Za-z0-9_.-]", "_", base), uuid.uuid4().hex[:8])
        nodes = job.jobs if isinstance(job, PipelineJob) else {name: job}
        _note_cloud_settings(job, nodes)
        if compute:
            note_ignored("compute %s" % compute, "fanout runs on this machine")
        submitted_at = call_site("jobs.create_or_update()")
        local = None

        def step_for(node_name, node):
            def step():
                _default_outputs(node, name, node_name)
                print("fanout: %s: step %s" % (name, node_name), file=sys.stderr, flush=True)
                if isinstance(node, Command):
                    state, rc, fjob = node.run_local() + (None,)
                else:
                    state, rc, fjob = run_fanout_job(node, log=None, submitted_at=submitted_at)
                if fjob is not None:
                    local.fanout_jobs.append(fjob)
                    local.node_jobs[node_name] = fjob
                node.status = "Completed" if rc == 0 else "Failed"
                return state, rc
            return step

        runner = Runner([step_for(k, v) for k, v in nodes.items()])
        local = _LocalJob(job, name, runner, nodes)
        local.experiment_name = experiment_name or local.experiment_name
        self._jobs[name] = local
        runner.start()
        return local

    begin_create_or_update = create_or_update

    def _find(self, name):
        key = getattr(name, "name", name)
        if key not in self._jobs:
            raise KeyError("job %r was not created by this MLClient (its jobs: %s)" % (
                key, ", ".join(self._jobs) or "none"))
        return self._jobs[key]

    def stream(self, name, **kwargs):
        """Follows the job to its end; JobException when it did not complete."""
        local = self._find(name)
        local.runner.join()
        for fjob in local.fanout_jobs:
            st = fjob.status()
            print("fanout job %d: %s (%s/%s mini-batches failed)" % (
                fjob.id, st.get("state"), st.get("failed", 0), st.get("total", "?")), flush=True)
        print("Execution Summary\n=================\nRunId: %s\nStatus: %s" % (
            local.name, local.status), flush=True)
        if local.runner.error is not None:
            raise local.runner.error
        if local.status != "Completed":
            raise JobException("job %s: %s" % (local.name, local.status),
                               local.runner.exit_status)

    def get(self, name, **kwargs):
        """The job `name` (a job this MLClient started); KeyError for another name."""
        return self._find(name)

    show = get  # the CLI's name (az ml job show)

    def list(self, parent_job_name=None, *, list_view_type=ListViewType.ACTIVE_ONLY, **kwargs):
        """The jobs this MLClient started (archived ones only with list_view_type ALL or
        ARCHIVED_ONLY); with `parent_job_name`, that pipeline job's node jobs."""
        if parent_job_name is not None:
            parent = self._find(parent_job_name)
            return [Bag(name="%s_%s" % (parent.name, k), display_name=k, type=(
                "command" if isinstance(n, Command) else "parallel"), status=n.status,
                outputs=n.outputs) for k, n in parent.nodes.items()]
        if list_view_type == ListViewType.ALL:
            return list(self._jobs.values())
        archived = list_view_type == ListViewType.ARCHIVED_ONLY
        return [j for j in self._jobs.values() if j.archived == archived]

    def cancel(self, name, **kwargs):
        local = self._find(name)
        local._canceled = True
        for fjob in local.fanout_jobs:
            fjob.cancel()

    begin_cancel = cancel

    def archive(self, name, **kwargs):
        """Hides the job from list() (Azure's archive); only an ended job can be archived."""
        local = self._find(name)
        if local.status not in _ENDED:
            raise JobException("job %s is %s; only a job that ended can be archived" % (
                local.name, local.status))
        local.archived = True

    def restore(self, name, **kwargs):
        """Shows an archived job in list() again."""
        self._find(name).archived = False

    def download(self, name, *, download_path=".", output_name=None, all=False, **kwargs):
        """Copies what an ended job made into `download_path`, as Azure lays it out: the output
        `output_name` into download_path/named-outputs/<output_name>/; without one, the job's
        logs into download_path/artifacts/logs/ (a pipeline's per node:
        artifacts/<node>/logs/); `all`: the logs and every named output."""
        local = self._find(name)
        if local.status not in _ENDED:
            raise JobException("job %s is %s: download needs a job that ended (stream or wait "
                               "for it first)" % (local.name, local.status))
        outputs = {k: v for k, v in vars(local.outputs).items() if isinstance(v, Output)}
        dest = os.path.abspath(download_path)
        if output_name is not None:
            if output_name not in outputs:
                raise ValueError("job %s has no output %r (its outputs: %s)" % (
                    local.name, output_name, ", ".join(sorted(outputs)) or "none"))
            chosen = {output_name: outputs[output_name]}
        else:
            chosen = outputs if all else {}
        for out_name, out in chosen.items():
            src = absolute(out.path) if out.path else None
            if not src or not os.path.exists(src):
                raise JobException("job %s: output %s has nothing at %s" % (local.name, out_name,
                                                                          src))
            _copy_into(src, os.path.join(dest, "named-outputs", out_name))
        if output_name is None:
            self._download_logs(local, os.path.join(dest, "artifacts"))
        return dest

    @staticmethod
    def _download_logs(local, dest):
        pipeline = local.type == "pipeline"
        for node_name, fjob in local.node_jobs.items():
            log_dir = fjob.status().get("log_dir") or ""
            if log_dir and os.path.isdir(log_dir):
                where = os.path.join(dest, node_name, "logs") if pipeline else os.path.join(
                    dest, "logs")
                _copy_into(log_dir, where)

    def validate(self, job, *, raise_on_failure=False, **kwargs):
        """What can be checked before a run: every node's inputs bound, its code folder and
        entry script present, its local input paths present. fanout checks the job's values
        (mini_batch_size, thresholds, ...) when it runs it."""
        nodes = job.jobs if isinstance(job, PipelineJob) else {job.name or "job": job}
        errors = {}
        for node_name, node in nodes.items():
            errors.update(_node_errors(node_name, node))
        result = ValidationResult(errors)
        if raise_on_failure and not result.passed:
            raise ValidationException("; ".join("%s: %s" % kv for kv in sorted(errors.items())))
        return result


def _node_errors(node_name, node):
    errors = {}
    for in_name, decl in node._component_inputs.items():
        value = getattr(node.inputs, in_name, None)
        unbound = value is None or value is decl  # a node starts with the declarations
        if unbound and isinstance(decl, Input) and decl.default is None and decl.path is None \
                and not decl.optional:
            errors["jobs.%s.inputs.%s" % (node_name, in_name)] = "required input is not bound"
        path = getattr(value, "path", None) if isinstance(value, Input) else None
        if isinstance(path, str) and not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", path) \
                and not os.path.exists(absolute(path)):
            errors["jobs.%s.inputs.%s.path" % (node_name, in_name)] = "no such file or folder: %s" % (
                absolute(path))
    if isinstance(node, Command):
        if not (node.task.command or "").strip():
            errors["jobs.%s.command" % node_name] = "the command is empty"
        return errors
    code = absolute(node.task.code or ".")
    if not os.path.isdir(code):
        errors["jobs.%s.task.code" % node_name] = "no such folder: %s" % code
    elif not node.task.entry_script:
        errors["jobs.%s.task.entry_script" % node_name] = "missing"
    elif not os.path.isfile(os.path.join(code, node.task.entry_script)):
        errors["jobs.%s.task.entry_script" % node_name] = "no such file: %s" % os.path.join(
            code, node.task.entry_script)
    return errors


class _Compute:
    def get(self, name, **kwargs):
        note_ignored("compute %s" % name, "fanout runs on this machine")
        return Bag(name=name, type="local", size="local", location="local",
                   provisioning_state="Succeeded")

    def begin_create_or_update(self, compute, **kwargs):
        note_ignored("compute creation")
        return Bag(result=lambda *a, **k: compute, wait=lambda *a, **k: None)

    def list(self, **kwargs):
        return []


class _Ignored:
    """An MLClient operations group that is cloud-only (environments, data, models,
    registries...): each call is accepted and returns what it was given."""

    def __init__(self, what):
        self.what = what

    def __getattr__(self, name):
        def call(*args, **kwargs):
            note_ignored("MLClient.%s.%s" % (self.what, name))
            return args[0] if args else None
        return call


class MLClient:
    """A local MLClient: jobs run through fanout.Client; the workspace is the working folder."""

    def __init__(self, credential=None, subscription_id=None, resource_group_name=None,
                 workspace_name=None, **kwargs):
        self.subscription_id, self.resource_group_name = subscription_id, resource_group_name
        self.workspace_name = workspace_name
        self.jobs = _Jobs()
        self.compute = _Compute()
        for group in ("environments", "data", "models", "components", "datastores",
                      "online_endpoints", "batch_endpoints", "online_deployments",
                      "batch_deployments", "workspaces", "registries"):
            setattr(self, group, _Ignored(group))

    @classmethod
    def from_config(cls, credential=None, *, path=None, file_name=None, **kwargs):
        """Reads config.json (or .azureml/config.json) from `path` or the folders above the
        working folder when there is one; without it, a workspace named after the folder."""
        import json
        start = os.path.abspath(path or os.getcwd())
        names = [file_name] if file_name else ["config.json"]
        here = start if os.path.isdir(start) else os.path.dirname(start)
        while True:
            for sub in ("", ".azureml"):
                for n in names:
                    cand = os.path.join(here, sub, n)
                    if os.path.isfile(cand):
                        with open(cand) as f:
                            cfg = json.load(f)
                        return cls(credential, cfg.get("subscription_id"),
                                   cfg.get("resource_group"), cfg.get("workspace_name"))
            up = os.path.dirname(here)
            if up == here:
                break
            here = up
        return cls(credential, "local", "local", os.path.basename(start))


__all__ = ["JobException", "ListViewType", "MLClient", "Parallel", "ValidationException",
           "ValidationResult"]
