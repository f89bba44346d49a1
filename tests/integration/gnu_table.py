"""Runs one command line with Debian's GNU parallel and with `fanout run -c`, and compares what
they print (the table tests adhoc_parallel_*_test.py use it). A case is a dict:

  opts     GNU options, given to both before the command (fanout: `run OPTS -c COMMAND`)
  command  the command (one argument, as a GNU user quotes it)
  rest     the input sources after the command (::: ..., :::: FILE ...)
  stdin    text on stdin, or None (then stdin is /dev/null for both)
  order    True: compared line by line as printed; False: sorted (parallel promises no order)
  exit     "same": both exit 0 or both non-zero; "zero": both exit 0 (the default); None: not
           compared (fanout's exit codes are its own; docs/adhoc.md)
  stdout   False: stdout not compared (only the exit status)
  files    {name: text} written into the case's folder first
  tree     a folder both write (--results): its files and their contents are compared

Skips unless GNU parallel (Debian's package `parallel`) is installed."""

import os
import shutil
import subprocess

from support import fail, fanout, skip
import support


def gnu_parallel():
    """The path of GNU parallel; skips the test when it is missing or is moreutils' program."""
    support.require_fanout()
    gnu = shutil.which("parallel")
    if gnu is None:
        skip("GNU parallel is not installed (Debian package parallel)")
    version = subprocess.run([gnu, "--version"], capture_output=True, text=True)
    if "GNU parallel" not in version.stdout:
        skip("%s is not GNU parallel (moreutils' parallel?)" % gnu)
    return gnu


def tree(folder):
    """{relative path: bytes} of every file under `folder`."""
    out = {}
    for top, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(top, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, folder)] = f.read()
    return out


def run_case(gnu, tmp, db, number, case):
    """Runs `case` with both programs in a folder of its own; fails the test on a difference."""
    where = os.path.join(tmp, "case%02d" % number)
    g_dir, f_dir = where + "-gnu", where + "-fanout"
    for d in (g_dir, f_dir):
        os.makedirs(d)
        for name, text in case.get("files", {}).items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
    opts, command, rest = case.get("opts", []), case["command"], case.get("rest", [])
    stdin = case.get("stdin")
    stdin_arg = dict(input=stdin) if stdin is not None else dict(stdin=subprocess.DEVNULL)
    g = subprocess.run([gnu, "--will-cite", *opts, command, *rest], cwd=g_dir,
                       capture_output=True, text=True, timeout=300, **stdin_arg)
    args = ["run", "--db", db, *opts, "-c", command, *rest]
    if stdin is None:
        f = subprocess.run([support.FANOUT, *args], cwd=f_dir, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=300)
    else:
        f = fanout(*args, cwd=f_dir, stdin=stdin, check=False, timeout=300)
    what = "parallel %s %r %s" % (" ".join(opts), command, " ".join(rest))
    exit_rule = case.get("exit", "zero")
    if exit_rule == "zero" and (g.returncode != 0 or f.returncode != 0):
        fail("%s: exit %d (GNU) and %d (fanout): %s | %s" % (what, g.returncode, f.returncode,
                                                            g.stderr, f.stderr))
    if exit_rule == "same" and (g.returncode == 0) != (f.returncode == 0):
        fail("%s: exit %d (GNU) but %d (fanout): %s" % (what, g.returncode, f.returncode,
                                                       f.stderr))
    if case.get("stdout", True):
        want, got = g.stdout, f.stdout
        if not case.get("order", False):
            want = "".join(sorted(want.splitlines(keepends=True)))
            got = "".join(sorted(got.splitlines(keepends=True)))
        if got != want:
            fail("%s: fanout printed %r, GNU parallel %r (fanout's stderr: %s)" %
                 (what, got, want, f.stderr))
    if "tree" in case:
        gt, ft = tree(os.path.join(g_dir, case["tree"])), tree(os.path.join(f_dir, case["tree"]))
        if gt != ft:
            fail("%s: fanout wrote %r, GNU parallel %r" % (what, ft, gt))
    print("ok %2d: %s" % (number, what))


def run_table(prefix, cases):
    """Runs every case; returns how many ran."""
    gnu = gnu_parallel()
    with support.scratch(prefix) as tmp:
        db = os.path.join(tmp, "store", "fanout.db")
        for i, case in enumerate(cases, 1):
            run_case(gnu, tmp, db, i, case)
    return len(cases)
