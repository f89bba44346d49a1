#!/usr/bin/env python3
"""The Azure ML SDK v1 shapes of python/sdk (docs/azure-sdk.md) under `fanout python`: a
Workspace / Dataset / ParallelRunConfig / ParallelRunStep / Pipeline / Experiment.submit /
wait_for_completion / get_output_data program gives the same rows and exit status as the
equivalent job YAML run by `fanout run` (succeeded; a failure within error_threshold completes,
as ParallelRunStep's; one past it fails); save_to_yaml -> load_yaml keeps every parameter (with
and without PyYAML); a save_to_yaml file runs with `fanout run FILE --input DIR` as its YAML
does; ParallelRunConfig's rules; a program in the shape of Azure's ParallelRunStep
notebooks (blob datastore, PipelineParameter, DatasetConsumptionConfig, resubmission); outside
`fanout python`, `import azureml.core` is not ours. Under the pyenv python3 and Debian's
/usr/bin/python3. Environment: tests/meson.build."""

import json
import os
import subprocess

import support
from support import check_rows_once, fail, read_rows, scratch, write

ENTRY = """import os
def init():
    pass
def run(mini_batch):
    rows = []
    for p in mini_batch:
        text = open(p).read().strip()
        if text == "boom":
            raise RuntimeError("boom in " + os.path.basename(p))
        rows.append("%s %s" % (os.path.basename(p), text.upper()))
    return rows
"""

PROGRAM = """import os, sys, tempfile
from azureml.core import Dataset, Environment, Experiment, Workspace
from azureml.core.compute import AmlCompute, ComputeTarget
from azureml.core.conda_dependencies import CondaDependencies
from azureml.exceptions import ActivityFailedException
from azureml.pipeline.core import Pipeline, PipelineData
from azureml.pipeline.steps import ParallelRunConfig, ParallelRunStep

ws = Workspace.from_config()
datastore = ws.get_default_datastore()
datastore.upload(src_dir="./data", target_path="inputs", overwrite=True, show_progress=False)
files = Dataset.File.from_files(path=(datastore, "inputs"))
compute = ComputeTarget(workspace=ws, name="cpu-cluster")
env = Environment(name="batch-env")
env.python.conda_dependencies = CondaDependencies.create(pip_packages=["numpy"])
output_dir = PipelineData(name="scores", datastore=datastore)
config = ParallelRunConfig(
    source_directory="./src", entry_script="score.py", mini_batch_size="1",
    error_threshold=ERROR_THRESHOLD, output_action="append_row", environment=env,
    compute_target=compute, node_count=1, process_count_per_node=2,
    append_row_file_name="rows.txt", run_max_try=1, run_invocation_timeout=60)
step = ParallelRunStep(name="score-files", parallel_run_config=config,
                       inputs=[files.as_named_input("files")], output=output_dir,
                       arguments=["--label", "v1"], allow_reuse=False)
pipeline = Pipeline(workspace=ws, steps=[step])
run = Experiment(ws, "fanout-test").submit(pipeline)
try:
    run.wait_for_completion(show_output=True)
except ActivityFailedException as e:
    print("status:", run.get_status())
    sys.exit(e.exit_status)
step_run = run.find_step_run("score-files")[0]
port = step_run.get_output_data("scores")
target = tempfile.mkdtemp()
port.download(local_path=target, show_progress=False)
with open(os.path.join(target, port.path_on_datastore, "rows.txt")) as f, \\
        open(sys.argv[1], "w") as out:
    out.write(f.read())
print("status:", run.get_status())
"""

YAML = """type: parallel
name: score-files
inputs:
  files: {type: uri_folder, path: ./data}
outputs:
  scores: {type: uri_folder, path: ./out/yaml}
input_data: ${{inputs.files}}
task:
  type: run_function
  code: ./src
  entry_script: score.py
  program_arguments: >-
    --label v1 --error_threshold %d --logging_level INFO --run_invocation_timeout 60
    --run_max_try 1 --process_count_per_node 2 --node_count 1 --mini_batch_size 1
    --append_row_file_name rows.txt
  append_row_to: ${{outputs.scores}}
fanout: {allow_partial: true}
"""

