"""pytest set-up for the `fanout` package's unit tests (python/tests, docs/python.md): the tree's
package and SDK-shaped modules first on sys.path (as `fanout python` has them), and the SDKs'
once-per-process notices forgotten between tests."""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the tree the package is installed from

import pytest  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
for path in (os.path.join(PYTHON_DIR, "sdk"), PYTHON_DIR):
    if path not in sys.path:
        sys.path.insert(0, path)


@pytest.fixture(autouse=True)
def fresh_notices():
    import _fanout_azure
    _fanout_azure._noted.clear()
    yield


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """The test runs in its own empty working folder."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def make_exe(path, text="#!/bin/sh\nexit 0\n"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return str(path)
