"""Azure ML SDK v1 shapes run by fanout (docs/azure-sdk.md): a local folder-based Workspace and its
default datastore, datasets of local files, ParallelRunConfig with its rules and its own YAML
(save_to_yaml / load_yaml), ParallelRunStep translated to the parallel job YAML `fanout run`
reads; the steps, pipelines and runs are in _fanout_v1_runs.py (re-exported here)."""

import glob
import json
import os
import re
import shutil
import sys
import uuid

from _fanout_azure import Bag, absolute, call_site, dump_yaml, load_yaml, note_ignored


class UserErrorException(Exception):
    pass


class ActivityFailedException(Exception):
    """A run that did not complete; `exit_status` is the exit status of its `fanout run`."""

    def __init__(self, message, exit_status=None):
        super().__init__(message)
        self.exit_status = exit_status


# ---------------------------------------------------------------------------------------------
# Workspace and datastore

class Datastore:
    """A datastore that is a local folder: upload copies into it, download out of it."""

    def __init__(self, workspace, name, root):
        self.workspace, self.name, self.root = workspace, name, root
        self.datastore_type = "local"

    @staticmethod
    def register_azure_blob_container(workspace, datastore_name, container_name=None,
                                      account_name=None, **kwargs):
        """A blob container is a local folder here: <workspace>/datastores/<name>."""
        note_ignored("Datastore.register_azure_blob_container",
                     "the datastore is the local folder datastores/%s" % datastore_name)
        root = os.path.join(workspace.folder, "datastores", datastore_name)
        os.makedirs(root, exist_ok=True)
        store = Datastore(workspace, datastore_name, root)
        workspace.datastores[datastore_name] = store
        return store

    register_azure_file_share = register_azure_blob_container
    register_azure_data_lake_gen2 = register_azure_blob_container

    @staticmethod
    def get(workspace, datastore_name):
        if datastore_name not in workspace.datastores:
            raise UserErrorException("datastore %r is not in this workspace" % datastore_name)
        return workspace.datastores[datastore_name]

    def path(self, path_on_datastore=None):
        return DataPath(self, path_on_datastore or "")

    def _target(self, target_path):
        return os.path.join(self.root, target_path or "")

    def upload(self, src_dir, target_path=None, overwrite=False, show_progress=True):
        dest = self._target(target_path)
        for folder, _, files in os.walk(src_dir):
            for f in files:
                src = os.path.join(folder, f)
                dst = os.path.join(dest, os.path.relpath(src, src_dir))
                if os.path.exists(dst) and not overwrite:
                    continue
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(src, dst)
                if show_progress:
                    print("Uploaded %s" % src, flush=True)
        return DataPath(self, target_path or "")

    def upload_files(self, files, relative_root=None, target_path=None, overwrite=False,
                     show_progress=True):
        dest = self._target(target_path)
        for src in files:
            rel = os.path.relpath(src, relative_root) if relative_root else os.path.basename(src)
            dst = os.path.join(dest, rel)
            if os.path.exists(dst) and not overwrite:
                continue
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)
        return DataPath(self, target_path or "")

    def download(self, target_path, prefix=None, overwrite=False, show_progress=True):
        src = self._target(prefix)
        n = 0
        for folder, _, files in os.walk(src):
            for f in files:
                s = os.path.join(folder, f)
                d = os.path.join(target_path, os.path.relpath(s, self.root))
                if os.path.exists(d) and not overwrite:
                    continue
                os.makedirs(os.path.dirname(d), exist_ok=True)
                shutil.copy2(s, d)
                n += 1
        return n


class DataPath:
    def __init__(self, datastore, path_on_datastore):
        self.datastore, self.path_on_datastore = datastore, path_on_datastore

    def local(self):
        return os.path.join(self.datastore.root, self.path_on_datastore)


LOCAL = "local"  # the ids of a workspace without config.json


