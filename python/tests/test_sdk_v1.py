"""The Azure ML SDK v1 shapes (python/sdk/azureml, docs/azure-sdk.md) without a run: a workspace
without config.json, ParallelRunConfig's rules, and a ParallelRunStep translated to the parallel
job YAML, with the user's ParallelRunConfig line kept for fanout's errors."""

import inspect
import json
import os

import pytest

from _fanout_azure import located
from azureml.core import Dataset, Workspace
from azureml.data import OutputFileDatasetConfig
from azureml.pipeline.core import PipelineParameter
from azureml.pipeline.steps import ParallelRunConfig, ParallelRunStep
from azureml._fanout_v1_runs import _StepJob


def test_a_workspace_without_config_json_has_local_ids(in_tmp, capsys):
    ws = Workspace.from_config()
    # The first cell of Azure's notebooks.
    line = "\n".join(["Workspace name: " + ws.name, "Azure region: " + ws.location,
                      "Subscription id: " + ws.subscription_id,
                      "Resource group: " + ws.resource_group])
    assert line == ("Workspace name: local\nAzure region: local\nSubscription id: local\n"
                    "Resource group: local")
    assert ws.folder == str(in_tmp)
    assert "Workspace.from_config: no config.json: ignored" in capsys.readouterr().err


def test_a_workspace_from_config_json(in_tmp):
    os.makedirs(".azureml")
    with open(".azureml/config.json", "w") as f:
        json.dump({"subscription_id": "sub", "resource_group": "rg", "workspace_name": "ws"}, f)
    os.makedirs("deeper/down")
    os.chdir("deeper/down")
    ws = Workspace.from_config()
    assert (ws.subscription_id, ws.resource_group, ws.name) == ("sub", "rg", "ws")
    assert ws.folder == str(in_tmp)


def _config(**extra):
    kw = dict(environment=None, entry_script="score.py", error_threshold=3,
              output_action="append_row", compute_target="cpu-cluster", node_count=1,
              process_count_per_node=2, mini_batch_size="5", source_directory="./src",
              append_row_file_name="rows.txt", run_max_try=2)
    kw.update(extra)
    return ParallelRunConfig(**kw)


@pytest.mark.parametrize("key,value,message", [
    ("output_action", "write", "output_action: expected append_row or summary_only"),
    ("error_threshold", -2, "error_threshold"),
    ("node_count", 0, "node_count"),
    ("run_max_try", 0, "run_max_try"),
    ("entry_script", "", "entry_script: required"),
])
def test_parallel_run_config_rules(key, value, message):
    with pytest.raises(ValueError, match=message):
        _config(**{key: value})


def test_a_step_is_translated_to_the_job_yaml(in_tmp):
    os.makedirs("data")
    open("data/a.txt", "w").close()
    ws = Workspace.from_config()
    files = Dataset.File.from_files(path=str(in_tmp / "data"))
    out = OutputFileDatasetConfig(name="scores")
    label = PipelineParameter(name="label", default_value="v1")
    step = ParallelRunStep(name="score", parallel_run_config=_config(),
                           inputs=[files.as_named_input("files")], output=out,
                           arguments=["--label", label])
    job = step._job(ws, "run-1", {"label": "chosen"})
    assert job["type"] == "parallel" and job["name"] == "score"
    assert job["input_data"] == "${{inputs.files}}"
    assert job["inputs"]["files"]["type"] == "uri_folder"
    assert job["inputs"]["files"]["path"] == str(in_tmp / "data")
    assert job["outputs"]["scores"]["type"] == "uri_folder"
    assert job["fanout"] == {"allow_partial": True}
    task = job["task"]
    assert task["code"] == str(in_tmp / "src") and task["entry_script"] == "score.py"
    assert task["append_row_to"] == "${{outputs.scores}}"
    args = task["program_arguments"]
    assert args.startswith("--label chosen ")
    for flag in ("--error_threshold 3", "--run_max_try 2", "--process_count_per_node 2",
                 "--node_count 1", "--mini_batch_size 5", "--append_row_file_name rows.txt"):
        assert flag in args


def test_a_job_file_error_names_the_users_parallel_run_config_line(in_tmp):
    config = ParallelRunConfig(environment=None, entry_script="score.py", error_threshold=3,
                               output_action="append_row", compute_target="cpu-cluster",
                               node_count=1, mini_batch_size="10 parsecs")
    line = inspect.currentframe().f_lineno - 3  # the call's first line, as Python reports it
    files = Dataset.File.from_files(path=str(in_tmp))
    step = ParallelRunStep(name="score", parallel_run_config=config,
                           inputs=[files.as_named_input("files")])
    job = _StepJob(step, Workspace.from_config(), "run-1", None)
    got = located("/w/.fanout-job-5-1.yml:20: mini_batch_size: expected a file count", job)
    assert got == "%s:%d: ParallelRunConfig(): mini_batch_size: expected a file count" % (
        __file__, line)
