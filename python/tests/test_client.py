"""fanout.Client and fanout.Job: the `fanout` arguments they build, the job files they write for
a dict, and what they make of the CLI's answers (exit status per state)."""

import json
import os

import pytest

from conftest import make_exe
from fanout import client as fclient
from fanout.client import Client, Job


def test_override_args():
    args = fclient._override_args({"workers": 4, "allow_partial": True, "quiet": False,
                                   "python": None, "run_dir": "/tmp/r"})
    assert args == ["--workers", "4", "--allow-partial", "--run-dir", "/tmp/r"]


def test_connect_args():
    c = Client(db="/tmp/s.db", interchange="tcp://127.0.0.1:5555", keys="/k", fanout="/bin/true")
    assert c._db_args() == ["--db", "/tmp/s.db"]
    assert c._connect_args() == ["--db", "/tmp/s.db", "--interchange", "tcp://127.0.0.1:5555",
                                 "--keys", "/k"]
    assert Client(fanout="/bin/true")._connect_args() == []


def test_state_exit_matches_the_cli():
    # README, exit status: 0 succeeded, 1 failed or cancelled, 4 partial.
    assert fclient._STATE_EXIT == {"succeeded": 0, "partial": 4, "failed": 1, "cancelled": 1}


def test_a_dict_job_is_a_hidden_json_file_in_a_private_folder_removed_after(in_tmp):
    job = {"type": "parallel", "name": "x", "inputs": {"d": {"type": "uri_folder",
                                                             "path": "./data"}}}
    path, jf = fclient._job_file(job)
    # Not in the current folder, where another user could have made the name first: in a
    # private folder of its own, with the dict's relative paths made absolute against the cwd.
    folder = os.path.dirname(path)
    assert folder != str(in_tmp)
    st = os.stat(folder)
    assert st.st_uid == os.geteuid() and (st.st_mode & 0o777) == 0o700
    assert os.path.basename(path).startswith(".fanout-job-")
    with open(path) as f:
        written = json.load(f)
    assert os.path.normpath(written["inputs"]["d"]["path"]) == os.path.join(str(in_tmp), "data")
    assert {k: v for k, v in written.items() if k != "inputs"} == {
        k: v for k, v in job.items() if k != "inputs"}
    jf.remove()
    assert not os.path.exists(path)
    jf.remove()  # twice is fine


def test_a_path_job_is_used_as_it_is():
    assert fclient._job_file("job.yaml") == ("job.yaml", None)


def test_a_job_of_another_type_is_refused():
    with pytest.raises(TypeError, match="a job is a job file path, a dict"):
        fclient._job_file(42)


def _cli_answering(tmp_path, status):
    """A `fanout` stand-in that answers `status ID --json` with `status`."""
    return make_exe(str(tmp_path / "fanout"),
                    "#!/bin/sh\n[ \"$1\" = status ] || exit 2\ncat <<'EOF'\n%s\nEOF\n" %
                    json.dumps(status))


@pytest.mark.parametrize("state,want", [("succeeded", 0), ("partial", 4), ("failed", 1),
                                        ("cancelled", 1), ("running", None)])
def test_exit_status_of_a_job_not_followed(tmp_path, state, want):
    c = Client(fanout=_cli_answering(tmp_path, {"state": state}))
    assert Job(c, 7).exit_status == want


def test_a_failed_command_is_a_fanout_error(tmp_path):
    prog = make_exe(str(tmp_path / "fanout"),
                    "#!/bin/sh\necho 'error: status: no job 9 in s.db' >&2\nexit 2\n")
    with pytest.raises(fclient.FanoutError) as e:
        Client(fanout=prog).job(9)
    assert e.value.exit_status == 2
    assert e.value.message == "status: no job 9 in s.db"
    assert e.value.command[1:] == ["status", "9", "--json"]
