#!/usr/bin/env python3
"""The `fanout` package's unit tests (python/tests, pytest) as one meson test: run with this
interpreter when it has pytest, else with Debian's /usr/bin/python3 (python3-pytest); SKIP
(exit 77) when neither has it. Usage: run_package_tests.py SOURCE_ROOT"""

import os
import subprocess
import sys


def main():
    root = sys.argv[1]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    for py in (sys.executable, "/usr/bin/python3"):
        if not os.path.exists(py):
            continue
        if subprocess.run([py, "-c", "import pytest"], capture_output=True).returncode != 0:
            continue
        cmd = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(root, "python")]
        print("+ " + " ".join(cmd), flush=True)
        return subprocess.run(cmd, cwd=root, env=env).returncode
    print("SKIP: pytest is not installed for %s or /usr/bin/python3 (python3-pytest, "
          "tools/deps-debian-test.txt)" % sys.executable)
    return 77


if __name__ == "__main__":
    sys.exit(main())
