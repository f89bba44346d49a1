"""Azure ML SDK v1 shapes run by fanout (docs/azure-sdk.md), the running half: ParallelRunStep
translated to the parallel job YAML `fanout run` reads, Pipeline / Experiment.submit running the
steps through fanout.Client one after another, the runs and step runs a program follows, and
Run.get_context() in an entry script. azureml/_fanout_v1.py re-exports these."""

import os
import shlex
import shutil
import sys
import uuid

from _fanout_azure import Bag, Runner, absolute, call_site, dump_yaml, note_ignored, run_fanout_job
from azureml._fanout_v1 import (ActivityFailedException, DatasetConsumptionConfig, PipelineData,
                                PipelineParameter, UserErrorException, _Dataset, _param)


class ParallelRunStep:
    def __init__(self, name, parallel_run_config, inputs, output=None, side_inputs=None,
                 arguments=None, allow_reuse=True, tags=None, properties=None):
        if not inputs:
            raise ValueError("ParallelRunStep %s: inputs: at least one dataset" % name)
        self.name, self.config = name, parallel_run_config
        self.inputs, self.output = list(inputs), output
        self.side_inputs, self.arguments = list(side_inputs or []), list(arguments or [])

    def _job(self, workspace, run_id, params=None):
        """The parallel job YAML's mapping for this step in run `run_id` whose pipeline
        parameters are `params`."""
        c = self.config._resolved(params)
        scratch = os.path.join(workspace.folder, "azureml-runs", run_id, self.name)
        inputs, names = {}, {}
        for i, ds in enumerate(self.inputs + self.side_inputs):
            n = ds.input_name or getattr(ds, "name", None) or "input_%d" % i
            names[id(ds)] = n
            if isinstance(ds, DatasetConsumptionConfig):
                ds = _param(ds.dataset, params)
            if isinstance(ds, PipelineData):
                inputs[n] = {"type": "uri_folder", "path": os.path.join(*ds._local(workspace,
                                                                                     run_id))}
            else:
                inputs[n] = ds._input(os.path.join(scratch, n))
        outputs = {}
        if self.output is not None:
            outputs[self.output.name] = {"type": "uri_folder",
                                         "path": os.path.join(*self.output._local(workspace,
                                                                                  run_id))}
        args = []
        for a in self.arguments:
            if isinstance(a, PipelineData):
                args.append("${{outputs.%s}}" % a.name if a is self.output else
                            "${{inputs.%s}}" % names.get(id(a), a.name))
            elif isinstance(a, (_Dataset, DatasetConsumptionConfig)):
                args.append("${{inputs.%s}}" % names[id(a)])
            elif isinstance(a, PipelineParameter):
                args.append(shlex.quote(str(_param(a, params))))
            else:
                args.append(shlex.quote(str(a)))
        for flag in ("error_threshold", "allowed_failed_count", "allowed_failed_percent",
                     "logging_level", "run_invocation_timeout", "run_max_try",
                     "process_count_per_node", "node_count", "mini_batch_size",
                     "append_row_file_name"):
            v = getattr(c, flag)
            if v is not None and not (flag == "mini_batch_size" and c.partition_keys):
                args += ["--" + flag, shlex.quote(str(v))]
        append = str(c.output_action).lower() == "append_row" and self.output is not None
        env = getattr(c.environment, "name", None)
        ct = getattr(c.compute_target, "name", c.compute_target)
        first = names[id(self.inputs[0])]
        return {"type": "parallel", "name": self.name, "description": c.description,
                "compute": ct, "environment": env,
                "inputs": inputs, "outputs": outputs,
                "input_data": "${{inputs.%s}}" % first,
                "partition_keys": c.partition_keys,
                "environment_variables": c.environment_variables,
                # A step whose failures stay within its thresholds completes, as ParallelRunStep's.
                "fanout": {"allow_partial": True},
                "task": {"type": "run_function",
                         "code": absolute(c.source_directory or "."),
                         "entry_script": c.entry_script, "program_arguments": " ".join(args),
                         "append_row_to": "${{outputs.%s}}" % self.output.name if append
                         else None}}


class _StepJob:
    """A ParallelRunStep in one run: what fanout.Client.submit takes (dump(path))."""

    def __init__(self, step, workspace, run_id, params):
        self.step, self.workspace, self.run_id, self.params = step, workspace, run_id, params
        # An error in the job file names the user's ParallelRunConfig line (_fanout_azure).
        self._origin = getattr(step.config, "_origin", None)

    def dump(self, path):
        dump_yaml(self.step._job(self.workspace, self.run_id, self.params), path,
                  header="# ParallelRunStep %s, translated by fanout's azureml" % self.step.name)


class Pipeline:
    def __init__(self, workspace, steps, description=None, default_datastore=None,
                 default_source_directory=None, resolve_closure=True, _workflow_provider=None,
                 _service_endpoint=None, **kwargs):
        self.workspace, self.steps, self.description = workspace, list(steps), description

    def validate(self):
        return []

    def publish(self, *args, **kwargs):
        note_ignored("Pipeline.publish")
        return Bag(id=None, name=kwargs.get("name"))