class Workspace:
    """A workspace that is a local folder (the folder of config.json, else the working folder);
    its default datastore is `<folder>/datastore`."""

    def __init__(self, subscription_id=None, resource_group=None, workspace_name=None,
                 auth=None, _folder=None, **kwargs):
        # Ids not given are strings that say so (Azure's notebooks print them with +).
        self.subscription_id = subscription_id or LOCAL
        self.resource_group = resource_group or LOCAL
        self.name = workspace_name or LOCAL
        self.folder = os.path.abspath(_folder or os.getcwd())
        self.location = "local"
        store = Datastore(self, "workspaceblobstore", os.path.join(self.folder, "datastore"))
        os.makedirs(store.root, exist_ok=True)
        self.datastores = {store.name: store}
        self.compute_targets = {}
        self.datasets = {}
        self.environments = {}

    @classmethod
    def from_config(cls, path=None, auth=None, _logger=None, _file_name=None):
        start = os.path.abspath(path or os.getcwd())
        if os.path.isfile(start):
            return cls._from_file(start)
        here = start
        while True:
            for sub in ("", ".azureml", "aml_config"):
                cand = os.path.join(here, sub, _file_name or "config.json")
                if os.path.isfile(cand):
                    return cls._from_file(cand)
            up = os.path.dirname(here)
            if up == here:
                break
            here = up
        note_ignored("Workspace.from_config: no config.json",
                     "the workspace is the working folder %s" % start)
        return cls(_folder=start)

    @classmethod
    def _from_file(cls, path):
        with open(path) as f:
            cfg = json.load(f)
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.basename(folder) in (".azureml", "aml_config"):
            folder = os.path.dirname(folder)
        return cls(cfg.get("subscription_id"), cfg.get("resource_group"),
                   cfg.get("workspace_name"), _folder=folder)

    @classmethod
    def get(cls, name=None, auth=None, subscription_id=None, resource_group=None, **kwargs):
        return cls(subscription_id, resource_group, name)

    create = get

    def get_default_datastore(self):
        return self.datastores["workspaceblobstore"]

    def write_config(self, path=None, file_name=None):
        folder = os.path.join(path or self.folder, ".azureml")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, file_name or "config.json"), "w") as f:
            json.dump({"subscription_id": self.subscription_id,
                       "resource_group": self.resource_group,
                       "workspace_name": self.name}, f, indent=1)

    def get_details(self):
        return {"name": self.name, "location": "local", "folder": self.folder}


# ---------------------------------------------------------------------------------------------
# Compute, environments

class ComputeTargetException(Exception):
    pass


class ComputeTarget:
    """A compute target is reported, not created: every name exists and is this machine."""

    def __new__(cls, workspace=None, name=None, **kwargs):
        if cls is ComputeTarget:
            cls = AmlCompute
        return object.__new__(cls)

    def __init__(self, workspace=None, name=None, **kwargs):
        self.workspace, self.name = workspace, name
        self.type, self.provisioning_state = "local", "Succeeded"
        self.status = Bag(provisioning_state="Succeeded", current_node_count=1,
                          serialize=lambda: {"provisioningState": "Succeeded",
                                             "currentNodeCount": 1, "local": True})
        if workspace is not None:
            workspace.compute_targets[name] = self

    @staticmethod
    def create(workspace, name, provisioning_configuration):
        note_ignored("ComputeTarget.create", "fanout runs on this machine")
        return AmlCompute(workspace, name)

    def wait_for_completion(self, show_output=False, **kwargs):
        if show_output:
            print("compute %s: local (fanout runs on this machine)" % self.name, flush=True)

    def get_status(self):
        return self.status

    def delete(self):
        note_ignored("ComputeTarget.delete")


class AmlCompute(ComputeTarget):
    @staticmethod
    def provisioning_configuration(**kwargs):
        return Bag(**kwargs)


class CondaDependencies(Bag):
    @staticmethod
    def create(**kwargs):
        note_ignored("conda dependencies", "the workers use fanout's Python")
        return CondaDependencies(**kwargs)

    def add_pip_package(self, *a, **k):
        pass

    def add_conda_package(self, *a, **k):
        pass


