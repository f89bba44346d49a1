#!/usr/bin/env python3
"""Start-up benchmark (docs/performance.md, "Real workloads"): `fanout run` of a one-file Python
job (one input file, run() returns one row) against the interpreter's own start
(`python3 -c pass`) and a one-task multiprocessing.Pool(W); fanout's target is to return within
0.3 s of the interpreter's start.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

SCORE = '''\
def run(mini_batch):
    return ["%s done" % p for p in mini_batch]
'''

JOB = '''\
type: parallel
name: bench-startup
inputs:
  one:
    type: uri_folder
    path: {data}
outputs:
  rows:
    type: uri_file
    path: {out}
input_data: ${{{{inputs.one}}}}
mini_batch_size: "1"
max_concurrency_per_instance: {workers}
task:
  type: run_function
  code: {src}
  entry_script: score.py
  append_row_to: ${{{{outputs.rows}}}}
'''

POOL = ("import multiprocessing\n"
        "def f(x):\n    return x\n"
        "if __name__ == '__main__':\n"
        "    with multiprocessing.Pool(%d) as p:\n        p.map(f, [1])\n")


def main():
    ap = benchlib.arg_parser(__doc__, repeats=5)
    args = ap.parse_args()
    with benchlib.Workdir(args.keep) as wd:
        data, src = os.path.join(wd, "data"), os.path.join(wd, "src")
        os.makedirs(data)
        os.makedirs(src)
        with open(os.path.join(data, "one.txt"), "w") as f:
            f.write("one\n")
        with open(os.path.join(src, "score.py"), "w") as f:
            f.write(SCORE)
        pool_py = os.path.join(wd, "pool.py")
        with open(pool_py, "w") as f:
            f.write(POOL % args.workers)
        job = os.path.join(wd, "job.yaml")
        with open(job, "w") as f:
            f.write(JOB.format(data=data, out=os.path.join(wd, "out.txt"), workers=args.workers,
                               src=src))
        contenders = [*benchlib.fanout_contenders(args, job, wd),
                      ("python3 -c pass", lambda: [args.python, "-c", "pass"]),
                      ("pool 1 task", lambda: [args.python, pool_py])]
        contenders = [c for c in contenders if benchlib.wanted(args, c[0])]
        results, skipped = benchlib.run_interleaved(contenders, args.repeats, None, args.timeline)
        benchlib.print_table("startup: `fanout run` of a one-file Python job, %d workers, %d "
                             "repeats" % (args.workers, args.repeats), results, skipped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