class PortDataReference:
    def __init__(self, root, path_on_datastore, name):
        self.root, self.path_on_datastore, self.name = root, path_on_datastore, name

    def download(self, local_path, overwrite=False, show_progress=True):
        """Copies the output into local_path/<path_on_datastore>; returns that folder."""
        src = os.path.join(self.root, self.path_on_datastore)
        dest = os.path.join(local_path, self.path_on_datastore)
        for folder, _, files in os.walk(src):
            for f in files:
                s = os.path.join(folder, f)
                d = os.path.join(dest, os.path.relpath(s, src))
                if os.path.exists(d) and not overwrite:
                    continue
                os.makedirs(os.path.dirname(d), exist_ok=True)
                shutil.copy2(s, d)
                if show_progress:
                    print("Downloaded %s" % d, flush=True)
        return dest


class StepRun:
    def __init__(self, pipeline_run, step):
        self.pipeline_run, self.step = pipeline_run, step
        self.id = "%s_%s" % (pipeline_run.id, step.name)
        self.name = step.name
        self.status = "NotStarted"
        self.fanout_job = None

    def get_status(self):
        return self.status

    def get_output_data(self, name):
        out = self.step.output
        if out is None or out.name != name:
            raise UserErrorException("step %s has no output %r" % (self.name, name))
        root, rel = out._local(self.pipeline_run.workspace, self.pipeline_run.id)
        return PortDataReference(root, rel, name)

    def wait_for_completion(self, show_output=False, **kwargs):
        return self.pipeline_run.wait_for_completion(show_output, **kwargs)


class PipelineRun:
    def __init__(self, experiment, pipeline, params=None):
        self.experiment, self.pipeline, self.params = experiment, pipeline, dict(params or {})
        self.workspace = experiment.workspace
        self.id = "%s_%s" % (experiment.name, uuid.uuid4().hex[:8])
        self.step_runs = [StepRun(self, s) for s in pipeline.steps]
        self._submitted_at = call_site("Experiment.submit()")
        self._runner = Runner([self._step(sr) for sr in self.step_runs])

    def _step(self, sr):
        def go():
            sr.status = "Running"
            state, rc, job = run_fanout_job(_StepJob(sr.step, self.workspace, self.id, self.params),
                                            submitted_at=self._submitted_at)
            sr.fanout_job = job
            sr.status = "Completed" if rc == 0 else "Failed"
            return state, rc
        return go

    def get_status(self):
        return self._runner.status

    def get_portal_url(self):
        return "file://" + os.path.join(self.workspace.folder, "azureml-runs", self.id)

    def find_step_run(self, name):
        return [sr for sr in self.step_runs if sr.name == name]

    def get_steps(self):
        return list(self.step_runs)

    def get_children(self):
        return iter(self.step_runs)

    def cancel(self):
        for sr in self.step_runs:
            if sr.fanout_job is not None:
                sr.fanout_job.cancel()

    def wait_for_completion(self, show_output=False, timeout_seconds=None, raise_on_error=True):
        """Follows the run to its end; ActivityFailedException when it did not complete (and
        `raise_on_error`)."""
        if show_output:
            print("PipelineRunId: %s\nLink to local run: %s" % (self.id, self.get_portal_url()),
                  flush=True)
        self._runner.join(timeout_seconds)
        if show_output:
            for sr in self.step_runs:
                print("StepRun(%s) Status: %s" % (sr.name, sr.status), flush=True)
                if sr.fanout_job is not None:
                    st = sr.fanout_job.status()
                    print("  fanout job %d: %s, %s of %s mini-batches failed" % (
                        sr.fanout_job.id, st.get("state"), st.get("failed", 0),
                        st.get("total", "?")), flush=True)
            print("PipelineRun Execution Summary\n==============================\n"
                  "PipelineRun Status: %s" % self.get_status(), flush=True)
        if self._runner.error is not None and raise_on_error:
            raise self._runner.error
        if self.get_status() != "Completed" and raise_on_error:
            raise ActivityFailedException("run %s: %s" % (self.id, self.get_status()),
                                          self._runner.exit_status)
        return {"runId": self.id, "status": self.get_status()}


class Run:
    """azureml.core.Run: in an entry script, Run.get_context() is an offline run whose logging
    goes to stderr and whose experiment's workspace is the working folder."""

    @staticmethod
    def get_context(allow_offline=True, **kwargs):
        return _OfflineRun()


class _OfflineRun:
    def __init__(self):
        self.id = "OfflineRun_%s" % uuid.uuid4().hex[:8]
        self.experiment = Bag(name="offline", workspace=None)

    def log(self, name, value, description=""):
        print("fanout: run.log %s=%r" % (name, value), file=sys.stderr, flush=True)

    def log_list(self, name, value, description=""):
        self.log(name, value)

    def log_row(self, name, description=None, **kwargs):
        self.log(name, kwargs)

    def tag(self, key, value=None):
        pass

    def upload_file(self, name, path_or_stream):
        note_ignored("Run.upload_file")

    def get_status(self):
        return "Running"


class Experiment:
    def __init__(self, workspace, name, **kwargs):
        self.workspace, self.name = workspace, name

    def submit(self, config, tags=None, pipeline_parameters=None, **kwargs):
        """Starts the pipeline's steps, one after another, on fanout; returns its run."""
        if not isinstance(config, Pipeline):
            raise TypeError("Experiment.submit: fanout runs Pipeline objects (got %s)" %
                            type(config).__name__)
        run = PipelineRun(self, config, pipeline_parameters)
        run._runner.start()
        return run