class Environment:
    """Kept by name; its conda, pip and docker settings are noted as ignored (the workers use
    fanout's Python)."""

    def __init__(self, name=None, **kwargs):
        self.name = name
        self.version = None
        self.python = Bag(conda_dependencies=None, user_managed_dependencies=False)
        self.docker = Bag(enabled=False, base_image=None)
        self.environment_variables = {}

    @classmethod
    def from_conda_specification(cls, name, file_path):
        note_ignored("Environment conda specification", "the workers use fanout's Python")
        return cls(name)

    @classmethod
    def from_pip_requirements(cls, name, file_path, pip_version=None):
        note_ignored("Environment pip requirements", "the workers use fanout's Python")
        return cls(name)

    @classmethod
    def from_docker_image(cls, name, image, **kwargs):
        note_ignored("Environment docker image", "the workers use fanout's Python")
        return cls(name)

    @classmethod
    def get(cls, workspace, name, version=None, label=None):
        return cls(name)

    def register(self, workspace):
        return self


class Model:
    """Models stay where they are: register notes it and returns one whose path is the local
    path; Model.get_model_path gives it back."""

    _registered = {}

    def __init__(self, workspace=None, name=None, version=None, **kwargs):
        self.workspace, self.name, self.version = workspace, name, version or 1
        self.path = Model._registered.get(name)

    @staticmethod
    def register(workspace, model_path, model_name, **kwargs):
        note_ignored("Model.register", "the model is used from %s" % model_path)
        Model._registered[model_name] = os.path.abspath(model_path)
        return Model(workspace, model_name)

    @staticmethod
    def get_model_path(model_name, version=None, _workspace=None):
        return Model._registered.get(model_name, model_name)


# ---------------------------------------------------------------------------------------------
# Datasets

def _paths(path, base):
    """Local paths of a dataset's `path`: a str, a (datastore, path) tuple, a DataPath, or a
    list of them."""
    items = path if isinstance(path, list) else [path]
    out = []
    for p in items:
        if isinstance(p, tuple):
            p = DataPath(p[0], p[1])
        if isinstance(p, DataPath):
            p = p.local()
        out.append(absolute(p, base))
    return out


class _Dataset:
    def __init__(self, paths, partition_format=None, **options):
        self.paths, self.partition_format, self.options = paths, partition_format, options
        self.name = None
        self.input_name = None

    def as_named_input(self, name):
        c = _Dataset.__new__(type(self))
        c.__dict__.update(self.__dict__)
        c.input_name = name
        return c

    def as_mount(self, *args, **kwargs):
        return self

    as_download = as_mount
    as_direct = as_mount

    @property
    def partition_keys(self):
        """The keys of partition_format (`{user}/{season}/*.wav` has user and season), in order;
        a dataset made by partition_by has that call's keys."""
        keys = getattr(self, "_partition_keys", None)
        if keys is not None:
            return list(keys)
        return re.findall(r"\{([^{}/]+)\}", self.partition_format or "")

    def register(self, workspace, name, description=None, tags=None, create_new_version=False):
        self.name = name
        workspace.datasets[name] = self
        return self

    def _mltable(self, folder):
        """Writes an MLTable describing this dataset in `folder` and returns the folder."""
        os.makedirs(folder, exist_ok=True)
        lines = ["paths:"]
        for p in self.paths:
            key = "pattern" if any(c in p for c in "*?[") else (
                "folder" if os.path.isdir(p) else "file")
            lines.append("  - %s: %s" % (key, json.dumps(p)))
        lines += self._transformations()
        with open(os.path.join(folder, "MLTable"), "w") as f:
            f.write("\n".join(lines) + "\n")
        return folder