ROUND_TRIP = """import sys
from azureml.core import Environment, Workspace
from azureml.core.compute import ComputeTarget
from azureml.pipeline.steps import ParallelRunConfig
ws = Workspace.from_config()
c = ParallelRunConfig(environment=Environment("env1"), entry_script="score.py",
    error_threshold=3, output_action="append_row", compute_target=ComputeTarget(ws, "gpu"),
    node_count=2, process_count_per_node=3, mini_batch_size="5kb", source_directory="./src",
    description="round trip", logging_level="DEBUG", run_invocation_timeout=45,
    run_max_try=4, append_row_file_name="r.txt", allowed_failed_count=6,
    allowed_failed_percent=12.5, environment_variables={"A": "1", "B": "two words"})
c.save_to_yaml("prc.yml")
d = ParallelRunConfig.load_yaml(ws, "prc.yml")
for k in ParallelRunConfig._KEYS:
    if getattr(c, k) != getattr(d, k):
        sys.exit("%s: %r became %r" % (k, getattr(c, k), getattr(d, k)))
if d.environment.name != "env1" or d.compute_target.name != "gpu":
    sys.exit("environment or compute target lost")
sys.modules["yaml"] = None  # the same file read without PyYAML
e = ParallelRunConfig.load_yaml(ws, "prc.yml")
for k in ParallelRunConfig._KEYS:
    if getattr(c, k) != getattr(e, k):
        sys.exit("without PyYAML: %s: %r became %r" % (k, getattr(c, k), getattr(e, k)))
bad = [dict(output_action="both"), dict(allowed_failed_percent=101), dict(node_count=0),
       dict(run_max_try=0), dict(error_threshold=-2), dict(logging_level="LOUD"),
       dict(run_invocation_timeout=0), dict(partition_keys="store"),
       dict(output_action="summary_only", append_row_file_name="x.txt")]
base = dict(environment=None, entry_script="score.py", error_threshold=1,
            output_action="append_row", compute_target=None, node_count=1)
for b in bad:
    try:
        ParallelRunConfig(**dict(base, **b))
    except ValueError as e:
        key = list(b)[-1]
        if key not in str(e):
            sys.exit("%s: the message does not name it: %s" % (b, e))
    else:
        sys.exit("%s: accepted" % b)
print("round trip ok")
"""

