"""Azure ML SDK v2 shapes run by fanout (docs/azure-sdk.md): a parallel component built with
parallel_run_function or load_component, called to make a node, dumped as the parallel job YAML
that `fanout run` reads; dsl.pipeline runs its nodes one after another; MLClient runs jobs
through fanout.Client (_fanout_v2_client.py)."""

import copy
import itertools
import os
import re
import subprocess

from _fanout_azure import Bag, absolute, call_site, dump_yaml, load_yaml, note_ignored


class AssetTypes:
    URI_FILE = "uri_file"
    URI_FOLDER = "uri_folder"
    MLTABLE = "mltable"
    CUSTOM_MODEL = "custom_model"
    MLFLOW_MODEL = "mlflow_model"
    TRITON_MODEL = "triton_model"


class InputOutputModes:
    MOUNT = "mount"
    RO_MOUNT = "ro_mount"
    RW_MOUNT = "rw_mount"
    DOWNLOAD = "download"
    UPLOAD = "upload"
    DIRECT = "direct"
    EVAL_MOUNT = "eval_mount"
    EVAL_DOWNLOAD = "eval_download"


class Input:
    """A data input (type uri_folder, uri_file, mltable, a model) or a typed literal (string,
    integer, number, boolean with default)."""

    def __init__(self, *, type="uri_folder", path=None, mode=None, default=None, optional=None,
                 description=None, min=None, max=None, enum=None, **kwargs):
        self.type, self.path, self.mode = type, path, mode
        self.default, self.optional, self.description = default, optional, description

    def _yaml(self):
        if self.type in ("string", "integer", "number", "boolean"):
            return {"type": self.type, "default": self.default}
        return {"type": self.type, "path": absolute(self.path), "mode": self.mode}


class Output:
    def __init__(self, *, type="uri_folder", path=None, mode=None, description=None, **kwargs):
        self.type, self.path, self.mode, self.description = type, path, mode, description


class RunFunction:
    """The task of a parallel job: an entry script with init()/run() in `code`."""

    def __init__(self, *, code=None, entry_script=None, program_arguments=None, model=None,
                 append_row_to=None, environment=None, **kwargs):
        self.code, self.entry_script = code, entry_script
        self.program_arguments, self.model = program_arguments, model
        self.append_row_to, self.environment = append_row_to, environment


class ResourceConfiguration:
    def __init__(self, *, instance_count=None, instance_type=None, properties=None, **kwargs):
        self.instance_count, self.instance_type, self.properties = (instance_count, instance_type,
                                                                    properties)


class RetrySettings:
    def __init__(self, *, max_retries=None, timeout=None):
        self.max_retries, self.timeout = max_retries, timeout


class Environment:
    """Kept as the job's environment, which fanout notes as unused (the workers use fanout's
    Python)."""

    def __init__(self, *, name=None, version=None, image=None, conda_file=None, description=None,
                 build=None, **kwargs):
        self.name, self.version, self.image, self.conda_file = name, version, image, conda_file
        self.description = description

    def _yaml(self):
        return {"name": self.name, "image": self.image,
                "conda_file": absolute(self.conda_file) if self.conda_file else None}


class _Outputs(Bag):
    """node.outputs: NAME -> the node's output, whose path/type/mode may be set; on a pipeline
    job, assigning an Output sets the bound node output's."""

    def __setattr__(self, name, value):
        cur = self.__dict__.get(name)
        if isinstance(cur, Output) and isinstance(value, Output) and cur is not value:
            cur.type = value.type or cur.type
            cur.path, cur.mode = value.path, value.mode
            return
        self.__dict__[name] = value


_building = []  # node lists of the dsl.pipeline functions being called
_names = itertools.count(1)


