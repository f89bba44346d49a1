#!/usr/bin/env bash
# Measures every performance target (and the job's end) one after another and prints the
# figures that docs/performance.md sections 2 and 6 report. Needs a built tree (tools/build.sh)
# and about 5 minutes on a quiet 2-core machine. Usage: tools/perf_targets.sh [OUT_DIR]   (default /tmp/fanout-targets)
# The million-file folder is made once under OUT_DIR and reused.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
fanout="$top/build/client/fanout"
out=${1:-/tmp/fanout-targets}
mkdir -p "$out"
py=/usr/bin/python3
[ -x "$py" ] || py=python3

echo "== native no-op vs the ceiling probe (3 runs)"
for i in 1 2 3; do "$fanout" perf --tasks 200000 | grep -E "end to end|CPU|ceiling|relay with|store:"; done

echo "== Python no-op vs multiprocessing.Pool(2) (2 runs)"
for i in 1 2; do
  "$fanout" perf --tasks 30000 --runtime python --python "$py" --no-ceiling |
    grep -E "end to end|multiprocessing|store:"
done

echo "== 10 ms tasks on 2 workers"
"$fanout" perf --tasks 2000 --sleep-ms 10 --no-ceiling | grep -E "end to end|ideal"

echo "== logging: CPU per mini-batch at warning, info, debug (3 rounds, interleaved)"
for i in 1 2 3; do
  for level in warning info debug; do
    "$fanout" perf --tasks 200000 --no-ceiling --log-level "$level" --json |
      "$py" -c 'import json,sys; r=json.loads(sys.stdin.readline()); c=r["cpu_ms_per_minibatch"];
print("%-8s rate %8.0f/s  cpu us/mb %.2f" % (sys.argv[1], r["rate"], 1000*(c["interchange"]+c["pools"]+c["workers"])))' "$level"
  done
done

echo "== interchange peak RSS through 1,000,000 mini-batches"
"$fanout" perf --tasks 1000000 | grep -E "end to end|job report|RSS|store:|ceiling|relay with"

echo "== the job's end: last result in to fanout run returning, 1,000,000 mini-batches (issue 14: <= 0.5 s; 3 runs)"
for i in 1 2 3; do "$fanout" perf --tasks 1000000 --no-ceiling --no-baseline | grep -E "end to end|job report"; done

echo "== first mini-batch after fanout run starts, 1,000,000-file folder"
million="$out/million"
if [ ! -f "$million/.complete" ]; then
  rm -rf "$million" && mkdir -p "$million/data"
  "$py" -c 'import os,sys; d=sys.argv[1]
for i in range(1000000): open(os.path.join(d, "f%07d" % i), "w").close()' "$million/data"
  touch "$million/.complete"
fi
cat > "$million/job.yaml" <<YAML
type: parallel
name: million-files
inputs:
  files: {type: uri_folder, path: ./data}
input_data: \${{inputs.files}}
mini_batch_size: "10"
max_concurrency_per_instance: 2
task:
  type: native
  code: .
  library: builtin:noop
YAML
rm -f "$million/million.db"*
start=$(date +%s.%N)
"$fanout" run "$million/job.yaml" --db "$million/million.db" --quiet > /dev/null
sqlite3 "$million/million.db" "select printf('first mini-batch started %.3f s after fanout run started; %d of %d mini-batches succeeded', min(a.start) - $start, (select count(*) from minibatches where state='succeeded'), (select count(*) from minibatches)) from attempts a"