class FileDataset(_Dataset):
    def _input(self, scratch):
        """The job YAML's input for this dataset."""
        if len(self.paths) == 1 and os.path.isdir(self.paths[0]):
            return {"type": "uri_folder", "path": self.paths[0],
                    "partition_format": self.partition_format}
        if len(self.paths) == 1 and self.partition_format and any(c in self.paths[0]
                                                                  for c in "*?["):
            # A pattern whose partition_format names its last segments (Azure's notebooks give
            # both from the datastore's root): the folder of the format's literal leading
            # segments, read with the rest of the format.
            fmt = self.partition_format.strip("/").split("/")
            base = self.paths[0].rstrip("/").rsplit("/", len(fmt))[0]
            while len(fmt) > 1 and not any(c in fmt[0] for c in "{}*?["):
                base = os.path.join(base, fmt.pop(0))
            return {"type": "uri_folder", "path": base, "partition_format": "/".join(fmt)}
        if len(self.paths) == 1 and os.path.isfile(self.paths[0]) and not self.partition_format:
            return {"type": "uri_file", "path": self.paths[0]}
        return {"type": "mltable", "path": self._mltable(scratch)}

    def _transformations(self):
        if not self.partition_format:
            return []
        return ["transformations:", "  - extract_columns_from_partition_format: %s" %
                json.dumps(self.partition_format)]

    def to_path(self):
        out = []
        for p in self.paths:
            if os.path.isdir(p):
                out += sorted("/" + os.path.relpath(os.path.join(d, f), p)
                              for d, _, fs in os.walk(p) for f in fs)
            else:
                out += ["/" + os.path.basename(x) for x in glob.glob(p)]
        return out


class TabularDataset(_Dataset):
    def _files(self):
        out = []
        for p in self.paths:
            if os.path.isdir(p):
                out += sorted(os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs)
            else:
                out += sorted(glob.glob(p))
        return out

    def to_pandas_dataframe(self, on_error="null", out_of_range_datetime="null"):
        """The rows of the dataset's files (pandas must be importable)."""
        import pandas
        o = self.options
        header = 0 if o.get("header", True) not in (False, "NO_HEADERS", "no_header") else None
        frames = [pandas.read_csv(f, sep=o.get("separator", ","), header=header)
                  for f in self._files()]
        return pandas.concat(frames, ignore_index=True) if frames else pandas.DataFrame()

    def partition_by(self, partition_keys, target, name=None, show_progress=True,
                     partition_as_file_dataset=False):
        """The same rows, partitioned by `partition_keys` when a step runs over them (one
        mini-batch per combination): nothing is written to `target` (noted)."""
        note_ignored("TabularDataset.partition_by target",
                     "the rows are partitioned by the keys when the step runs")
        c = TabularDataset(self.paths, self.partition_format, **self.options)
        c._partition_keys = list(partition_keys)
        c.name = name
        return c

    def _input(self, scratch):
        return {"type": "mltable", "path": self._mltable(scratch)}

    def _transformations(self):
        o = self.options
        sep = o.get("separator", ",")
        step = ["  - read_delimited:", "      delimiter: %s" % json.dumps(sep),
                "      header: %s" % ("all_files_same_headers" if o.get("header", True) not in (
                    False, "NO_HEADERS", "no_header") else "no_header")]
        if self.partition_format:
            step.append("  - extract_columns_from_partition_format: %s" %
                        json.dumps(self.partition_format))
        return ["transformations:"] + step


class _FileFactory:
    @staticmethod
    def from_files(path, validate=True, partition_format=None, is_file=False):
        return FileDataset(_paths(path, None), partition_format)


class _TabularFactory:
    @staticmethod
    def from_delimited_files(path, validate=True, include_path=False, infer_column_types=True,
                             set_column_types=None, separator=",", header=True,
                             partition_format=None, support_multi_line=False,
                             empty_as_string=False, encoding="utf8"):
        return TabularDataset(_paths(path, None), partition_format, separator=separator,
                              header=header)


class Dataset:
    File = _FileFactory
    Tabular = _TabularFactory

    @staticmethod
    def get_by_name(workspace, name, version="latest"):
        if name not in workspace.datasets:
            raise UserErrorException("dataset %r is not registered in this workspace" % name)
        return workspace.datasets[name]


