#!/usr/bin/env python3
"""The interchange's Prometheus metrics (--metrics-listen, docs/observability.md).

- scraped_by_prometheus: a standalone fanout-interchange with --metrics-listen runs a real job;
  a real `prometheus` (Debian's package) started here scrapes it every second, and its HTTP API
  returns the job's completed mini-batch count, equal to the store's; `promtool check metrics`
  accepts what /metrics served during the job.
- embedded_run: `fanout run --metrics-listen` passes the address to the interchange it starts,
  which serves /metrics while the job runs.

Exit 77 (meson: skipped) when prometheus or promtool is missing, naming why. Environment:
FANOUT_BIN, FANOUT_INTERCHANGE_BIN, FANOUT_POOL_BIN (set by tests/meson.build).
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import support
from support import FANOUT, PYTHON, SKIP, fail, fanout, scratch, sql_int, wait_until

ENTRY = '''
import time

def run(mini_batch):
    time.sleep(0.15)
    return mini_batch
'''


def make_job(root, name, files):
    folder = os.path.join(root, name)
    support.make_files(os.path.join(folder, "data"), ["f%03d.txt" % i for i in range(files)])
    support.write(os.path.join(folder, "src", "score.py"), ENTRY)
    return support.write(os.path.join(folder, "job.yaml"), support.job_yaml(
        name, output=None, mini_batch_size=1, concurrency=2, retries=1, timeout=60))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def try_get(url):
    try:
        return get(url, timeout=5)
    except OSError:
        return None


def metrics_address(log):
    """HOST:PORT the interchange logged for its metrics."""
    if not os.path.exists(log):
        return None
    m = re.search(r"metrics: http://([0-9.]+:\d+)/metrics", open(log).read())
    return m.group(1) if m else None


def prom_value(prom, query):
    """The value of an instant query with one result, or None."""
    body = try_get("http://%s/api/v1/query?%s" % (prom, urllib.parse.urlencode({"query": query})))
    if not body:
        return None
    res = json.loads(body).get("data", {}).get("result", [])
    return float(res[0]["value"][1]) if len(res) == 1 else None


def scraped_by_prometheus(root, prometheus, promtool):
    ixdir = os.path.join(root, "ix")
    db = os.path.join(ixdir, "store.db")
    cep, pep = "ipc://%s/client" % ixdir, "ipc://%s/pool" % ixdir
    with support.Cluster(ixdir, db, ["--client-endpoint", cep, "--pool-endpoint", pep,
                                     "--write-root", root,
                                     "--metrics-listen", "127.0.0.1:0"]) as cl:
        target = wait_until(lambda: metrics_address(cl.log), 30, "the metrics address in the log")
        cl.start_pool(workers=2)
        prom = "127.0.0.1:%d" % free_port()
        support.write(os.path.join(root, "prometheus.yml"),
                      "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                      "scrape_configs:\n  - job_name: fanout\n    static_configs:\n"
                      "      - targets: ['%s']\n" % target)
        plog = open(os.path.join(root, "prometheus.log"), "w")
        p = subprocess.Popen([prometheus, "--config.file=" + os.path.join(root, "prometheus.yml"),
                              "--storage.tsdb.path=" + os.path.join(root, "tsdb"),
                              "--web.listen-address=" + prom],
                             stdout=plog, stderr=plog, stdin=subprocess.DEVNULL)
        try:
            wait_until(lambda: try_get("http://%s/-/ready" % prom), 60, "prometheus to be ready")
            # Its targets are discovered some seconds after it is ready: the job starts once it
            # has scraped the interchange, so that its scrapes cover the job.
            wait_until(lambda: prom_value(prom, 'up{job="fanout"}') == 1, 60,
                       "prometheus to scrape the interchange")
            job = make_job(root, "scraped", 60)
            client = subprocess.Popen([FANOUT, "run", job, "--interchange", cep, "--python",
                                       PYTHON, "--quiet"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True)
            job_id = wait_until(lambda: sql_int(db, "SELECT max(id) FROM jobs"), 60,
                                "the job in the store")
            # During the job: /metrics as promtool sees it, and the job's series present.
            text = wait_until(lambda: (lambda t: t if t and 'job_id="%d"' % job_id in t
                                       else None)(try_get("http://%s/metrics" % target)), 60,
                              "the job in /metrics")
            check = subprocess.run([promtool, "check", "metrics"], input=text,
                                   capture_output=True, text=True, timeout=60)
            if check.returncode != 0:
                fail("promtool check metrics: exit %d\n%s%s\n--- metrics:\n%s" % (
                    check.returncode, check.stdout, check.stderr, text[:3000]))
            for name in ("fanout_jobs", "fanout_attempts_total", "fanout_in_flight",
                         "fanout_queued", "fanout_workers_busy", "fanout_pools",
                         "fanout_pool_heartbeat_age_seconds", "fanout_store_write_queue_depth",
                         "fanout_store_commit_seconds_total", "fanout_refused_peers_total",
                         "fanout_job_minibatches_per_second"):
                if not re.search(r"^%s[{ ]" % name, text, re.M):
                    fail("/metrics lacks %s:\n%s" % (name, text[:3000]))
            _, err = client.communicate(timeout=240)
            if client.returncode != 0:
                fail("fanout run: exit %d\n%s" % (client.returncode, err))
            done = sql_int(db, "SELECT count(*) FROM minibatches WHERE job_id = %d AND "
                               "state = 'succeeded'" % job_id)
            if done != 60:
                fail("the store has %d succeeded mini-batches of 60" % done)
            query = 'fanout_job_minibatches_total{job_id="%d",outcome="succeeded"}' % job_id
            wait_until(lambda: prom_value(prom, query) == done, 60,
                       "prometheus to return the job's %d completed mini-batches" % done)
            during = prom_value(prom, "max_over_time(fanout_in_flight[5m])")
            if not during or during < 1:
                fail("prometheus never saw a mini-batch in flight (%s)" % during)
            print("ok: prometheus scraped %s and returned %d completed mini-batches of job %d; "
                  "promtool accepts /metrics" % (target, done, job_id))
        finally:
            p.terminate()
            p.wait(timeout=30)
            plog.close()


def embedded_run(root):
    db = os.path.join(root, "embedded.db")
    port = free_port()
    job = make_job(root, "embedded", 30)
    client = subprocess.Popen([FANOUT, "run", job, "--db", db, "--quiet", "--python", PYTHON,
                               "--metrics-listen", "127.0.0.1:%d" % port],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    text = wait_until(lambda: (lambda t: t if t and "fanout_job_minibatches_total{" in t
                               else None)(try_get("http://127.0.0.1:%d/metrics" % port)), 60,
                      "the embedded interchange's /metrics with the job")
    _, err = client.communicate(timeout=240)
    if client.returncode != 0:
        fail("fanout run --metrics-listen: exit %d\n%s" % (client.returncode, err))
    if 'job_name="embedded"' not in text:
        fail("the embedded interchange's /metrics does not name the job:\n%s" % text[:2000])
    print("ok: fanout run --metrics-listen served /metrics from its interchange")


def main():
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        print("SKIP: prometheus or promtool is not installed (tools/deps-debian-test.txt)")
        return SKIP
    support.require_fanout()
    with scratch("metrics") as root:
        scraped_by_prometheus(root, prometheus, promtool)
        embedded_run(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
