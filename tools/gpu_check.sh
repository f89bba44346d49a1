#!/usr/bin/env bash
# Checks worker placement on a machine with NVIDIA GPUs (docs/resources.md): runs a small torch
# inference job with one worker per GPU (no worker count: the pool finds the GPUs itself) and
# prints which device each worker used, from the job's rows (its CUDA_VISIBLE_DEVICES, and the
# UUID torch saw) and from NVML (nvidia-smi's compute processes), then what the store recorded.
# Needs the NVIDIA driver and Debian's python3-torch with CUDA; elsewhere it prints
# "SKIPPED: <reason>" and exits 0.
#   tools/gpu_check.sh          uses build/ (after tools/build.sh), else fanout on PATH
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
skip() {
  echo "SKIPPED: $*"
  exit 0
}
if [ -x "$top/build/client/fanout" ]; then
  FANOUT=$top/build/client/fanout
elif command -v fanout >/dev/null 2>&1; then
  FANOUT=$(command -v fanout)
else
  skip "no fanout: build it first (tools/build.sh --programs) or put it on PATH"
fi
command -v nvidia-smi >/dev/null 2>&1 || skip "nvidia-smi not found (no NVIDIA driver here)"
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l) || gpus=0
[ "$gpus" -gt 0 ] || skip "nvidia-smi lists no GPU"
PY=${PYTHON:-/usr/bin/python3}
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
  skip "$PY has no torch with CUDA (Debian: apt-get install python3-torch, or PYTHON=...)"

work=$(mktemp -d /tmp/fanout-gpu-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/data" "$work/src"
for i in $(seq 1 $((gpus * 8))); do echo "$i" >"$work/data/item$(printf %04d "$i").txt"; done
cat >"$work/src/score.py" <<'PY'
# One small model per worker on its own GPU; each row names the device the worker used.
import os
import time

import torch

model = None
device = None


def init():
    global model, device
    device = torch.device("cuda:0")  # the worker's own GPU: CUDA_VISIBLE_DEVICES has one
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 10)).to(device).eval()


def run(mini_batch):
    rows = []
    props = torch.cuda.get_device_properties(device)
    uuid = str(getattr(props, "uuid", "?"))
    with torch.no_grad():
        for path in mini_batch:
            x = torch.randn(256, 1024, device=device)
            for _ in range(50):
                y = model(x)
            torch.cuda.synchronize()
            rows.append("%s %s CUDA_VISIBLE_DEVICES=%s torch_uuid=%s pid=%d argmax=%d" % (
                os.environ.get("FANOUT_PROCESS", "?"), os.path.basename(path),
                os.environ.get("CUDA_VISIBLE_DEVICES", "-"), uuid, os.getpid(),
                int(y.argmax())))
    time.sleep(0.2)  # long enough for nvidia-smi below to see the worker on its GPU
    return rows
PY
cat >"$work/job.yaml" <<YAML
type: parallel
name: gpu-check
inputs:
  files:
    type: uri_folder
    path: ./data
outputs:
  out:
    type: uri_file
    path: ./out.txt
input_data: \${{inputs.files}}
mini_batch_size: "1"
fanout:
  python: $PY
task:
  type: run_function
  code: ./src
  entry_script: score.py
  program_arguments: "--resource_monitor_interval 1"
  append_row_to: \${{outputs.out}}
YAML

echo "== $gpus GPU(s):"
nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader
( cd "$work" && "$FANOUT" run job.yaml --db "$work/fanout.db" -q ) &
run=$!
# NVML's view while the job runs: which worker pid computes on which GPU.
: >"$work/nvml.txt"
while kill -0 "$run" 2>/dev/null; do
  nvidia-smi --query-compute-apps=gpu_uuid,pid --format=csv,noheader >>"$work/nvml.txt" 2>/dev/null || true
  sleep 0.5
done
wait "$run" || echo "fanout run exited $? (see $work/out.txt)"

echo "== from the rows: worker -> device (CUDA_VISIBLE_DEVICES, the UUID torch saw)"
awk '{print $1, $3, $4}' "$work/out.txt" | sort | uniq -c
echo "== from NVML (nvidia-smi --query-compute-apps): GPU uuid -> worker pids"
sort -u "$work/nvml.txt" | while IFS=', ' read -r uuid pid; do
  [ -n "$pid" ] || continue
  worker=$(grep -m1 " pid=$pid " "$work/out.txt" | awk '{print $1}' || true)
  echo "$uuid pid $pid ${worker:-(not a worker of this job)}"
done
echo "== the store: attempts by device"
"$PY" - "$work/fanout.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for row in db.execute("select device, group_concat(distinct process), count(*) from attempts "
                      "group by device order by device"):
    print("device %s: workers %s, %d attempts" % row)
for row in db.execute("select device_index, name, round(avg(util_percent), 1), "
                      "round(max(mem_used_mb)) from gpu_samples group by device_index"):
    print("gpu_samples: GPU %s %s mean busy %s%%, max memory %s MB" % row)
PY
distinct=$(awk '{print $3}' "$work/out.txt" | sort -u | wc -l)
echo "== $distinct distinct CUDA_VISIBLE_DEVICES over $gpus GPU(s)"
[ "$distinct" -eq "$gpus" ] || { echo "FAIL: expected one worker per GPU"; exit 1; }
echo "OK"
