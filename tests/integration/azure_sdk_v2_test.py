#!/usr/bin/env python3
"""The Azure ML SDK v2 shapes of python/sdk (docs/azure-sdk.md) under `fanout python`: a program
built with parallel_run_function, dsl.pipeline and MLClient.jobs.create_or_update/stream gives the
same rows and exit status as the equivalent job YAML run by `fanout run`, succeeded and partial;
load_component + dump writes a job `fanout run` runs the same; a command component feeds a
parallel one in a pipeline; jobs.download lays out the outputs and logs as Azure does; a bad
setting gets fanout's own validation message, named at the program's own line; outside `fanout python`, `import azure.ai.ml` is not ours. Under the pyenv
python3 and Debian's /usr/bin/python3. Environment: tests/meson.build."""

import glob
import os
import re
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

PROGRAM = """import sys
from azure.ai.ml import MLClient, Input, Output, dsl
from azure.ai.ml.constants import AssetTypes, InputOutputModes
from azure.ai.ml.entities import Environment, ResourceConfiguration
from azure.ai.ml.exceptions import JobException
from azure.ai.ml.parallel import parallel_run_function, RunFunction
from azure.identity import DefaultAzureCredential

score = parallel_run_function(
    name="score", display_name="score files",
    inputs=dict(files=Input(type=AssetTypes.URI_FOLDER, description="the files"),
                label=Input(type="string", default="x")),
    outputs=dict(scores=Output(type=AssetTypes.URI_FILE, mode=InputOutputModes.RW_MOUNT)),
    input_data="${{inputs.files}}", instance_count=1, max_concurrency_per_instance=2,
    mini_batch_size=MBS, retry_settings=dict(max_retries=0, timeout=60), logging_level="INFO",
    task=RunFunction(code="./src", entry_script="score.py",
                     program_arguments="--label ${{inputs.label}}",
                     environment=Environment(image="mcr.microsoft.com/azureml/x"),
                     append_row_to="${{outputs.scores}}"))


@dsl.pipeline(default_compute="cpu-cluster", description="v2 test")
def score_pipeline(data):
    node = score(files=data, label="v2")
    node.resources = ResourceConfiguration(instance_count=1)
    return {"rows": node.outputs.scores}


ml_client = MLClient.from_config(credential=DefaultAzureCredential())
print("compute:", ml_client.compute.get("cpu-cluster").name)
job = score_pipeline(data=Input(type=AssetTypes.URI_FOLDER, path="./data"))
job.outputs.rows = Output(type=AssetTypes.URI_FILE, path=sys.argv[1])
run = ml_client.jobs.create_or_update(job, experiment_name="fanout-test")
try:
    ml_client.jobs.stream(run.name)
except JobException as e:
    print("status:", ml_client.jobs.get(run.name).status)
    sys.exit(e.exit_status)
print("status:", ml_client.jobs.get(run.name).status)
ml_client.jobs.download(run.name, download_path="dl", all=True)
"""

YAML = """type: parallel
name: score
inputs:
  files: {type: uri_folder, path: ./data}
  label: v2
outputs:
  scores: {type: uri_file, path: %s}
input_data: ${{inputs.files}}
mini_batch_size: "1"
resources: {instance_count: 1}
max_concurrency_per_instance: 2
retry_settings: {max_retries: 0, timeout: 60}
task:
  type: run_function
  code: ./src
  entry_script: score.py
  program_arguments: --label ${{inputs.label}}
  append_row_to: ${{outputs.scores}}
"""

COMPONENT = """$schema: https://azuremlschemas.azureedge.net/latest/parallelComponent.schema.json
type: parallel
name: score_component
inputs:
  files: {type: uri_folder}
outputs:
  scores: {type: uri_file}
input_data: ${{inputs.files}}
mini_batch_size: "1"
resources: {instance_count: 1}
max_concurrency_per_instance: 2
mini_batch_error_threshold: 5
error_threshold: 7
logging_level: DEBUG
retry_settings: {max_retries: 2, timeout: 45}
task:
  type: run_function
  code: ./src
  entry_script: score.py
  program_arguments: --error_threshold 7
  append_row_to: ${{outputs.scores}}
"""

LOAD_COMPONENT = """import sys
from azure.ai.ml import Input, Output, load_component
comp = load_component(source="component.yml")
node = comp(files=Input(type="uri_folder", path="./data"))
node.outputs.scores = Output(type="uri_file", path=sys.argv[1])
node.dump(sys.argv[2])
"""

PREP = """$schema: https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json
type: command
name: prep
inputs:
  raw: {type: uri_folder}
outputs:
  prepared: {type: uri_folder}
code: ./src
command: >-
  cp -R ${{inputs.raw}}/. ${{outputs.prepared}}/ && echo d > ${{outputs.prepared}}/d.txt
"""

