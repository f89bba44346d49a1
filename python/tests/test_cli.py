"""fanout._cli and `python -m fanout`: where the package finds its `fanout`, and how a failed
command becomes a FanoutError."""

import os
import subprocess
import sys

import pytest

from conftest import PYTHON_DIR, make_exe
from fanout import _cli
from fanout._cli import FanoutError, error_message, find_fanout, installed_fanout


def test_error_text_with_and_without_status():
    assert str(FanoutError("bad job", 2, ["fanout", "run"])) == "bad job (exit status 2)"
    assert str(FanoutError("no fanout")) == "no fanout"
    assert FanoutError("x", 1, ("a", "b")).command == ["a", "b"]


def test_error_message_prefers_error_lines():
    err = "note: starting\nerror: job.yaml:3: mini_batch_size: bad\nerror: second\n"
    assert error_message(err, "fb") == "job.yaml:3: mini_batch_size: bad\nsecond"
    assert error_message("one\ntwo\n\n", "fb") == "two"
    assert error_message("", "fb") == "fb"
    assert error_message(None, "fb") == "fb"


@pytest.mark.parametrize("site", ["lib/python3.11/site-packages", "lib/python3/dist-packages"])
def test_installed_fanout_is_beside_the_package(tmp_path, site):
    pkg = tmp_path / site / "fanout"
    pkg.mkdir(parents=True)
    prog = make_exe(str(tmp_path / "bin" / "fanout"))
    assert installed_fanout(str(pkg)) == prog


def test_installed_fanout_needs_an_executable(tmp_path):
    pkg = tmp_path / "lib/python3.11/site-packages/fanout"
    pkg.mkdir(parents=True)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "fanout").write_text("not executable")
    assert installed_fanout(str(pkg)) is None


def test_installed_fanout_of_a_source_tree_is_none(tmp_path):
    pkg = tmp_path / "src" / "python" / "fanout"
    pkg.mkdir(parents=True)
    make_exe(str(tmp_path / "src" / "bin" / "fanout"))
    assert installed_fanout(str(pkg)) is None


def test_find_fanout_order(tmp_path, monkeypatch):
    on_path = make_exe(str(tmp_path / "path" / "fanout"))
    beside = make_exe(str(tmp_path / "venv" / "bin" / "fanout"))
    monkeypatch.setenv("PATH", os.path.dirname(on_path))
    monkeypatch.delenv("FANOUT_BIN", raising=False)
    monkeypatch.setattr(_cli, "installed_fanout", lambda: None)
    assert find_fanout() == on_path
    monkeypatch.setattr(_cli, "installed_fanout", lambda: beside)
    assert find_fanout() == beside
    monkeypatch.setenv("FANOUT_BIN", "/opt/fanout")
    assert find_fanout() == "/opt/fanout"
    assert find_fanout("/explicit/fanout") == "/explicit/fanout"


def test_find_fanout_names_the_ways_when_there_is_none(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("FANOUT_BIN", raising=False)
    monkeypatch.setattr(_cli, "installed_fanout", lambda: None)
    with pytest.raises(FanoutError) as e:
        find_fanout()
    assert "pip install" in str(e.value) and "FANOUT_BIN" in str(e.value)


def _python_m_fanout(args, env_extra):
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, **env_extra)
    return subprocess.run([sys.executable, "-m", "fanout"] + args, env=env,
                          capture_output=True, text=True, timeout=60)


def test_python_m_fanout_runs_the_program_with_its_arguments(tmp_path):
    prog = make_exe(str(tmp_path / "fanout"), '#!/bin/sh\necho "fanout got: $*"\nexit 3\n')
    p = _python_m_fanout(["run", "job.yaml", "--quiet"], {"FANOUT_BIN": prog})
    assert p.stdout == "fanout got: run job.yaml --quiet\n"
    assert p.returncode == 3


def test_python_m_fanout_without_a_program(tmp_path):
    p = _python_m_fanout(["--version"], {"FANOUT_BIN": "", "PATH": str(tmp_path)})
    assert p.returncode == 2
    assert p.stderr.startswith("error: the fanout program was not found")
