#!/usr/bin/env python3
"""The address `fanout run --launcher slurm` gives its pools when --interchange-address is not
given (client/launch/pool_address.*), through the real getifaddrs(3) of a network namespace.

Each case makes its own namespace (ip netns add fanout-pa-PID-CASE; veth pairs with both ends
inside it, so the machine's own network is never touched) and removes it, also on failure, and
runs the real `fanout run job.yaml --launcher slurm` in it:

  loopback_only  only `lo` up: exit 2, "no network interface but loopback is up", asking for
                 --interchange-address; nothing started.
  first_usable   d0 (10.231.9.2/24, listed first) is down, e0 (10.231.8.2/24) is up: the pools'
                 endpoint in the kept batch script is tcp://10.231.8.2:PORT.
  ipv6_only      e0 up with only IPv6 addresses: exit 2 naming them.

The run stops at sbatch: Slurm's commands are stand-ins on PATH (sbatch fails at once, squeue
and scancel list nothing), as this test is about the interface, not Slurm (it_slurm runs the
real one). Exit 77 (meson: skipped) when not root or `ip netns` is not permitted.
Environment: FANOUT_BIN, FANOUT_SOURCE_ROOT.
"""
import os
import re
import subprocess
import sys

from support import FANOUT, SKIP, SOURCE_ROOT as SRC, fail, scratch
import support


def ip(*args):
    r = subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail(f"ip {' '.join(args)}: {r.stderr.strip()}")


class Netns:
    """A namespace with `lo` up, removed on leaving (with any process left in it)."""

    def __init__(self, case):
        self.name = f"fanout-pa-{os.getpid()}-{case}"

    def __enter__(self):
        ip("netns", "add", self.name)
        ip("-n", self.name, "link", "set", "lo", "up")
        return self

    def __exit__(self, *exc):
        pids = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True,
                              text=True, timeout=60).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
        subprocess.run(["ip", "netns", "del", self.name], timeout=60)
        if pids:
            fail(f"{self.name}: processes left in the namespace: {pids}")
        return False

    def veth(self, name, up, *addrs):
        ip("-n", self.name, "link", "add", name, "type", "veth", "peer", "name", name + "p")
        for a in addrs:
            if ":" in a:
                ip("-n", self.name, "-6", "addr", "add", a, "dev", name, "nodad")
            else:
                ip("-n", self.name, "addr", "add", a, "dev", name)
        if up:
            ip("-n", self.name, "link", "set", name, "up")
            ip("-n", self.name, "link", "set", name + "p", "up")


def write_job(root):
    support.make_files(os.path.join(root, "data"), ["a.txt"])
    support.write(os.path.join(root, "src", "score.py"), support.PASS_THROUGH)
    job = support.write(os.path.join(root, "job.yaml"), support.job_yaml(
        "pa", output=os.path.join(root, "out.txt"), concurrency=None,
        task="  code: ./src\n  entry_script: score.py\n", top="fanout:\n  launcher: slurm\n"))
    fake = os.path.join(root, "fake-slurm")
    for cmd, body in (("sbatch", 'echo "sbatch: error: no Slurm in this test" >&2\nexit 1\n'),
                      ("squeue", "exit 0\n"), ("scancel", "exit 0\n")):
        support.write(os.path.join(fake, cmd), "#!/bin/sh\n" + body, mode=0o755)
    return job, fake


def run_in(ns, root, case):
    job, fake = write_job(os.path.join(root, case))
    case_dir = os.path.dirname(job)
    env = dict(os.environ)
    env["PATH"] = fake + ":" + env.get("PATH", "/usr/bin:/bin")
    r = subprocess.run(["ip", "netns", "exec", ns.name, FANOUT, "run", job, "--db",
                        os.path.join(case_dir, "f.db"), "--run-dir",
                        os.path.join(case_dir, "runs"), "--keys", os.path.join(root, "keys")],
                       env=env, capture_output=True, text=True, timeout=120)
    return r, case_dir


def case_loopback_only(root):
    with Netns("lo") as ns:
        r, d = run_in(ns, root, "loopback_only")
    if r.returncode != 2 or "no network interface but loopback is up" not in r.stderr or \
            "--interchange-address" not in r.stderr:
        fail(f"loopback_only: expected exit 2 asking for --interchange-address, got "
             f"{r.returncode}:\n{r.stderr}")
    if os.path.exists(os.path.join(d, "runs")) and os.listdir(os.path.join(d, "runs")):
        fail("loopback_only: a run folder was made although nothing could start")
    print("ok: loopback_only: " + r.stderr.strip().splitlines()[-1])


def case_first_usable(root):
    with Netns("v4") as ns:
        ns.veth("d0", False, "10.231.9.2/24")  # listed first, but down
        ns.veth("e0", True, "10.231.8.2/24")
        r, d = run_in(ns, root, "first_usable")
    runs = os.path.join(d, "runs")
    scripts = [os.path.join(runs, x, "slurm", "pools.sbatch") for x in os.listdir(runs)] \
        if os.path.isdir(runs) else []
    if len(scripts) != 1 or not os.path.exists(scripts[0]):
        fail(f"first_usable: no batch script kept (exit {r.returncode}):\n{r.stderr}")
    with open(scripts[0]) as f:
        endpoints = re.findall(r"tcp://[0-9.]+:[0-9]+", f.read())
    if len(endpoints) != 1 or not endpoints[0].startswith("tcp://10.231.8.2:"):
        fail(f"first_usable: expected the pools sent to tcp://10.231.8.2:PORT, got {endpoints}")
    if r.returncode != 3 or "no Slurm in this test" not in r.stderr:
        fail(f"first_usable: expected exit 3 with sbatch's error, got {r.returncode}:\n{r.stderr}")
    if re.search(r"pool jobs: slurm jobs?\s*$", r.stderr, re.M):
        fail(f"first_usable: a pool-jobs line without any job:\n{r.stderr}")
    print(f"ok: first_usable: down d0 skipped, pools sent to {endpoints[0]}")


def case_ipv6_only(root):
    with Netns("v6") as ns:
        ns.veth("e0", True, "fd00:231:8::2/64")
        r, _ = run_in(ns, root, "ipv6_only")
    if r.returncode != 2 or "only IPv6 (" not in r.stderr or "fd00:231:8::2" not in r.stderr or \
            "--interchange-address" not in r.stderr:
        fail(f"ipv6_only: expected exit 2 naming the IPv6 addresses, got {r.returncode}:\n"
             f"{r.stderr}")
    print("ok: ipv6_only: " + r.stderr.strip().splitlines()[-1])


def main():
    if not FANOUT or not SRC:
        print("it_pool_address: FANOUT_BIN and FANOUT_SOURCE_ROOT must be set", file=sys.stderr)
        return 2
    chk = subprocess.run(["bash", os.path.join(SRC, "tests", "netns", "bed.sh"), "check"],
                         capture_output=True, text=True)
    if chk.returncode != 0:
        print("it_pool_address: skipped: " + (chk.stdout + chk.stderr).strip(), file=sys.stderr)
        return SKIP
    with scratch("pa") as root:
        for name in sys.argv[1:] or ["loopback_only", "first_usable", "ipv6_only"]:
            globals()["case_" + name](root)
    print("it_pool_address: all cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