PIPELINE = """import sys
from azure.ai.ml import Input, MLClient, Output, dsl, load_component
prep = load_component(source="prep.yml")
score = load_component(source="component.yml")


@dsl.pipeline(display_name="prepare and score", tags={"shape": "notebook"})
def prepare_and_score(raw):
    prepared = prep(raw=raw)
    # As Azure's iris notebook sets its output: a datastore path, a local folder here.
    prepared.outputs.prepared.path = (
        "azureml://datastores/${{default_datastore}}/paths/${{name}}/prepared")
    scored = score(files=prepared.outputs.prepared)
    scored.outputs.scores = Output(type="uri_file", path=sys.argv[1])
    return {"rows": scored.outputs.scores}


ml_client = MLClient.from_config(credential=None)
job = prepare_and_score(raw=Input(path="./data"))
job.tags.update({"run": "1"})
print("tags", sorted(job.tags.items()))
run = ml_client.jobs.create_or_update(job)
ml_client.jobs.stream(run.name)
"""


def fanout_python(args, cwd, interp, db):
    env = dict(os.environ, FANOUT_DB=db)
    if interp:
        env["FANOUT_PYTHON"] = interp
    return subprocess.run([support.FANOUT, "python", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def make_tree(root, texts):
    support.make_files(os.path.join(root, "data"), sorted(texts), lambda n: texts[n] + "\n")
    write(os.path.join(root, "src", "score.py"), ENTRY)


def same_as_yaml(tmp, interp, texts, want_rc, what):
    """The v2 program and the YAML give the same rows and exit status `want_rc`."""
    root = os.path.join(tmp, what.replace(" ", "_") + ("_usr" if interp else ""))
    make_tree(root, texts)
    write(os.path.join(root, "prog.py"), PROGRAM.replace("MBS", '"1"'))
    db = os.path.join(root, "store.db")
    p = fanout_python(["prog.py", os.path.join(root, "out", "sdk.txt")], root, interp, db)
    y = write(os.path.join(root, "job.yml"), YAML % "./out/yaml.txt")
    r = support.fanout("run", y, "--db", db, check=False)
    label = "%s (%s)" % (what, interp or "python3 on PATH")
    if p.returncode != want_rc or r.returncode != want_rc:
        fail("%s: exit %d (SDK) and %d (YAML), expected %d\n%s\n%s\n%s" % (
            label, p.returncode, r.returncode, want_rc, p.stdout, p.stderr, r.stderr))
    sdk_rows = read_rows(os.path.join(root, "out", "sdk.txt"))
    yaml_rows = read_rows(os.path.join(root, "out", "yaml.txt"))
    expected = ["%s %s" % (n, t.upper()) for n, t in texts.items() if t != "boom"]
    check_rows_once(sdk_rows, expected, label + ": SDK rows")
    check_rows_once(yaml_rows, expected, label + ": YAML rows")
    state = "Completed" if want_rc == 0 else "Failed"
    if "status: " + state not in p.stdout:
        fail("%s: expected status %s\n%s" % (label, state, p.stdout))
    if "compute cpu-cluster: ignored" not in p.stderr:
        fail("%s: no notice that the compute is ignored\n%s" % (label, p.stderr))
    if want_rc == 0:
        downloaded(root, label)


def downloaded(root, label):
    """jobs.download(all=True) laid the job out as Azure does: the pipeline's output `rows` in
    dl/named-outputs/rows/, the logs folder of its node `score` in dl/artifacts/score/logs/."""
    with open(os.path.join(root, "out", "sdk.txt")) as f:
        rows = f.read()
    got = os.path.join(root, "dl", "named-outputs", "rows", "sdk.txt")
    if not os.path.isfile(got) or open(got).read() != rows:
        fail("%s: jobs.download: no copy of the rows at %s: %s" % (label, got, sorted(
            os.path.relpath(os.path.join(d, n), root) for d, _, ns in os.walk(
                os.path.join(root, "dl")) for n in ns)))
    logs = os.path.join(root, "dl", "artifacts", "score", "logs")
    names = [n for _, _, ns in os.walk(logs) for n in ns]
    if "job_result.txt" not in names:
        fail("%s: jobs.download: no logs folder at %s: %s" % (label, logs, names))


def load_component_dump(tmp, interp):
    root = os.path.join(tmp, "component" + ("_usr" if interp else ""))
    make_tree(root, {"a.txt": "a", "b.txt": "b"})
    write(os.path.join(root, "component.yml"), COMPONENT)
    write(os.path.join(root, "prog.py"), LOAD_COMPONENT)
    dumped = os.path.join(root, "dumped.yml")
    out = os.path.join(root, "out", "rows.txt")
    p = fanout_python(["prog.py", out, dumped], root, interp, os.path.join(root, "s.db"))
    if p.returncode != 0:
        fail("load_component + dump: exit %d\n%s" % (p.returncode, p.stderr))
    text = open(dumped).read()
    for key in ("max_concurrency_per_instance: 2", "mini_batch_error_threshold: 5",
                "error_threshold: 7", 'logging_level: "DEBUG"', "max_retries: 2", "timeout: 45",
                "instance_count: 1", '"--error_threshold 7"'):
        if key not in text:
            fail("load_component + dump lost %r:\n%s" % (key, text))
    support.fanout("run", dumped, "--db", os.path.join(root, "s.db"))
    check_rows_once(read_rows(out), ["a.txt A", "b.txt B"], "the dumped component's rows")


def command_then_parallel(tmp, interp):
    """A pipeline of a command component (its output a folder of its own) and a parallel one
    reading that folder."""
    root = os.path.join(tmp, "pipeline" + ("_usr" if interp else ""))
    make_tree(root, {"a.txt": "a", "b.txt": "b"})
    write(os.path.join(root, "component.yml"), COMPONENT)
    write(os.path.join(root, "prep.yml"), PREP)
    write(os.path.join(root, "prog.py"), PIPELINE)
    out = os.path.join(root, "out", "rows.txt")
    p = fanout_python(["prog.py", out], root, interp, os.path.join(root, "s.db"))
    if p.returncode != 0:
        fail("command + parallel pipeline: exit %d\n%s\n%s" % (p.returncode, p.stdout,
                                                                 p.stderr))
    check_rows_once(read_rows(out), ["a.txt A", "b.txt B", "d.txt D"],
                    "the rows of the prepared folder")
    if "tags [('run', '1'), ('shape', 'notebook')]" not in p.stdout:
        fail("the pipeline job's tags: %s" % p.stdout)
    made = glob.glob(os.path.join(root, "azureml-outputs", "datastores", "workspaceblobstore",
                                  "*", "prepared", "d.txt"))
    if len(made) != 1:
        fail("the azureml://datastores/ output is not under azureml-outputs/datastores: %s" %
             os.listdir(root))


def validation_message(tmp, interp):
    """A bad mini_batch_size gets fanout's own message and exit status (2), as the YAML does."""
    root = os.path.join(tmp, "bad" + ("_usr" if interp else ""))
    make_tree(root, {"a.txt": "a"})
    write(os.path.join(root, "prog.py"), PROGRAM.replace("MBS", '"10 parsecs"'))
    p = fanout_python(["prog.py", os.path.join(root, "out.txt")], root, interp,
                      os.path.join(root, "s.db"))
    y = write(os.path.join(root, "job.yml"),
              (YAML % "./out/yaml.txt").replace('"1"', '"10 parsecs"'))
    r = support.fanout("run", y, "--db", os.path.join(root, "s.db"), check=False)
    msg = re.search(r"mini_batch_size: .*", r.stderr)
    if r.returncode != 2 or msg is None:
        fail("the YAML with a bad mini_batch_size: exit %d\n%s" % (r.returncode, r.stderr))
    if p.returncode != 2 or msg.group(0) not in p.stderr:
        fail("the SDK job with a bad mini_batch_size: exit %d, expected 2 and %r\n%s" % (
            p.returncode, msg.group(0), p.stderr))
    # Named at the program's own lines (parallel_run_function is called on its line 9), not
    # at the hidden job file fanout.Client wrote.
    where = re.search(r"prog\.py:9: parallel_run_function\(\): mini_batch_size: .*"
                      r"\[submitted at \S*prog\.py:\d+: jobs\.create_or_update\(\)\]", p.stderr)
    if where is None or ".fanout-job-" in p.stderr:
        fail("the SDK job's bad mini_batch_size is not named at prog.py:9:\n%s" % p.stderr)


def not_ours_outside(tmp):
    """Without `fanout python`, azure.ai.ml is not importable from this tree."""
    for interp in ["python3"] + [p for p in ("/usr/bin/python3",) if os.path.exists(p)]:
        r = subprocess.run([interp, "-c", "import azure.ai.ml, sys; print(azure.ai.ml.__file__)"],
                           capture_output=True, text=True, cwd=tmp, timeout=60)
        if r.returncode == 0 and os.path.join("python", "sdk") in r.stdout:
            fail("%s imports fanout's azure.ai.ml outside fanout python: %s" % (interp,
                                                                                 r.stdout))
        if r.returncode != 0 and "ModuleNotFoundError" not in r.stderr:
            fail("%s: import azure.ai.ml failed unexpectedly:\n%s" % (interp, r.stderr))


def main():
    support.require_fanout()
    interpreters = [None] + [p for p in ("/usr/bin/python3",) if os.path.exists(p)]
    with scratch("azure-v2") as tmp:
        not_ours_outside(tmp)
        for interp in interpreters:
            same_as_yaml(tmp, interp, {"a.txt": "a", "b.txt": "b", "c.txt": "c"}, 0, "succeeded")
            # One file's run() raises: the job ends partial, `fanout run` exits 4.
            same_as_yaml(tmp, interp, {"a.txt": "a", "b.txt": "boom", "c.txt": "c"}, 4,
                         "partial")
            load_component_dump(tmp, interp)
            command_then_parallel(tmp, interp)
            validation_message(tmp, interp)
    print("ok")


if __name__ == "__main__":
    main()
