#!/usr/bin/env python3
"""Ad-hoc benchmark (docs/adhoc.md, "Speed"): `fanout run -c` against GNU parallel on the two
workloads a parallel user measures first, each command timed whole (fanout's start of its
interchange and pools included), interleaved (fanout, parallel, fanout, ...):
  echo    N1 commands `echo {}` (default 1,000): the cost per command
  sleep   N2 commands `sleep 0.05` (default 200): how well -j slots are kept busy
Both run with the same -j (--workers). The rows each prints are checked to be the same.
Needs GNU parallel (Debian's package `parallel`); without it, its rows say SKIP.
"""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def load():
    """The 1-minute load average and the cores, said with the figures."""
    try:
        return "load %.2f on %d cores" % (os.getloadavg()[0], os.cpu_count() or 0)
    except OSError:
        return "load unknown"


def main():
    ap = benchlib.arg_parser(__doc__, repeats=3)
    ap.add_argument("--echoes", type=int, default=1000)
    ap.add_argument("--sleeps", type=int, default=200)
    args = ap.parse_args()
    gnu = shutil.which("parallel")
    if gnu is not None and "GNU parallel" not in subprocess.run(
            [gnu, "--version"], capture_output=True, text=True).stdout:
        gnu = None
    with benchlib.Workdir(args.keep) as work:
        db = os.path.join(work, "store", "fanout.db")
        workloads = [
            ("echo", "echo {}", [str(i) for i in range(1, args.echoes + 1)]),
            ("sleep", "sleep 0.05; echo {}", [str(i) for i in range(1, args.sleeps + 1)]),
        ]
        print("ad-hoc runs, -j %d, %s" % (args.workers, load()))
        for name, command, values in workloads:
            cmds = {"fanout": [args.fanout, "run", "--db", db, "-j", str(args.workers), "-c",
                               command, ":::", *values]}
            if gnu is not None and benchlib.wanted(args, "parallel"):
                cmds["parallel"] = [gnu, "--will-cite", "-j", str(args.workers), command, ":::",
                                    *values]
            contenders = [(who, lambda cmd=cmd: cmd) for who, cmd in cmds.items()]
            results, skipped = benchlib.run_interleaved(contenders, args.repeats)
            # The same rows (in any order), from one more run of each, outside the timing.
            for who, cmd in cmds.items():
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                if sorted(out.split()) != sorted(values):
                    raise SystemExit("bench: %s printed other rows for %s" % (who, name))
            if gnu is None:
                skipped["parallel"] = "GNU parallel is not installed"
            benchlib.print_table("%s: %d commands `%s`" % (name, len(values), command), results,
                                 skipped)


if __name__ == "__main__":
    main()
