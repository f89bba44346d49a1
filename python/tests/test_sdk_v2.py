"""The Azure ML SDK v2 shapes (python/sdk/azure/ai/ml, docs/azure-sdk.md) without a run: the job
YAML a component's node dumps, load_component, dsl.pipeline, the notes of cloud-only settings,
an error located at the user's line, and MLClient.jobs' list / archive / restore / download /
validate over jobs whose steps have ended."""

import inspect
import os

import pytest

import _fanout_azure
from _fanout_azure import Runner, exit_status_of, load_yaml, located
from azure.ai.ml import Input, MLClient, Output, dsl, load_component
from azure.ai.ml._fanout_v2_client import _LocalJob, _note_cloud_settings
from azure.ai.ml.constants import AssetTypes, ListViewType
from azure.ai.ml.entities import Environment
from azure.ai.ml.exceptions import JobException, ValidationException
from azure.ai.ml.parallel import RunFunction, parallel_run_function


def _component(**extra):
    kw = dict(name="score", inputs=dict(files=Input(type=AssetTypes.URI_FOLDER),
                                        label=Input(type="string", default="x")),
              outputs=dict(rows=Output(type=AssetTypes.URI_FILE)),
              input_data="${{inputs.files}}", mini_batch_size=10, instance_count=2,
              max_concurrency_per_instance=3, error_threshold=5, logging_level="DEBUG",
              retry_settings=dict(max_retries=1, timeout=30),
              task=RunFunction(code="./src", entry_script="score.py",
                               program_arguments="--label ${{inputs.label}}",
                               environment=Environment(image="mcr.microsoft.com/x"),
                               append_row_to="${{outputs.rows}}"))
    kw.update(extra)
    return parallel_run_function(**kw)


def test_a_node_dumps_the_parallel_job_yaml(in_tmp):
    node = _component()(files=Input(path="./data"), label="v2")
    node.outputs.rows.path = "./out/rows.txt"
    node.dump("job.yml")
    job = load_yaml("job.yml")
    assert job["type"] == "parallel" and job["name"] == "score"
    assert job["inputs"]["files"] == {"type": "uri_folder", "path": str(in_tmp / "data")}
    assert job["inputs"]["label"] == "v2"
    assert job["outputs"]["rows"] == {"type": "uri_file", "path": str(in_tmp / "out/rows.txt")}
    assert job["mini_batch_size"] == "10"
    assert job["resources"] == {"instance_count": 2}
    assert job["retry_settings"] == {"max_retries": 1, "timeout": 30}
    assert (job["max_concurrency_per_instance"], job["error_threshold"],
            job["logging_level"]) == (3, 5, "DEBUG")
    task = job["task"]
    assert task["code"] == str(in_tmp / "src") and task["entry_script"] == "score.py"
    assert task["program_arguments"] == "--label ${{inputs.label}}"
    assert task["append_row_to"] == "${{outputs.rows}}"
    assert task["environment"] == {"image": "mcr.microsoft.com/x"}


def test_an_unknown_input_is_a_type_error():
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'filez' \(its inputs: "
                                        r"files, label\)"):
        _component()(filez=Input(path="."))


def test_cloud_only_keywords_are_noted_once(capsys):
    _component(docker_args="--ipc=host", shm_size="2g")
    _component(docker_args="--ipc=host")
    err = capsys.readouterr().err
    assert err.count("parallel_run_function(docker_args=...): ignored") == 1
    assert err.count("parallel_run_function(shm_size=...): ignored") == 1


def test_load_component_paths_are_from_its_folder(in_tmp):
    os.makedirs("comp")
    with open("comp/score.yml", "w") as f:
        f.write("type: parallel\nname: c\ninputs:\n  files:\n    type: uri_folder\n"
                "    path: ./data\noutputs:\n  rows:\n    type: uri_file\n"
                "input_data: ${{inputs.files}}\nmini_batch_size: \"2\"\ntask:\n"
                "  type: run_function\n  code: ./src\n  entry_script: s.py\n")
    node = load_component(source="comp/score.yml")()
    node.outputs.rows.path = "out.txt"
    node.dump("job.yml")
    job = load_yaml("job.yml")
    assert job["inputs"]["files"]["path"] == str(in_tmp / "comp/data")
    assert job["task"]["code"] == str(in_tmp / "comp/src")
    assert job["mini_batch_size"] == "2"