class Parallel:
    """A parallel component (parallel_run_function, load_component) and, once called with its
    inputs, a node: a parallel job. job.dump(path) writes the job YAML `fanout run` accepts."""

    def __init__(self, settings, inputs, outputs, task):
        self._settings = settings  # top-level job keys as the YAML spells them
        self._component_inputs = inputs  # name -> Input or literal (declarations)
        self._component_outputs = outputs  # name -> Output
        self.task = task
        self.inputs = Bag(**dict(inputs))
        self.outputs = _Outputs(**{k: Output(type=v.type, path=v.path, mode=v.mode)
                                   for k, v in outputs.items()})
        self.resources = settings.pop("resources", None) or ResourceConfiguration()
        self.retry_settings = settings.pop("retry_settings", None) or RetrySettings()
        self.compute = settings.pop("compute", None)
        self.environment_variables = settings.pop("environment_variables", None)
        self.name = settings.get("name")
        self.display_name = settings.get("display_name")
        self.status = None

    def __getattr__(self, name):
        settings = self.__dict__.get("_settings", {})
        if name in settings:
            return settings[name]
        raise AttributeError(name)

    def __setattr__(self, name, value):
        if name in self.__dict__.get("_settings", {}):
            self._settings[name] = value
        else:
            self.__dict__[name] = value

    def __call__(self, **bindings):
        node = copy.deepcopy(self)
        for key, value in bindings.items():
            if key not in self._component_inputs:
                raise TypeError("%s() got an unexpected keyword argument %r (its inputs: %s)" %
                                (self._settings.get("name") or "parallel", key,
                                 ", ".join(self._component_inputs) or "none"))
            setattr(node.inputs, key, value)
        if _building:
            _building[-1].append(node)
        return node

    def set_resources(self, *, instance_count=None, instance_type=None, **kwargs):
        self.resources = ResourceConfiguration(instance_count=instance_count,
                                               instance_type=instance_type)

    def _input_yaml(self, name):
        decl = self._component_inputs.get(name)
        value = getattr(self.inputs, name)
        if isinstance(value, Output):
            return {"type": value.type, "path": absolute(value.path)}
        if isinstance(value, Input):
            if value.type in ("string", "integer", "number", "boolean"):
                return value.default
            typ = value.type
            if isinstance(decl, Input) and typ == "uri_folder" and decl.type != "uri_folder":
                typ = decl.type  # Input(path=...) bound to a declared uri_file or mltable
            return {"type": typ, "path": absolute(value.path), "mode": value.mode}
        if value is None and isinstance(decl, Input):
            return decl._yaml()
        return value

    def _job(self):
        """The job as the YAML's mapping."""
        s = dict(self._settings)
        job = {"type": "parallel", "name": s.pop("name", None),
               "display_name": s.pop("display_name", None),
               "description": s.pop("description", None)}
        job["compute"] = self.compute
        job["inputs"] = {n: self._input_yaml(n) for n in self._component_inputs}
        job["outputs"] = {n: {"type": o.type, "path": absolute(o.path), "mode": o.mode}
                          for n, o in vars(self.outputs).items()}
        for key in ("input_data", "mini_batch_size", "partition_keys"):
            job[key] = s.pop(key, None)
        if job["mini_batch_size"] is not None:
            job["mini_batch_size"] = str(job["mini_batch_size"])
        r = self.resources
        if isinstance(r, dict):
            r = ResourceConfiguration(**r)
        job["resources"] = {"instance_count": r.instance_count,
                            "instance_type": r.instance_type} if r else None
        if job["resources"] == {"instance_count": None, "instance_type": None}:
            job["resources"] = None
        rs = self.retry_settings
        if isinstance(rs, dict):
            rs = RetrySettings(**rs)
        job["retry_settings"] = {"max_retries": rs.max_retries, "timeout": rs.timeout}
        if job["retry_settings"] == {"max_retries": None, "timeout": None}:
            job["retry_settings"] = None
        job["environment_variables"] = self.environment_variables
        job.update(s)  # the rest: thresholds, logging_level, max_concurrency_per_instance, ...
        job["task"] = self._task_yaml()
        return job

    def _task_yaml(self):
        t = self.task
        if isinstance(t, dict):
            t = RunFunction(**{k: v for k, v in t.items() if k != "type"})
        env = t.environment
        if isinstance(env, Environment):
            env = env._yaml()
        return {"type": "run_function", "code": absolute(t.code) if t.code else None,
                "entry_script": t.entry_script, "program_arguments": t.program_arguments,
                "append_row_to": t.append_row_to, "environment": env}

    def dump(self, dest, **kwargs):
        """Writes this job as the parallel job YAML to `dest` (a path or an open file)."""
        if hasattr(dest, "write"):
            import tempfile
            with tempfile.NamedTemporaryFile("r", suffix=".yml") as tmp:
                dump_yaml(self._job(), tmp.name)
                dest.write(tmp.read())
            return
        dump_yaml(self._job(), os.fspath(dest),
                  header="# parallel job written by fanout's azure.ai.ml (docs/azure-sdk.md)")


