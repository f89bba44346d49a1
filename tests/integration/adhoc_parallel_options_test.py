#!/usr/bin/env python3
"""`fanout run -c` with GNU parallel's options for several values per command line (-N, -m, -X),
columns (--colsep), chunks of stdin (--pipe with --block or -N), --tag, --results, --halt, and
the job slot {%}: command lines of parallel's man page and tutorial run by Debian's `parallel`
and by fanout, their output compared byte for byte (sorted where parallel promises no order),
then the GNU spellings fanout refuses, each refused before anything runs with the name of what
to use. Skipped where GNU parallel is not installed. Runner: gnu_table.py. Environment:
FANOUT_BIN (set by tests/meson.build)."""

import os

from gnu_table import run_table
from support import fail, fanout, scratch
import support

TSV = "a\tb\nc\td\te\n"
NUMS = "".join("%d\n" % i for i in range(1, 1001))
LETTERS = ["A", "B", "C", "D", "E", "F", "G"]

CASES = [
    # Tutorial, "More than one argument": -m and -X share the values among the job slots.
    dict(opts=["--jobs", "4", "-m"], command="echo", rest=[":::", *[str(i) for i in range(1, 11)]]),
    dict(opts=["--jobs", "4", "-m"], command="echo pre-{}-post", rest=[":::", *LETTERS]),
    dict(opts=["--jobs", "4", "-X"], command="echo pre-{}-post", rest=[":::", *LETTERS]),
    dict(opts=["-j", "4", "-m"], command="echo", stdin=NUMS),
    dict(opts=["-N3"], command="echo", rest=[":::", *LETTERS, "H"]),
    dict(opts=["-N3"], command="echo 1={1} 2={2} 3={3}", rest=[":::", *LETTERS, "H"]),
    dict(opts=["-N0"], command="echo foo", rest=[":::", "1", "2", "3"]),
    dict(opts=["-N2"], command="echo {1}-{2}", rest=[":::", "a", "b", "c", "d", "e"]),
    # Tutorial, "Input sources": --colsep.
    dict(opts=["--colsep", "\\t"], command="echo 1={1} 2={2}", rest=["::::", "tsv-file.tsv"],
         files={"tsv-file.tsv": TSV}),
    dict(opts=["--colsep", ","], command="echo {2}:{1}", stdin="a,b\nc,d\n"),
    dict(opts=["--colsep", ","], command="echo", stdin="a,b\nc,d,e\n"),
    # Tutorial, "--pipe": chunks of stdin on each command's stdin.
    dict(opts=["-k", "--pipe", "--block", "6"], command="wc -c", stdin=NUMS[:21], order=True),
    dict(opts=["-k", "--pipe", "--block", "10"], command="wc -c", stdin=NUMS[:81], order=True),
    dict(opts=["-k", "--pipe", "-N3"], command="wc -l", stdin=NUMS[:21], order=True),
    dict(opts=["--pipe"], command="wc", stdin=NUMS),
    dict(opts=["-k", "--pipe", "-N140"], command="wc", stdin=NUMS, order=True),
    # Tutorial, "Controlling the output".
    dict(opts=["--tag"], command="echo foo-{}", rest=[":::", "A", "B", "C"]),
    dict(opts=["--tag"], command="echo", rest=[":::", "p", "q r"]),
    dict(opts=["-j2", "-k"], command="printf '%s-start\\n%s' {} {}; sleep 0.{}; "
         "printf '%s\\n' -middle; echo {}-end", rest=[":::", "4", "2", "1"], order=True),
    dict(opts=["--line-buffer"], command="echo {}", rest=[":::", "a", "b"]),
    dict(opts=["--results", "outdir"], command="echo", rest=[":::", "A", "B", "C"], tree="outdir",
         stdout=False),
    dict(opts=["--results", "outdir"], command="echo", rest=[":::", "a/b", "c d", "x\\y"],
         tree="outdir", stdout=False),
    # Tutorial, "Termination": exit statuses (the rows of failed commands differ: docs/adhoc.md).
    dict(opts=["-j2", "--halt", "soon,fail=1"], command="echo {}; exit {}",
         rest=[":::", "0", "0", "1", "2", "3"], exit="same", stdout=False),
    dict(opts=["-j2", "--halt", "now,success=1"], command="echo {}; exit {}",
         rest=[":::", "1", "2", "3", "0", "4", "5", "6"], exit="same", stdout=False),
    dict(command="exit {}", rest=[":::", "0", "1"], exit="same", stdout=False),
    # --eta and --progress (fanout's --bar) write only to stderr.
    dict(opts=["--eta"], command="echo", rest=[":::", "a", "b"]),
    dict(opts=["--progress"], command="echo", rest=[":::", "a", "b"]),
]

# GNU spellings fanout refuses before anything runs, and a word its message must hold.
REFUSED = [
    (["-c", "echo {= s/a/b/ =}", ":::", "aaa"], "{= s/a/b/ =}"),
    (["-c", "echo {0#}", ":::", "a"], "{0#}"),
    (["--ungroup", "-c", "echo", ":::", "a"], "--line-buffer"),
    (["--plus", "-c", "echo {+/}", ":::", "a"], "--plus"),
    (["-I", ",,", "-c", "echo ,,", ":::", "a"], "{}"),
    (["--resume-failed", "--joblog", "log", "-c", "echo", ":::", "a"], "fanout resume"),
    (["-S", "host", "-c", "echo", ":::", "a"], "--hosts"),
    (["--header", ":", "-c", "echo", ":::", "a"], "--colsep"),
]


def job_slots(db, tmp):
    # {%} is the slot, 1..-j, never the text {%} (GNU's -j2 echo {%} prints 1 and 2).
    r = fanout("run", "--db", db, "-j", "2", "-c", "echo {%}", ":::", "a", "b", "c", "d",
               cwd=tmp)
    got = r.stdout.split()
    if len(got) != 4 or not set(got) <= {"1", "2"}:
        fail("-j2 echo {%%}: %r" % r.stdout)
    print("ok: {%%} is the job slot: %s" % " ".join(got))


def refusals(db, tmp):
    # A separate store: a refused line must leave it without a job (nothing ran).
    refused_db = os.path.join(tmp, "refused", "fanout.db")
    for args, word in REFUSED:
        r = fanout("run", "--db", refused_db, *args, cwd=tmp, check=False)
        jobs = support.sql_int(refused_db, "SELECT count(*) FROM jobs") \
            if os.path.exists(refused_db) else 0
        if r.returncode != 2 or word not in r.stderr or jobs != 0:
            fail("%s: exit %d, stderr %r (expected 2 naming %r)" % (args, r.returncode, r.stderr,
                                                                  word))
        print("ok: refused %s: %s" % (" ".join(args), r.stderr.strip()))


def main():
    n = run_table("adhoc-gnu-opts", CASES)
    with scratch("adhoc-gnu-refused") as tmp:
        db = os.path.join(tmp, "store", "fanout.db")
        job_slots(db, tmp)
        refusals(db, tmp)
    print("PASS: %d command lines print as GNU parallel's; %d GNU spellings refused by name" %
          (n, len(REFUSED)))


if __name__ == "__main__":
    support.require_fanout()
    main()
