#!/usr/bin/env python3
"""The real-workload benchmarks of tools/bench/ (docs/performance.md, "Real workloads") run end to
end at tiny sizes, one repeat (and host_costs.py once): each makes its data, runs fanout and its
hand-written peer, checks they wrote the same rows and prints its table. Not a timing test: the
figures are not looked at. Skipped without /usr/bin/python3 with pandas and numpy; the torch one
without torch; the multihost one (network-namespace hosts) without root or `ip netns`.
Environment: FANOUT_BIN, FANOUT_SOURCE_ROOT (set by tests/meson.build)."""

import os
import subprocess

from support import fail, skip
import support

PY = "/usr/bin/python3"


def has(module):
    return os.path.exists(PY) and subprocess.run([PY, "-c", "import " + module],
                                                 capture_output=True).returncode == 0


def bench(script, *args, peer="pool"):
    path = os.path.join(support.SOURCE_ROOT, "tools", "bench", script)
    r = subprocess.run([PY, path, "--fanout", support.FANOUT, "--repeats", "1", *args],
                       capture_output=True, text=True, timeout=600)
    if r.returncode == support.SKIP and script == "multihost.py":
        # It needs root and network namespaces; the others ran, so this test still passes.
        print("%s: not run, %s" % (script, (r.stdout + r.stderr).strip()))
        return
    if r.returncode != 0:
        fail("%s exited %d\n%s\n%s" % (script, r.returncode, r.stdout, r.stderr[-3000:]))
    for name in ("| fanout |", "| %s |" % peer):
        if name not in r.stdout:
            fail("%s: no row %r in its table:\n%s" % (script, name, r.stdout))
    print(r.stdout)


def main():
    support.require_fanout()
    if not (has("pandas") and has("numpy")):
        skip("%s cannot import pandas and numpy (apt-get install python3-pandas)" % PY)
    # What the host charges for a system call and a page fault: printed beside the figures.
    host_costs = os.path.join(support.SOURCE_ROOT, "tools", "bench", "host_costs.py")
    costs = subprocess.run([PY, host_costs, "--calls", "1000", "--repeats", "1"],
                           capture_output=True, text=True, timeout=120)
    rows = costs.stdout.count("\n| ")  # the four operations, after the header
    if costs.returncode != 0 or rows != 4 or "| page fault |" not in costs.stdout:
        fail("host_costs.py exited %d:\n%s\n%s" % (costs.returncode, costs.stdout, costs.stderr))
    print(costs.stdout)
    bench("tabular.py", "--rows", "3000", "--only", "fanout,pool")
    bench("files.py", "--files", "300")
    bench("startup.py", "--only", "fanout,pool 1 task", peer="pool 1 task")
    if has("torch"):
        bench("torch_infer.py", "--images", "60", "--per-batch", "20")
    else:
        print("torch_infer.py: not run, %s cannot import torch (apt-get install python3-torch)" % PY)
    # 4 pools on network-namespace hosts against Dask distributed (a SKIP row without it).
    bench("multihost.py", "--rows", "3000", "--files", "300", "--interchange-bin",
          support.INTERCHANGE, "--pool-bin", support.POOL, peer="dask")
    print("ok: bench_smoke")


if __name__ == "__main__":
    main()