def parallel_run_function(*, name=None, display_name=None, description=None, tags=None,
                          properties=None, inputs=None, outputs=None, instance_count=None,
                          instance_type=None, max_concurrency_per_instance=None,
                          error_threshold=None, mini_batch_error_threshold=None, task=None,
                          mini_batch_size=None, partition_keys=None, input_data=None,
                          retry_settings=None, logging_level=None, environment_variables=None,
                          resources=None, docker_args=None, shm_size=None, identity=None,
                          is_deterministic=None, experiment_name=None, **kwargs):
    """A parallel component: calling it with its inputs gives a node (a parallel job)."""
    for key in ("docker_args", "shm_size", "identity"):
        if locals()[key] is not None:
            note_ignored("parallel_run_function(%s=...)" % key)
    if isinstance(retry_settings, dict):
        retry_settings = RetrySettings(**retry_settings)
    if resources is None and (instance_count is not None or instance_type is not None):
        resources = ResourceConfiguration(instance_count=instance_count,
                                          instance_type=instance_type)
    settings = {"name": name, "display_name": display_name, "description": description,
                "tags": tags, "properties": properties, "input_data": input_data,
                "mini_batch_size": mini_batch_size, "partition_keys": partition_keys,
                "max_concurrency_per_instance": max_concurrency_per_instance,
                "error_threshold": error_threshold,
                "mini_batch_error_threshold": mini_batch_error_threshold,
                "logging_level": logging_level, "resources": resources,
                "retry_settings": retry_settings, "environment_variables": environment_variables,
                "experiment_name": experiment_name}
    settings.update(kwargs)
    component = Parallel(settings, dict(inputs or {}), dict(outputs or {}),
                         task or RunFunction())
    component._origin = call_site("parallel_run_function()")
    return component


class Command(Parallel):
    """A command component (command(), load_component of a `type: command` file) and its nodes:
    a pipeline's preparation step, run here as `/bin/sh -c COMMAND` in its code folder with
    ${{inputs.x}} and ${{outputs.x}} replaced by paths and values; it is no parallel job, so it
    has no job YAML."""

    def dump(self, dest, **kwargs):
        raise TypeError("%s: a command job is run by fanout's MLClient itself, not by `fanout "
                        "run`; only parallel jobs have a job YAML" % (self.name or "command"))

    def _value(self, kind, name):
        if kind == "outputs":
            out = getattr(self.outputs, name, None)
            if not isinstance(out, Output) or out.path is None:
                raise ValueError("%s: command: ${{outputs.%s}}: no such output" % (
                    self.name or "command", name))
            return absolute(out.path)
        if name not in self._component_inputs:
            raise ValueError("%s: command: ${{inputs.%s}}: no such input (inputs: %s)" % (
                self.name or "command", name, ", ".join(self._component_inputs) or "none"))
        v = self._input_yaml(name)
        return v["path"] if isinstance(v, dict) else ("" if v is None else str(v))

    def run_local(self):
        """Runs the command to its end; returns (state, exit status)."""
        for out in vars(self.outputs).values():
            path = absolute(out.path)
            os.makedirs(path if out.type != "uri_file" else os.path.dirname(path), exist_ok=True)
        line = re.sub(r"\$\{\{\s*(inputs|outputs)\.([A-Za-z0-9_]+)\s*\}\}",
                      lambda m: self._value(m.group(1), m.group(2)), self.task.command or "")
        env = dict(os.environ)
        env.update({k: str(v) for k, v in (self.environment_variables or {}).items()})
        rc = subprocess.call(["/bin/sh", "-c", line], cwd=absolute(self.task.code or "."),
                             env=env)
        return ("succeeded" if rc == 0 else "failed"), rc