# ---------------------------------------------------------------------------------------------
# Outputs

class PipelineData:
    """A step's output folder: <default datastore>/azureml/<run id>/<name>."""

    def __init__(self, name, datastore=None, output_name=None, output_mode="mount",
                 output_path_on_compute=None, output_overwrite=None, data_type=None,
                 is_directory=None, pipeline_output_name=None, training_output=None):
        self.name = name
        self.datastore = datastore
        self.destination = None

    def as_dataset(self):
        return self

    def as_mount(self, *a, **k):
        return self

    as_upload = as_mount
    as_download = as_mount
    as_direct = as_mount

    def read_delimited_files(self, *a, **k):
        return self

    def register_on_complete(self, *a, **k):
        return self

    def _local(self, workspace, run_id):
        if self.destination is not None:
            store, rel = self.destination
            return store.root, rel
        store = self.datastore or workspace.get_default_datastore()
        return store.root, os.path.join("azureml", run_id, self.name)


class OutputFileDatasetConfig(PipelineData):
    def __init__(self, name=None, destination=None, source=None, partition_format=None):
        super().__init__(name or "output_%s" % uuid.uuid4().hex[:6])
        self.destination = destination


class PipelineParameter:
    """A value chosen when the pipeline is submitted (Experiment.submit(pipeline_parameters=
    {name: value})), else `default_value`."""

    def __init__(self, name, default_value=None):
        self.name, self.default_value = name, default_value


def _param(value, params):
    """`value`, or the value a PipelineParameter has in `params` (its default without one)."""
    if isinstance(value, PipelineParameter):
        return (params or {}).get(value.name, value.default_value)
    return value


class DatasetConsumptionConfig:
    """A dataset (or a PipelineParameter holding one) as a step input named `name`."""

    def __init__(self, name, dataset, mode="direct", path_on_compute=None):
        self.name, self.dataset, self.mode = name, dataset, mode
        self.input_name = name

    def as_mount(self, *args, **kwargs):
        return self

    as_download = as_mount
    as_direct = as_mount


# ---------------------------------------------------------------------------------------------
# ParallelRunConfig

_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _check_int(name, value, low):
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError("ParallelRunConfig: %s: expected an integer >= %d (got %r)" %
                         (name, low, value))