# The shape of Azure's ParallelRunStep notebooks: a registered blob container, a dataset behind a
# PipelineParameter, parameters for mini_batch_size and process_count_per_node, get_children,
# then the same pipeline submitted again with other parameter values.
NOTEBOOK = """import os, sys
from azureml.core import Dataset, Datastore, Environment, Experiment, Workspace
from azureml.core.compute import AmlCompute, ComputeTarget
from azureml.core.model import Model
from azureml.core.runconfig import CondaDependencies, DEFAULT_CPU_IMAGE
from azureml.data.dataset_consumption_config import DatasetConsumptionConfig
from azureml.pipeline.core import Pipeline, PipelineData, PipelineParameter
from azureml.pipeline.steps import ParallelRunConfig, ParallelRunStep

ws = Workspace.from_config()
if "cpu-cluster" in ws.compute_targets:
    compute_target = ws.compute_targets["cpu-cluster"]
else:
    config = AmlCompute.provisioning_configuration(vm_size="STANDARD_D2_V2", max_nodes=2)
    compute_target = ComputeTarget.create(ws, "cpu-cluster", config)
    compute_target.wait_for_completion(show_output=True)
    print(compute_target.status.serialize())
blob = Datastore.register_azure_blob_container(ws, datastore_name="sample_store",
                                               container_name="sampledata",
                                               account_name="pipelinedata", overwrite=True)
blob.upload(src_dir="./data", target_path="sample", overwrite=True, show_progress=False)
all_ds = Dataset.File.from_files(path=blob.path("sample"), validate=False)
param = PipelineParameter(name="data_param", default_value=all_ds)
consumption = DatasetConsumptionConfig("data_config", param).as_mount()
output_dir = PipelineData(name="inferences", datastore=ws.get_default_datastore())
Model.register(workspace=ws, model_path="src", model_name="m")
env = Environment(name="batch_environment")
env.python.conda_dependencies = CondaDependencies.create(pip_packages=["pillow"])
env.docker.base_image = DEFAULT_CPU_IMAGE
config = ParallelRunConfig(
    source_directory="src", entry_script="score.py",
    mini_batch_size=PipelineParameter(name="batch_size_param", default_value="2"),
    error_threshold=10, output_action="append_row", append_row_file_name="outputs.txt",
    environment=env, compute_target=compute_target,
    process_count_per_node=PipelineParameter(name="process_count_param", default_value=2),
    node_count=1)
step = ParallelRunStep(name="predict", parallel_run_config=config, inputs=[consumption],
                       output=output_dir, allow_reuse=False)
pipeline = Pipeline(workspace=ws, steps=[step])
experiment = Experiment(ws, "notebook")


def rows_of(run, where):
    run.wait_for_completion(show_output=True)
    step_run = next(run.get_children())
    port = step_run.get_output_data(output_dir.name)
    port.download(local_path=where)
    for root, _, files in os.walk(where):
        for f in files:
            if f.endswith("outputs.txt"):
                return sorted(open(os.path.join(root, f)).read().split("\\n"))


first = rows_of(experiment.submit(pipeline), "results1")
one = Dataset.File.from_files(path=blob.path("sample/a.txt"), validate=False)
second = rows_of(experiment.submit(pipeline, pipeline_parameters={
    "data_param": one, "batch_size_param": "1", "process_count_param": 1}), "results2")
print("first", [r for r in first if r])
print("second", [r for r in second if r])
"""


