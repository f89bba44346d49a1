#!/usr/bin/env bash
# Runs the real-workload benchmarks (docs/performance.md, "Real workloads") and prints their
# tables. Arguments go to every benchmark (e.g. --repeats 5, --fanout PATH); the sizes are each
# script's defaults. Needs a built build/client/fanout and /usr/bin/python3 with pandas, numpy
# and torch (python3-pandas, python3-torch); Dask columns need python3-distributed.
# multihost.py (4 pools on network-namespace hosts against Dask distributed) needs root; without
# it, it prints SKIP and the others still run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
"$py" "$here/host_costs.py"
"$py" "$here/tabular.py" "$@"
"$py" "$here/files.py" "$@"
"$py" "$here/torch_infer.py" "$@"
"$py" "$here/adhoc.py" "$@"
rc=0
"$py" "$here/multihost.py" "$@" || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || exit "$rc"
