#!/usr/bin/env python3
"""`fanout run -c` gives the rows GNU parallel gives: command lines from parallel's man page
(those that apply to one machine) run by both on the same inputs, their rows compared (sorted,
and in order for -k). Skipped where GNU parallel is not installed (Debian's package `parallel`;
moreutils has another program of that name). Environment: FANOUT_BIN (set by tests/meson.build)."""

import os
import shutil
import subprocess

from support import fail, fanout, scratch, skip
import support

# (the command, its options "|" then its input sources, stdin, whether the order must be kept).
# GNU parallel gets OPTIONS COMMAND SOURCES, fanout run -c COMMAND OPTIONS SOURCES.
CASES = [
    # Quoting only where the shell needs it: arithmetic on the value.
    ("echo $(( {} * {} ))", [":::", "1", "2", "3", "4", "5", "6"], None, False),
    ("echo $(( {} * {} ))", ["-k", "|", ":::", "1", "2", "3", "4", "5", "6"], None, True),
    # Values with spaces and quotes stay one argument.
    ("printf '[%s]\\n'", [":::", "a b", "it's", "x\"y", "$HOME", "*"], None, False),
    # Several sources combine; :::+ links.
    ("echo {1}-{2}", [":::", "a", "b", "c", ":::", "1", "2"], None, False),
    ("echo {1}-{2}", [":::", "a", "b", "c", ":::+", "1", "2", "3"], None, False),
    ("echo", [":::", "a", "b", ":::", "1", "2"], None, False),
    # Replacement strings of the man page.
    ("echo {.} {/} {//} {/.} {#}", ["-k", "|", ":::", "dir/sub/file.tar.gz", "x.txt", "noext"], None,
     True),
    # Input on stdin (`--input -` for fanout; parallel reads it by default).
    ("echo got", [], "one\ntwo\nthree four\n", False),
    ("printf %s {} | wc -c", ["-k", "|"], "a\nbb\nccc\n", True),
    # --tag puts the item and a TAB first.
    ("echo", ["--tag", "|", ":::", "p", "q r"], None, False),
    # -q quotes every value (here they need none).
    ("echo", ["-q", "|", ":::", "1", "2"], None, False),
    # A command that prints nothing succeeds.
    ("true", [":::", "1", "2"], None, False),
    # -j forms.
    ("echo {}", ["-j", "0", "|", ":::", "a", "b"], None, False),
    ("echo {}", ["-j", "50%", "|", ":::", "a", "b"], None, False),
    ("echo {}", ["-j", "+1", "|", ":::", "a", "b"], None, False),
]


def main():
    support.require_fanout()
    gnu = shutil.which("parallel")
    if gnu is None:
        skip("GNU parallel is not installed (Debian package parallel)")
    version = subprocess.run([gnu, "--version"], capture_output=True, text=True)
    if "GNU parallel" not in version.stdout:
        skip("%s is not GNU parallel (moreutils' parallel?)" % gnu)
    with scratch("adhoc-gnu") as tmp:
        db = os.path.join(tmp, "store", "fanout.db")
        for command, args, stdin, ordered in CASES:
            opts = args[:args.index("|")] if "|" in args else []
            rest = args[args.index("|") + 1:] if "|" in args else args
            g = subprocess.run([gnu, "--will-cite", *opts, command, *rest], input=stdin, cwd=tmp,
                               capture_output=True, text=True, timeout=120)
            if g.returncode != 0:
                fail("parallel %s %s: exit %d: %s" % (command, rest, g.returncode, g.stderr))
            ours = ["run", "--db", db, "-c", command, *opts]
            if stdin is not None:
                ours += ["--input", "-"]
            f = fanout(*ours, *rest, cwd=tmp, stdin=stdin, check=False)
            if f.returncode != 0:
                fail("fanout %s: exit %d: %s" % (ours + rest, f.returncode, f.stderr))
            want = g.stdout.splitlines()
            got = f.stdout.splitlines()
            if not ordered:
                want, got = sorted(want), sorted(got)
            if got != want:
                fail("%r %r: fanout printed %r, GNU parallel %r" % (command, rest, got, want))
            print("ok: %s %s -> %d rows" % (command, " ".join(rest), len(got)))
        # --dry-run prints the command lines parallel would run, quoted as it quotes them.
        args = [":::", "a b", "it's", "1", "$x"]
        g = subprocess.run([gnu, "--will-cite", "--dry-run", "echo", *args], cwd=tmp,
                           capture_output=True, text=True, timeout=120)
        f = fanout("run", "--db", db, "--dry-run", "-c", "echo", *args, cwd=tmp)
        if sorted(f.stdout.splitlines()) != sorted(g.stdout.splitlines()):
            fail("--dry-run: fanout %r, GNU parallel %r" % (f.stdout, g.stdout))
    print("PASS: %d GNU parallel command lines give the same rows, and --dry-run the same "
          "commands" % len(CASES))


if __name__ == "__main__":
    main()
