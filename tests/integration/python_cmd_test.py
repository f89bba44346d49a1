#!/usr/bin/env python3
"""`fanout python [FILE | -c CODE | -m MODULE] [ARGS...]` (client/commands/python_cmd.*): the
program runs with `import fanout` from this tree and FANOUT_BIN naming this fanout, its
arguments and exit status are its own, under the pyenv python3 and Debian's /usr/bin/python3;
the SDK folder is on sys.path only there. Environment: tests/meson.build."""

import os
import subprocess
import sys

from support import fail, scratch
import support

PROBE = ("import fanout, os, sys; print(os.path.dirname(os.path.dirname(fanout.__file__))); "
         "print(os.environ['FANOUT_BIN']); print(sys.argv[1:]); "
         "print(any(p.endswith('/sdk') for p in sys.path)); sys.exit(5)")


def run(args, interpreter=None, cwd=None):
    env = dict(os.environ)
    if interpreter:
        env["FANOUT_PYTHON"] = interpreter
    return subprocess.run([support.FANOUT, "python", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=60)


def main():
    support.require_fanout()
    tree = os.path.join(support.SOURCE_ROOT, "python")
    interpreters = [None] + [p for p in ("/usr/bin/python3",) if os.path.exists(p)]
    with scratch("pycmd") as tmp:
        support.write(os.path.join(tmp, "prog.py"), PROBE)
        support.write(os.path.join(tmp, "probe_mod.py"), PROBE)
        for interp in interpreters:
            for args in (["-c", PROBE, "a b", "--x"], ["prog.py", "a b", "--x"],
                         ["-m", "probe_mod", "a b", "--x"]):
                r = run(args, interp, cwd=tmp)
                what = "fanout python %s (%s)" % (args[0], interp or "python3 on PATH")
                if r.returncode != 5:
                    fail("%s: exit %d, expected the program's 5\n%s" % (what, r.returncode,
                                                                     r.stderr))
                lines = r.stdout.splitlines()
                if os.path.realpath(lines[0]) != os.path.realpath(tree):
                    fail("%s: fanout imported from %s, expected %s" % (what, lines[0], tree))
                if os.path.realpath(lines[1]) != os.path.realpath(support.FANOUT):
                    fail("%s: FANOUT_BIN is %s" % (what, lines[1]))
                if lines[2] != "['a b', '--x']" or lines[3] != "True":
                    fail("%s: argv %s, sdk folder on sys.path: %s" % (what, lines[2], lines[3]))
        # Outside `fanout python` the SDK folder is never on the path.
        r = subprocess.run([sys.executable, "-c", "import sys; print([p for p in sys.path "
                            "if p.endswith('/python/sdk')])"], capture_output=True, text=True)
        if r.stdout.strip() != "[]":
            fail("the SDK folder is on a plain interpreter's path: %s" % r.stdout)
        r = run(["-c", "pass"], "/nonexistent/python3")
        if r.returncode != 2 or "/nonexistent/python3" not in r.stderr:
            fail("a missing interpreter: exit %d, %s" % (r.returncode, r.stderr))
    print("ok")


if __name__ == "__main__":
    main()
