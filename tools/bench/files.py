#!/usr/bin/env python3
"""Real-workload benchmark "files" (docs/performance.md, "Real workloads").

The SHA-1 of each of --files files of 1 KiB (100,000), 100 files per mini-batch, on --workers
workers:
  fanout    `fanout run job.yaml`: a uri_folder input, run(list of paths) -> rows, append_row_to;
  pool      multiprocessing.Pool(W).imap_unordered(sha1 of one file, chunksize=100) over the
            folder's listing, the rows written by the parent (the hand-written peer);
  parallel  GNU parallel -X sha1sum (only with --gnu-parallel: about 15 s a run).
fanout and pool write the same rows ("name sha1"), checked once at the end.
"""

import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

SCORE = '''\
"""The files benchmark's entry script (written by tools/bench/files.py)."""
import hashlib
import os


def one(path):
    with open(path, "rb") as f:
        return "%s %s" % (os.path.basename(path), hashlib.sha1(f.read()).hexdigest())


def run(mini_batch):
    return [one(p) for p in mini_batch]
'''

JOB = '''\
type: parallel
name: bench-files
inputs:
  files:
    type: uri_folder
    path: {data}
outputs:
  sums:
    type: uri_file
    path: {out}
input_data: ${{{{inputs.files}}}}
mini_batch_size: "100"
max_concurrency_per_instance: {workers}
task:
  type: run_function
  code: {src}
  entry_script: score.py
  append_row_to: ${{{{outputs.sums}}}}
'''


def peer_pool(src, data, out, workers):
    import multiprocessing

    sys.path.insert(0, src)
    import score

    files = [e.path for e in os.scandir(data)]
    with multiprocessing.Pool(workers) as pool, open(out, "w") as f:
        for row in pool.imap_unordered(score.one, files, chunksize=100):
            f.write(row + "\n")


def make_data(folder, n):
    os.makedirs(folder)
    block = os.urandom(1024 + n)
    for i in range(n):
        with open(os.path.join(folder, "f%06d.bin" % i), "wb") as f:
            f.write(block[i:i + 1024])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--peer":
        src, data, out, workers = sys.argv[2:6]
        peer_pool(src, data, out, int(workers))
        return 0
    ap = benchlib.arg_parser(__doc__)
    ap.add_argument("--files", type=int, default=100000)
    ap.add_argument("--gnu-parallel", action="store_true", help="add GNU parallel -X (slow)")
    args = ap.parse_args()
    with benchlib.Workdir(args.keep) as wd:
        data, src = os.path.join(wd, "data"), os.path.join(wd, "src")
        sys.stderr.write("files: making %d files in %s\n" % (args.files, wd))
        make_data(data, args.files)
        os.makedirs(src)
        with open(os.path.join(src, "score.py"), "w") as f:
            f.write(SCORE)
        outs = dict((n, os.path.join(wd, "out-%s.txt" % n)) for n in ("fanout", "pool", "parallel"))
        job = os.path.join(wd, "job.yaml")
        with open(job, "w") as f:
            f.write(JOB.format(data=data, out=outs["fanout"], workers=args.workers, src=src))
        me = os.path.abspath(__file__)

        def parallel_cmd():
            if not args.gnu_parallel:
                return "not asked for (--gnu-parallel)"
            if not shutil.which("parallel"):
                return "GNU parallel is not installed"
            return ["bash", "-c", "cd %s && ls | parallel -j %d -X sha1sum > %s" % (
                data, args.workers, outs["parallel"])]

        contenders = [
            *benchlib.fanout_contenders(args, job, wd),
            ("pool", lambda: [args.python, me, "--peer", src, data, outs["pool"], str(args.workers)]),
            ("parallel", parallel_cmd)]
        contenders = [c for c in contenders if benchlib.wanted(args, c[0])]

        def check(name):
            n = benchlib.count_lines(outs[name.replace("-before", "")])
            if n != args.files:
                raise SystemExit("files: %s wrote %d rows, expected %d" % (name, n, args.files))

        results, skipped = benchlib.run_interleaved(contenders, args.repeats, check,
                                                     args.timeline)
        if "fanout" in results and "pool" in results:
            if benchlib.sorted_lines(outs["fanout"]) != benchlib.sorted_lines(outs["pool"]):
                raise SystemExit("files: fanout and pool wrote different rows")
        benchlib.print_table("files: SHA-1 of %d files of 1 KiB, 100 per mini-batch, %d workers, "
                             "%d repeats" % (args.files, args.workers, args.repeats), results, skipped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
