#!/usr/bin/env python3
"""Real-workload benchmark "torch" (docs/performance.md, "Real workloads").

PyTorch inference (Debian's python3-torch) of a small CNN built here with a fixed seed over
--images images (3x64x64 .npy files made here), --per-batch images per mini-batch, --workers
workers, one torch thread per worker:
  fanout  `fanout run job.yaml`: init() loads the model, run(list of paths) scores them;
  pool    multiprocessing.Pool(W, initializer=load the model).imap_unordered over chunks of
          --per-batch paths, the rows written by the parent (the hand-written peer).
Both write the same rows ("name class"), checked once at the end.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

SCORE = '''\
"""The torch benchmark's entry script (written by tools/bench/torch_infer.py)."""
import os

import numpy as np
import torch

MODEL = None


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        x = torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.c2(x)), 1)
        return self.fc(torch.flatten(x, 1))


def init():
    global MODEL
    torch.set_num_threads(1)
    MODEL = Net()
    MODEL.load_state_dict(torch.load(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "model.pt")))
    MODEL.eval()


def run(mini_batch):
    x = torch.from_numpy(np.stack([np.load(p) for p in mini_batch]))
    with torch.no_grad():
        classes = MODEL(x).argmax(dim=1).tolist()
    return ["%s %d" % (os.path.basename(p), c) for p, c in zip(mini_batch, classes)]
'''

JOB = '''\
type: parallel
name: bench-torch
inputs:
  images:
    type: uri_folder
    path: {data}
outputs:
  classes:
    type: uri_file
    path: {out}
input_data: ${{{{inputs.images}}}}
mini_batch_size: "{per_batch}"
max_concurrency_per_instance: {workers}
task:
  type: run_function
  code: {src}
  entry_script: score.py
  append_row_to: ${{{{outputs.classes}}}}
'''


def peer_pool(src, data, out, workers, per_batch):
    import multiprocessing

    sys.path.insert(0, src)
    import score

    files = [e.path for e in os.scandir(data)]
    chunks = [files[i:i + per_batch] for i in range(0, len(files), per_batch)]
    with multiprocessing.Pool(workers, initializer=score.init) as pool, open(out, "w") as f:
        for rows in pool.imap_unordered(score.run, chunks):
            f.write("".join(r + "\n" for r in rows))


def make_data(data, src, n):
    import numpy as np
    import torch

    sys.path.insert(0, src)
    import score

    torch.manual_seed(26)
    torch.save(score.Net().state_dict(), os.path.join(src, "model.pt"))
    rng = np.random.default_rng(26)
    os.makedirs(data)
    for i in range(n):
        np.save(os.path.join(data, "img%05d.npy" % i), rng.random((3, 64, 64), dtype=np.float32))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--peer":
        src, data, out, workers, per_batch = sys.argv[2:7]
        peer_pool(src, data, out, int(workers), int(per_batch))
        return 0
    ap = benchlib.arg_parser(__doc__)
    ap.add_argument("--images", type=int, default=5000)
    ap.add_argument("--per-batch", type=int, default=50)
    args = ap.parse_args()
    with benchlib.Workdir(args.keep) as wd:
        data, src = os.path.join(wd, "data"), os.path.join(wd, "src")
        os.makedirs(src)
        with open(os.path.join(src, "score.py"), "w") as f:
            f.write(SCORE)
        sys.stderr.write("torch: making %d images in %s\n" % (args.images, wd))
        make_data(data, src, args.images)
        outs = dict((n, os.path.join(wd, "out-%s.txt" % n)) for n in ("fanout", "pool"))
        job = os.path.join(wd, "job.yaml")
        with open(job, "w") as f:
            f.write(JOB.format(data=data, out=outs["fanout"], workers=args.workers, src=src,
                               per_batch=args.per_batch))
        me = os.path.abspath(__file__)
        contenders = [
            *benchlib.fanout_contenders(args, job, wd),
            ("pool", lambda: [args.python, me, "--peer", src, data, outs["pool"], str(args.workers),
                              str(args.per_batch)])]
        contenders = [c for c in contenders if benchlib.wanted(args, c[0])]

        def check(name):
            n = benchlib.count_lines(outs[name.replace("-before", "")])
            if n != args.images:
                raise SystemExit("torch: %s wrote %d rows, expected %d" % (name, n, args.images))

        results, skipped = benchlib.run_interleaved(contenders, args.repeats, check,
                                                     args.timeline)
        if "fanout" in results and "pool" in results:
            if benchlib.sorted_lines(outs["fanout"]) != benchlib.sorted_lines(outs["pool"]):
                raise SystemExit("torch: fanout and pool wrote different rows")
        benchlib.print_table("torch: %d images 3x64x64, %d per mini-batch, %d workers, 1 torch "
                             "thread each, %d repeats" % (args.images, args.per_batch, args.workers,
                                                          args.repeats), results, skipped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