def test_a_pipeline_keeps_its_nodes_in_order_and_its_outputs(in_tmp):
    comp = _component()

    @dsl.pipeline(default_compute="cpu-cluster", tags={"k": "v"})
    def two(data):
        first = comp(files=data)
        second = comp(files=Input(path="./other"))
        return {"first": first.outputs.rows, "second": second.outputs.rows}

    job = two(Input(path="./data"))
    assert list(job.jobs) == ["score", "score_1"] or len(job.jobs) == 2
    assert job.settings.default_compute == "cpu-cluster" and job.tags == {"k": "v"}
    job.outputs.first = Output(type="uri_file", path="./out/first.txt")
    first = list(job.jobs.values())[0]
    assert first.outputs.rows.path == "./out/first.txt"


def test_cloud_settings_are_noted_once_each(in_tmp, capsys):
    comp = _component(task=RunFunction(code="./src", entry_script="s.py",
                                       environment="azureml:AzureML-sklearn-1.0@latest"))

    @dsl.pipeline()
    def pipe():
        comp(files=Input(path="."))

    job = pipe()
    job.settings.default_compute = "cpu-cluster"
    _note_cloud_settings(job, job.jobs)
    _note_cloud_settings(job, job.jobs)
    err = capsys.readouterr().err.splitlines()
    assert err.count("fanout: compute cpu-cluster: ignored (fanout runs on this machine)") == 1
    assert err.count("fanout: environment azureml:AzureML-sklearn-1.0@latest: ignored "
                     "(cloud-only; the workers use fanout's Python)") == 1


def test_a_job_file_error_names_the_users_line():
    comp = parallel_run_function(name="score", mini_batch_size="10 parsecs",
                                 inputs=dict(files=Input()))
    line = inspect.currentframe().f_lineno - 2  # the call's first line, as Python reports it
    msg = ("/w/.fanout-job-911-1.yml:18: mini_batch_size: expected a file count or a size like "
           "\"10kb\" (got \"10 parsecs\")")
    got = located(msg, comp(files=Input(path=".")), submitted_at="prog.py:30: x()")
    assert got == ("%s:%d: parallel_run_function(): mini_batch_size: expected a file count or a "
                   "size like \"10kb\" (got \"10 parsecs\") [submitted at prog.py:30: x()]" %
                   (__file__, line))
    assert ".fanout-job-" not in got


def test_partial_is_exit_status_4_as_the_cli_says():
    assert exit_status_of("partial") == 4
    assert exit_status_of("succeeded") == 0 and exit_status_of("failed") == 1
    r = Runner([lambda: ("partial", exit_status_of("partial"))]).start()
    assert r.join(30)
    assert (r.status, r.exit_status) == ("Failed", 4)


def _ended_job(client, tmp, node_name="score", log_dir=None):
    """A job of `client` whose step has ended, with an output folder and a logs folder."""
    node = _component()(files=Input(path=str(tmp)))
    out = tmp / "outputs" / "rows"
    (out / "sub").mkdir(parents=True)
    (out / "rows.txt").write_text("a 1\n")
    (out / "sub" / "more.txt").write_text("b 2\n")
    node.outputs.rows = Output(type="uri_folder", path=str(out))
    runner = Runner([]).start()
    runner.join(30)
    local = _LocalJob(node, "score-1234", runner, {node_name: node})
    if log_dir is not None:
        local.node_jobs[node_name] = type("FakeFanoutJob", (), {
            "status": lambda self: {"log_dir": str(log_dir)}})()
    client.jobs._jobs[local.name] = local
    return local