def fanout_python(args, cwd, interp, db):
    env = dict(os.environ, FANOUT_DB=db)
    if interp:
        env["FANOUT_PYTHON"] = interp
    return subprocess.run([support.FANOUT, "python", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def make_workspace(root, texts):
    support.make_files(os.path.join(root, "data"), sorted(texts), lambda n: texts[n] + "\n")
    write(os.path.join(root, "src", "score.py"), ENTRY)
    write(os.path.join(root, ".azureml", "config.json"),
          json.dumps({"subscription_id": "0", "resource_group": "rg", "workspace_name": "ws"}))


def same_as_yaml(tmp, interp, texts, threshold, want_rc, what):
    """The v1 program and the YAML give the same exit status `want_rc` (None: the same non-zero
    one) and, when it is 0, the same rows."""
    root = os.path.join(tmp, what.replace(" ", "_") + ("_usr" if interp else ""))
    make_workspace(root, texts)
    write(os.path.join(root, "prog.py"), PROGRAM.replace("ERROR_THRESHOLD", str(threshold)))
    db = os.path.join(root, "store.db")
    p = fanout_python(["prog.py", os.path.join(root, "sdk_rows.txt")], root, interp, db)
    y = write(os.path.join(root, "job.yml"), YAML % threshold)
    r = support.fanout("run", y, "--db", db, check=False)
    label = "%s (%s)" % (what, interp or "python3 on PATH")
    if want_rc is None:  # failed: whatever non-zero status `fanout run` gives
        want_rc = r.returncode if r.returncode != 0 else -1
    if p.returncode != want_rc or r.returncode != want_rc:
        fail("%s: exit %d (SDK) and %d (YAML), expected %d\n%s\n%s\n%s" % (
            label, p.returncode, r.returncode, want_rc, p.stdout, p.stderr, r.stderr))
    state = "Completed" if want_rc == 0 else "Failed"
    if "status: " + state not in p.stdout or "PipelineRun Status: " + state not in p.stdout:
        fail("%s: expected status %s\n%s" % (label, state, p.stdout))
    if "conda dependencies: ignored" not in p.stderr:
        fail("%s: no notice that the conda dependencies are ignored\n%s" % (label, p.stderr))
    if want_rc != 0:
        return
    expected = ["%s %s" % (n, t.upper()) for n, t in texts.items() if t != "boom"]
    check_rows_once(read_rows(os.path.join(root, "sdk_rows.txt")), expected, label + ": SDK")
    check_rows_once(read_rows(os.path.join(root, "out", "yaml", "rows.txt")), expected,
                    label + ": YAML")


def notebook_shape(tmp, interp):
    root = os.path.join(tmp, "notebook" + ("_usr" if interp else ""))
    make_workspace(root, {"a.txt": "a", "b.txt": "b", "c.txt": "c"})
    write(os.path.join(root, "prog.py"), NOTEBOOK)
    p = fanout_python(["prog.py"], root, interp, os.path.join(root, "s.db"))
    want = ("first ['a.txt A', 'b.txt B', 'c.txt C']\nsecond ['a.txt A']\n")
    if p.returncode != 0 or want not in p.stdout:
        fail("the notebook-shaped program (%s): exit %d, expected %r\n%s\n%s" % (
            interp or "python3 on PATH", p.returncode, want, p.stdout, p.stderr))
    for notice in ("ComputeTarget.create: ignored", "register_azure_blob_container: ignored",
                   "Model.register: ignored"):
        if notice not in p.stderr:
            fail("notebook-shaped program: no notice %r\n%s" % (notice, p.stderr))


def round_trip(tmp, interp):
    root = os.path.join(tmp, "round_trip" + ("_usr" if interp else ""))
    make_workspace(root, {"a.txt": "a"})
    write(os.path.join(root, "prog.py"), ROUND_TRIP)
    p = fanout_python(["prog.py"], root, interp, os.path.join(root, "s.db"))
    if p.returncode != 0 or "round trip ok" not in p.stdout:
        fail("save_to_yaml/load_yaml and the rules (%s): exit %d\n%s\n%s" % (
            interp or "python3 on PATH", p.returncode, p.stdout, p.stderr))


SAVE_CONFIG = """from azureml.core import Environment, Workspace
from azureml.core.compute import ComputeTarget
from azureml.pipeline.steps import ParallelRunConfig
ws = Workspace.from_config()
ParallelRunConfig(
    source_directory="./src", entry_script="score.py", mini_batch_size="1",
    error_threshold=10, output_action="append_row", environment=Environment(name="batch-env"),
    compute_target=ComputeTarget(workspace=ws, name="cpu-cluster"), node_count=1,
    process_count_per_node=2, append_row_file_name="rows.txt", run_max_try=1,
    run_invocation_timeout=60).save_to_yaml("parallel_run_config.yml")
"""


# The shape of Azure's partition-per-folder and partition-per-column ParallelRunStep notebooks:
# azureml.core.workspace, VERSION, get_status().serialize(), a file dataset of a pattern with a
# partition_format given from the datastore's root, partition_keys, and a tabular dataset's
# partition_by / to_pandas_dataframe.
PARTITIONS = """import os, sys, tempfile
import azureml.core
from azureml.core.workspace import Workspace
from azureml.core import Dataset, Environment, Experiment
from azureml.core.compute import AmlCompute, ComputeTarget
from azureml.pipeline.core import Pipeline, PipelineData
from azureml.pipeline.steps import ParallelRunConfig, ParallelRunStep
print("SDK version:", azureml.core.VERSION)
ws = Workspace.from_config()
datastore = ws.get_default_datastore()
target = ComputeTarget.create(ws, "cpu-cluster",
                              AmlCompute.provisioning_configuration(vm_size="STANDARD_D2_V2"))
target.wait_for_completion(show_output=True)
print(target.get_status().serialize())
for user, season, genre in (("u1", "winter", "disco"), ("u1", "fall", "piano"),
                            ("u2", "fall", "piano"), ("u2", "spring", "piano")):
    datastore.upload("data/" + genre, "parts/%s/%s" % (user, season), overwrite=True,
                     show_progress=False)
files = Dataset.File.from_files(path=(datastore, "parts/*/*/*.txt"),
                                partition_format="parts/{user}/{season}/{genre}.txt",
                                validate=False)
if files.partition_keys != ["user", "season", "genre"]:
    sys.exit("partition_keys: %r" % files.partition_keys)
out = PipelineData(name="sizes", datastore=datastore)
config = ParallelRunConfig(source_directory="./src", entry_script="parts.py",
                           partition_keys=["user", "genre"], error_threshold=5,
                           output_action="append_row", append_row_file_name="sizes.txt",
                           environment=Environment(name="e"), compute_target=target,
                           node_count=2, run_invocation_timeout=600)
step = ParallelRunStep(name="sizes", inputs=[files.as_named_input("partitioned")], output=out,
                       parallel_run_config=config, allow_reuse=False)
run = Experiment(ws, "partitions").submit(Pipeline(workspace=ws, steps=[step]))
run.wait_for_completion(show_output=True)
port = run.find_step_run(step.name)[0].get_output_data(out.name)
where = tempfile.mkdtemp()
port.download(local_path=where, show_progress=False)
with open(os.path.join(where, port.path_on_datastore, "sizes.txt")) as f:
    print("rows", sorted(f.read().split()))
datastore.upload_files(["./table.csv"], ".", "tables", overwrite=True, show_progress=False)
table = Dataset.Tabular.from_delimited_files(path=(datastore, "tables/*.csv"))
parted = table.partition_by(partition_keys=["Store", "Brand"], target=(datastore, "by_key"),
                            name="parted")
print("keys", parted.partition_keys, parted.as_named_input("t").partition_keys)
try:
    import pandas
except ImportError:
    pandas = None
if pandas is not None and len(table.to_pandas_dataframe()) != 3:
    sys.exit("to_pandas_dataframe: %r" % table.to_pandas_dataframe())
"""

PARTS_ENTRY = """def init():
    pass
def run(mini_batch, mini_batch_context=None):
    key = mini_batch_context.partition_key_value
    return ["%s/%s:%d" % (key["user"], key["genre"], len(mini_batch))]
"""


def partition_notebooks(tmp):
    root = os.path.join(tmp, "partitions")
    for genre in ("disco", "piano"):
        support.make_files(os.path.join(root, "data", genre), [genre + ".txt"])
    write(os.path.join(root, "src", "parts.py"), PARTS_ENTRY)
    write(os.path.join(root, ".azureml", "config.json"),
          json.dumps({"subscription_id": "0", "resource_group": "rg", "workspace_name": "ws"}))
    write(os.path.join(root, "table.csv"), "Store,Brand,INCOME\n2,t,1\n2,m,2\n5,t,3\n")
    write(os.path.join(root, "prog.py"), PARTITIONS)
    p = fanout_python(["prog.py"], root, None, os.path.join(root, "s.db"))
    want = ["rows ['u1/disco:1', 'u1/piano:1', 'u2/piano:2']",
            "keys ['Store', 'Brand'] ['Store', 'Brand']", "SDK version:", "provisioningState"]
    if p.returncode != 0 or any(w not in p.stdout for w in want):
        fail("the partition notebooks' shape: exit %d, expected %r\n%s\n%s" % (
            p.returncode, want, p.stdout, p.stderr))


def saved_config_runs(tmp):
    """`fanout run parallel_run_config.yml --input DIR` of a save_to_yaml file: the same rows,
    exactly once, and exit status as the equivalent YAML (a failure within error_threshold
    completes); without --input, an error naming the file and --input."""
    for what, texts in (("saved config", {"a.txt": "a", "b.txt": "b", "c.txt": "c"}),
                        ("saved config within threshold",
                         {"a.txt": "a", "b.txt": "boom", "c.txt": "c"})):
        root = os.path.join(tmp, what.replace(" ", "_"))
        make_workspace(root, texts)
        write(os.path.join(root, "save.py"), SAVE_CONFIG)
        p = fanout_python(["save.py"], root, None, os.path.join(root, "s.db"))
        prc = os.path.join(root, "parallel_run_config.yml")
        if p.returncode != 0 or not os.path.isfile(prc):
            fail("%s: save_to_yaml: exit %d\n%s" % (what, p.returncode, p.stderr))
        db = os.path.join(root, "store.db")
        r = support.fanout("run", prc, "--db", db, check=False)
        if r.returncode != 2 or prc not in r.stderr or "--input" not in r.stderr:
            fail("%s: fanout run without --input: exit %d, expected 2 and a message naming "
                 "the file and --input\n%s" % (what, r.returncode, r.stderr))
        r = support.fanout("run", prc, "--input", os.path.join(root, "data"), "--output",
                           os.path.join(root, "out", "v1"), "--db", db, check=False)
        y = support.fanout("run", write(os.path.join(root, "job.yml"), YAML % 10), "--db", db,
                           check=False)
        if r.returncode != 0 or y.returncode != 0:
            fail("%s: exit %d (saved config) and %d (YAML), expected 0\n%s\n%s" % (
                what, r.returncode, y.returncode, r.stderr, y.stderr))
        expected = ["%s %s" % (n, t.upper()) for n, t in texts.items() if t != "boom"]
        check_rows_once(read_rows(os.path.join(root, "out", "v1", "rows.txt")), expected,
                        what + ": saved config")
        check_rows_once(read_rows(os.path.join(root, "out", "yaml", "rows.txt")), expected,
                        what + ": YAML")


def not_ours_outside(tmp):
    for interp in ["python3"] + [p for p in ("/usr/bin/python3",) if os.path.exists(p)]:
        r = subprocess.run([interp, "-c", "import azureml.core; print(azureml.core.__file__)"],
                           capture_output=True, text=True, cwd=tmp, timeout=60)
        if r.returncode == 0 and os.path.join("python", "sdk") in r.stdout:
            fail("%s imports fanout's azureml.core outside fanout python: %s" % (interp,
                                                                                  r.stdout))
        if r.returncode != 0 and "ModuleNotFoundError" not in r.stderr:
            fail("%s: import azureml.core failed unexpectedly:\n%s" % (interp, r.stderr))


def main():
    support.require_fanout()
    interpreters = [None] + [p for p in ("/usr/bin/python3",) if os.path.exists(p)]
    with scratch("azure-v1") as tmp:
        not_ours_outside(tmp)
        saved_config_runs(tmp)
        partition_notebooks(tmp)
        for interp in interpreters:
            round_trip(tmp, interp)
            notebook_shape(tmp, interp)
            same_as_yaml(tmp, interp, {"a.txt": "a", "b.txt": "b", "c.txt": "c"}, 10, 0,
                         "succeeded")
            # A failed file within error_threshold: the step completes (exit 0), as
            # ParallelRunStep's does; past it (error_threshold 0) the run fails.
            same_as_yaml(tmp, interp, {"a.txt": "a", "b.txt": "boom", "c.txt": "c"}, 10, 0,
                         "within threshold")
            same_as_yaml(tmp, interp, {"a.txt": "a", "b.txt": "boom", "c.txt": "c"}, 0, None,
                         "past threshold")
    print("ok")


if __name__ == "__main__":
    main()