class ParallelRunConfig:
    """ParallelRunStep's settings, with the rules of its reference page."""

    _KEYS = ("entry_script", "error_threshold", "output_action", "mini_batch_size",
             "partition_keys", "node_count", "process_count_per_node", "logging_level",
             "run_invocation_timeout", "run_max_try", "append_row_file_name",
             "allowed_failed_count", "allowed_failed_percent", "source_directory", "description",
             "environment_variables")

    def __init__(self, environment, entry_script, error_threshold, output_action,
                 compute_target, node_count, process_count_per_node=None, mini_batch_size=None,
                 source_directory=None, description=None, logging_level="INFO",
                 run_invocation_timeout=60, run_max_try=3, append_row_file_name=None,
                 allowed_failed_count=None, allowed_failed_percent=None, partition_keys=None,
                 environment_variables=None):
        self.environment, self.compute_target = environment, compute_target
        self.entry_script, self.source_directory = entry_script, source_directory
        self.error_threshold, self.output_action = error_threshold, output_action
        self.node_count, self.process_count_per_node = node_count, process_count_per_node
        self.mini_batch_size, self.partition_keys = mini_batch_size, partition_keys
        self.description, self.logging_level = description, logging_level
        self.run_invocation_timeout, self.run_max_try = run_invocation_timeout, run_max_try
        self.append_row_file_name = append_row_file_name
        self.allowed_failed_count = allowed_failed_count
        self.allowed_failed_percent = allowed_failed_percent
        self.environment_variables = environment_variables
        self._origin = call_site("ParallelRunConfig()")
        self._validate()

    def _resolved(self, params):
        """The settings with each PipelineParameter given its value in `params`."""
        keys = self._KEYS + ("environment", "compute_target")
        return Bag(**{k: _param(getattr(self, k), params) for k in keys})

    def _validate(self):
        v = self._resolved(None)
        if not v.entry_script:
            raise ValueError("ParallelRunConfig: entry_script: required")
        action = str(v.output_action or "").lower()
        if action not in ("append_row", "summary_only"):
            raise ValueError("ParallelRunConfig: output_action: expected append_row or "
                             "summary_only (got %r)" % v.output_action)
        _check_int("error_threshold", v.error_threshold, -1)
        _check_int("allowed_failed_count", v.allowed_failed_count, -1)
        _check_int("node_count", v.node_count, 1)
        _check_int("process_count_per_node", v.process_count_per_node, 1)
        _check_int("run_max_try", v.run_max_try, 1)
        p = v.allowed_failed_percent
        if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float)) or
                              not (p == -1 or 0 <= p <= 100)):
            raise ValueError("ParallelRunConfig: allowed_failed_percent: expected a number from "
                             "0 to 100, or -1 (got %r)" % p)
        t = v.run_invocation_timeout
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0):
            raise ValueError("ParallelRunConfig: run_invocation_timeout: expected a number > 0 "
                             "(got %r)" % t)
        if str(v.logging_level).upper() not in _LEVELS:
            raise ValueError("ParallelRunConfig: logging_level: expected one of %s (got %r)" %
                             (", ".join(_LEVELS), v.logging_level))
        if v.partition_keys is not None:
            if not isinstance(v.partition_keys, list) or not v.partition_keys or not all(
                    isinstance(k, str) for k in v.partition_keys):
                raise ValueError("ParallelRunConfig: partition_keys: expected a non-empty list "
                                 "of column names (got %r)" % (v.partition_keys,))
            if v.mini_batch_size is not None:
                print("fanout: ParallelRunConfig: mini_batch_size is ignored when partition_keys "
                      "is given", file=sys.stderr)
        if v.append_row_file_name is not None and action != "append_row":
            raise ValueError("ParallelRunConfig: append_row_file_name: only with output_action "
                             "append_row (got output_action %r)" % v.output_action)

    # v1's own YAML: the constructor's parameters by name; environment and compute target by
    # their names.
    def save_to_yaml(self, path):
        data = {k: _param(getattr(self, k), None) for k in self._KEYS}
        if data["mini_batch_size"] is not None:
            data["mini_batch_size"] = str(data["mini_batch_size"])
        data["environment"] = {"name": getattr(self.environment, "name", self.environment)}
        ct = self.compute_target
        data["compute_target"] = getattr(ct, "name", ct)
        dump_yaml(data, os.fspath(path),
                  header="# ParallelRunConfig, written by fanout's azureml (docs/azure-sdk.md)")

    @staticmethod
    def load_yaml(workspace, path):
        data = load_yaml(os.fspath(path))
        unknown = set(data) - set(ParallelRunConfig._KEYS) - {"environment", "compute_target"}
        if unknown:
            raise ValueError("%s: %s: not a ParallelRunConfig parameter" %
                             (path, sorted(unknown)[0]))
        env = data.pop("environment", None)
        if isinstance(env, dict):
            env = Environment(env.get("name"))
        ct = data.pop("compute_target", None)
        if isinstance(ct, str) and workspace is not None:
            ct = workspace.compute_targets.get(ct) or ComputeTarget(workspace, ct)
        data.setdefault("error_threshold", -1)
        data.setdefault("output_action", "append_row")
        data.setdefault("node_count", 1)
        return ParallelRunConfig(environment=env, compute_target=ct, **data)


# The steps, pipelines and runs (a module of their own for its size); at the end, as they use
# the classes above.
from azureml._fanout_v1_runs import (Experiment, ParallelRunStep, Pipeline,  # noqa: E402,F401
                                     PipelineRun, PortDataReference, Run, StepRun)