def test_download_lays_out_as_azure(in_tmp):
    ml = MLClient.from_config()
    logs = in_tmp / "logs"
    (logs / "sys" / "job_report").mkdir(parents=True)
    (logs / "job_progress_overview.txt").write_text("done\n")
    (logs / "sys" / "job_report" / "processed_mini-batches.csv").write_text("x\n")
    job = _ended_job(ml, in_tmp, log_dir=logs)
    ml.jobs.download(job.name, download_path="dl", output_name="rows")
    assert (in_tmp / "dl/named-outputs/rows/rows.txt").read_text() == "a 1\n"
    assert (in_tmp / "dl/named-outputs/rows/sub/more.txt").read_text() == "b 2\n"
    assert not (in_tmp / "dl/artifacts").exists()
    ml.jobs.download(job.name, download_path="dl2")
    assert (in_tmp / "dl2/artifacts/logs/job_progress_overview.txt").exists()
    assert (in_tmp / "dl2/artifacts/logs/sys/job_report/processed_mini-batches.csv").exists()
    assert not (in_tmp / "dl2/named-outputs").exists()
    ml.jobs.download(job.name, download_path="dl3", all=True)
    assert (in_tmp / "dl3/named-outputs/rows/rows.txt").exists()
    assert (in_tmp / "dl3/artifacts/logs/job_progress_overview.txt").exists()
    with pytest.raises(ValueError, match="has no output 'nope' \\(its outputs: rows\\)"):
        ml.jobs.download(job.name, output_name="nope")


def test_download_of_a_running_job_is_refused(in_tmp):
    ml = MLClient.from_config()
    job = _ended_job(ml, in_tmp)
    job.runner.status = "Running"
    with pytest.raises(JobException, match="download needs a job that ended"):
        ml.jobs.download(job.name)


def test_list_show_archive_restore(in_tmp):
    ml = MLClient.from_config()
    job = _ended_job(ml, in_tmp)
    assert ml.jobs.get(job.name) is job and ml.jobs.show(job.name) is job
    assert ml.jobs.list() == [job]
    ml.jobs.archive(job.name)
    assert ml.jobs.list() == []
    assert ml.jobs.list(list_view_type=ListViewType.ARCHIVED_ONLY) == [job]
    assert ml.jobs.list(list_view_type=ListViewType.ALL) == [job]
    ml.jobs.restore(job)
    assert ml.jobs.list() == [job]
    assert [c.display_name for c in ml.jobs.list(parent_job_name=job.name)] == ["score"]
    with pytest.raises(KeyError, match="was not created by this MLClient"):
        ml.jobs.get("other")


def test_a_running_job_cannot_be_archived(in_tmp):
    ml = MLClient.from_config()
    job = _ended_job(ml, in_tmp)
    job.runner.status = "Running"
    with pytest.raises(JobException, match="only a job that ended can be archived"):
        ml.jobs.archive(job.name)


def test_validate(in_tmp):
    os.makedirs("src")
    open("src/score.py", "w").close()
    ml = MLClient.from_config()
    good = _component()(files=Input(path="."))
    assert ml.jobs.validate(good).passed
    bad = _component(task=RunFunction(code="./src", entry_script="nope.py"))(
        files=Input(path="./missing"))
    result = ml.jobs.validate(bad)
    assert not result.passed
    assert set(result.error_messages) == {"jobs.score.inputs.files.path",
                                          "jobs.score.task.entry_script"}
    unbound = _component()()
    assert "jobs.score.inputs.files" in ml.jobs.validate(unbound).error_messages
    with pytest.raises(ValidationException, match="entry_script: no such file"):
        ml.jobs.validate(bad, raise_on_failure=True)


def test_workspace_ids_without_config_are_local(in_tmp):
    ml = MLClient.from_config()
    assert (ml.subscription_id, ml.resource_group_name) == ("local", "local")
    with open("config.json", "w") as f:
        f.write('{"subscription_id": "s", "resource_group": "g", "workspace_name": "w"}')
    ml = MLClient.from_config()
    assert (ml.subscription_id, ml.resource_group_name, ml.workspace_name) == ("s", "g", "w")


def test_notes_go_to_stderr_once(capsys):
    _fanout_azure.note_ignored("thing")
    _fanout_azure.note_ignored("thing")
    assert capsys.readouterr().err == "fanout: thing: ignored (cloud-only; fanout runs it locally)\n"
