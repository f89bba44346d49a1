#!/usr/bin/env python3
"""Real-workload benchmark "tabular" (docs/performance.md, "Real workloads").

Scores a CSV of --rows rows (2,000,000: about 150 MB) with pandas, one output row per input
row, in "4mb" mini-batches on --workers workers:
  fanout  `fanout run job.yaml`: an MLTable input, run(DataFrame) -> DataFrame, append_row_to;
  pool    multiprocessing.Pool(W).imap_unordered over pandas.read_csv(chunksize=...) chunks,
          the rows written by the parent (the hand-written peer);
  dask    dask.distributed LocalCluster(W workers, 1 thread each), its start counted, over
          dask.dataframe.read_csv(blocksize=4 MB) (SKIP without python3-distributed).
Every contender writes the same rows ("id price", space-separated); the row count is checked
after each run and the rows themselves once at the end.
"""

import os
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

SCORE = '''\
"""The tabular benchmark's entry script (written by tools/bench/tabular.py)."""
import pandas as pd

CITY_FACTOR = {"Lyon": 1.1, "Porto": 0.9, "Graz": 1.0, "Turku": 0.8}


def score(df):
    factor = df["city"].map(CITY_FACTOR).fillna(1.0)
    price = df["area_m2"] * 3000.0 * factor + 5000 * df["rooms"]
    return pd.DataFrame({"id": df["id"], "price": price.round(2)})


def run(mini_batch):
    return score(mini_batch)


def as_rows(df):
    """The rows fanout's append_row writes for a DataFrame: space-separated, no header."""
    return df.to_csv(sep=" ", header=False, index=False)
'''

JOB = '''\
type: parallel
name: bench-tabular
inputs:
  table:
    type: mltable
    path: {data}
outputs:
  scores:
    type: uri_file
    path: {out}
input_data: ${{{{inputs.table}}}}
mini_batch_size: "4mb"
max_concurrency_per_instance: {workers}
task:
  type: run_function
  code: {src}
  entry_script: score.py
  append_row_to: ${{{{outputs.scores}}}}
'''

MLTABLE = '''\
type: mltable
paths:
  - file: ./houses.csv
transformations:
  - read_delimited:
      delimiter: ","
      encoding: utf8
      header: all_files_same_headers
'''

# The peers, run as their own process: `python3 tabular.py --peer pool|dask SRC CSV OUT W`.
MINI_BATCH_BYTES = 4 * 1024 * 1024  # fanout's "4mb"


def peer_pool(src, csv, out, workers):
    import multiprocessing

    import pandas as pd

    sys.path.insert(0, src)
    # Chunks of about fanout's mini-batch size: the rows in 4 MB at the file's mean row length.
    with open(csv, "rb") as f:
        head = f.read(1 << 20)
    chunk_rows = max(1, MINI_BATCH_BYTES * max(1, head.count(b"\n")) // max(1, len(head)))
    with multiprocessing.Pool(workers) as pool, open(out, "w") as f:
        chunks = pd.read_csv(csv, chunksize=chunk_rows)
        for text in pool.imap_unordered(_pool_work, chunks):
            f.write(text)


def _pool_work(df):
    import score

    return score.as_rows(score.score(df))


def peer_dask(src, csv, out, workers):
    import dask.dataframe as dd
    from dask.distributed import Client, LocalCluster, as_completed

    sys.path.insert(0, src)
    import score

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.upload_file(os.path.join(src, "score.py"))
        ddf = dd.read_csv(csv, blocksize=4 * 1024 * 1024)
        parts = ddf.map_partitions(lambda df: score.as_rows(score.score(df)), meta=(None, "object"))
        futures = client.compute(parts.to_delayed())
        with open(out, "w") as f:
            for fut in as_completed(futures):
                f.write(fut.result())


def make_data(folder, rows):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(26)
    cities = np.array(["Lyon", "Porto", "Graz", "Turku", "Oslo"])
    df = pd.DataFrame({
        "id": np.arange(rows),
        "city": cities[rng.integers(0, len(cities), rows)],
        "area_m2": rng.uniform(20, 250, rows).round(1),
        "rooms": rng.integers(1, 8, rows),
        "year": rng.integers(1900, 2025, rows),
        "note": np.array(["quiet street, south-facing garden", "needs work on the roof",
                          "near the station and the river", "garden with old fruit trees"])[
            rng.integers(0, 4, rows)],
    })
    os.makedirs(folder)
    df.to_csv(os.path.join(folder, "houses.csv"), index=False)
    with open(os.path.join(folder, "MLTable"), "w") as f:
        f.write(MLTABLE)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--peer":
        kind, src, csv, out, workers = sys.argv[2:7]
        (peer_pool if kind == "pool" else peer_dask)(src, csv, out, int(workers))
        return 0
    ap = benchlib.arg_parser(__doc__)
    ap.add_argument("--rows", type=int, default=2000000)
    args = ap.parse_args()
    with benchlib.Workdir(args.keep) as wd:
        data, src = os.path.join(wd, "data"), os.path.join(wd, "src")
        sys.stderr.write("tabular: making %d rows in %s\n" % (args.rows, wd))
        make_data(data, args.rows)
        os.makedirs(src)
        with open(os.path.join(src, "score.py"), "w") as f:
            f.write(SCORE)
        csv = os.path.join(data, "houses.csv")
        outs = dict((n, os.path.join(wd, "out-%s.txt" % n)) for n in ("fanout", "pool", "dask"))
        job = os.path.join(wd, "job.yaml")
        with open(job, "w") as f:
            f.write(JOB.format(data=data, out=outs["fanout"], workers=args.workers, src=src))
        me = os.path.abspath(__file__)

        def peer(kind):
            return [args.python, me, "--peer", kind, src, csv, outs[kind], str(args.workers)]

        def dask_cmd():
            try:
                import distributed  # noqa: F401
            except ImportError as e:
                return "dask.distributed is not importable (%s; Debian: python3-distributed)" % e
            return peer("dask")

        contenders = [*benchlib.fanout_contenders(args, job, wd),
                      ("pool", lambda: peer("pool")), ("dask", dask_cmd)]
        contenders = [c for c in contenders if benchlib.wanted(args, c[0])]

        def check(name):
            n = benchlib.count_lines(outs[name.replace("-before", "")])
            if n != args.rows:
                raise SystemExit("tabular: %s wrote %d rows, expected %d" % (name, n, args.rows))

        results, skipped = benchlib.run_interleaved(contenders, args.repeats, check,
                                                     args.timeline)
        ran = [n for n in outs if n in results]
        first = benchlib.sorted_lines(outs[ran[0]])
        for n in ran[1:]:
            if benchlib.sorted_lines(outs[n]) != first:
                raise SystemExit("tabular: %s and %s wrote different rows" % (ran[0], n))
        benchlib.print_table(textwrap.dedent("""\
            tabular: %d rows (%.0f MB), "4mb" mini-batches, %d workers, %d repeats""" % (
            args.rows, os.path.getsize(csv) / 1e6, args.workers, args.repeats)), results, skipped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
