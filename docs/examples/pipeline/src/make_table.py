"""Makes a small table: CSV files and the MLTable file that describes them (stdlib only)."""
import argparse
import os
import random

parser = argparse.ArgumentParser()
parser.add_argument("--rows", type=int, required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()

os.makedirs(args.out, exist_ok=True)
rng = random.Random(7)
per_file = max(1, args.rows // 3)
for f in range(3):
    first, last = f * per_file, args.rows if f == 2 else (f + 1) * per_file
    with open(os.path.join(args.out, "trips-%d.csv" % f), "w") as out:
        out.write("trip_id,distance_km,minutes,comment\n")
        for i in range(first, last):
            comment = '"late, then ""fast"""' if i % 11 == 0 else "ok"
            out.write("%d,%.2f,%d,%s\n" % (i, rng.uniform(0.5, 30), rng.randint(3, 90), comment))
with open(os.path.join(args.out, "MLTable"), "w") as out:
    out.write("paths:\n  - pattern: ./trips-*.csv\ntransformations:\n"
              "  - read_delimited:\n      delimiter: ','\n      header: all_files_same_headers\n"
              "      encoding: utf8\n")
print("made %d rows in %s" % (args.rows, args.out))