def command(*, name=None, display_name=None, description=None, inputs=None, outputs=None,
            code=None, command=None, environment=None, environment_variables=None,
            compute=None, **kwargs):
    """A command component (see Command)."""
    node = Command({"name": name, "display_name": display_name, "description": description,
                    "compute": compute, "environment_variables": environment_variables},
                   dict(inputs or {}), dict(outputs or {}),
                   Bag(command=command, code=code, environment=environment))
    node._origin = call_site("command()")
    return node


def load_component(source=None, *, relative_origin=None, **kwargs):
    """A parallel or command component from its YAML file; relative paths are meant from the
    file's folder."""
    path = os.fspath(source)
    data = load_yaml(path)
    base = os.path.dirname(os.path.abspath(path))
    if data.get("type", "command") not in ("parallel", "command"):
        raise ValueError("%s: type: fanout's load_component reads parallel and command "
                         "components (got %r)" % (path, data.get("type")))
    data = dict(data)
    is_command = data.get("type", "command") == "command"
    data.pop("$schema", None)
    data.pop("type", None)
    inputs = {}
    for n, v in (data.pop("inputs", None) or {}).items():
        if isinstance(v, dict):
            v = dict(v)
            if v.get("path") is not None:
                v["path"] = absolute(v["path"], base)
            inputs[n] = Input(**v)
        else:
            inputs[n] = v
    outputs = {}
    for n, v in (data.pop("outputs", None) or {}).items():
        v = dict(v or {})
        if v.get("path") is not None:
            v["path"] = absolute(v["path"], base)
        outputs[n] = Output(**v)
    if is_command:
        return command(inputs=inputs, outputs=outputs, command=data.get("command"),
                       code=absolute(data.get("code") or ".", base),
                       **{k: data.get(k) for k in ("name", "display_name", "description",
                                                   "environment_variables")})
    task = dict(data.pop("task", None) or {})
    task["code"] = absolute(task.get("code") or ".", base)
    task.pop("type", None)
    resources = data.pop("resources", None)
    if isinstance(resources, dict):
        resources = ResourceConfiguration(**resources)
    retry = data.pop("retry_settings", None)
    if isinstance(retry, dict):
        retry = RetrySettings(**retry)
    data.update(resources=resources, retry_settings=retry)
    component = Parallel(data, inputs, outputs, RunFunction(**task))
    component._origin = call_site("load_component(%r)" % path)
    return component


# ---------------------------------------------------------------------------------------------
# Pipelines

class PipelineJob:
    """What a dsl.pipeline function returns: its nodes, in the order they were made (an input can
    only be an earlier node's output, so this order runs them)."""

    def __init__(self, name, nodes, outputs, settings, tags=None):
        self.name = None
        self.display_name = name
        self.tags = dict(tags or {})
        self.description = settings.get("description")
        self.nodes = nodes
        self.jobs = {}
        for node in nodes:
            key = node._settings.get("name") or "parallel"
            while key in self.jobs:
                key = "%s_%d" % (key, next(_names))
            self.jobs[key] = node
        self.outputs = _Outputs(**outputs)
        self.settings = Bag(**settings)
        self.compute = settings.get("default_compute")
        self.experiment_name = None
        self.status = None


def pipeline(func=None, *, name=None, display_name=None, description=None, compute=None,
             default_compute=None, experiment_name=None, tags=None, **kwargs):
    """@pipeline / @pipeline(...): calling the function builds a PipelineJob of the nodes it
    makes; a dict it returns names the pipeline's outputs."""

    def wrap(fn):
        def build(*args, **fn_kwargs):
            _building.append([])
            try:
                result = fn(*args, **fn_kwargs)
            finally:
                nodes = _building.pop()
            if _building:  # a pipeline called inside another: its nodes are the outer's too
                _building[-1].extend(nodes)
            outputs = dict(result) if isinstance(result, dict) else {}
            return PipelineJob(name or display_name or fn.__name__, nodes, outputs,
                               {"default_compute": default_compute or compute,
                                "description": description or fn.__doc__}, tags)
        build.__name__, build.__doc__ = fn.__name__, fn.__doc__
        return build

    return wrap(func) if callable(func) else wrap
