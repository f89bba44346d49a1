#!/usr/bin/env python3
"""What an unauthenticated HTTP peer can make `fanout dashboard` and the interchange's /metrics
hold, and where the dashboard's token comes from (docs/security.md, "HTTP servers").

- header_flood: 8 tokenless connections sending header lines without end, each reconnecting
  when cut, leave the dashboard under 100 MB of peak RSS and answering; the flood ends once each
  was cut 10 times, or past 100 MB of RSS, 400 MB sent or 90 s (the dashboard kept every header
  line until the token check, and grew past 1 GB).
- slow_peers: with 12 connections each sending one header line a second, a request with the
  token is answered at once (it waited for a free thread, behind them, and timed out).
- token_not_in_ps: the token comes from --token-file (the user's own, mode 0600) or
  FANOUT_DASHBOARD_TOKEN, and /proc/PID/cmdline does not hold it; --token is refused, and so are a
  token file readable by others, a link, and (as root) a file another user owns.
- foreign_host: a tokenless dashboard answers Host 127.0.0.1, localhost and [::1] and refuses
  (403) a DNS name, as DNS rebinding would send; so does a loopback /metrics.
- metrics_slow_peers: /metrics answers with 8 slow connections open (two threads served it, so
  two held it).

Each connection goes to 127.0.0.1 and is bounded in time and count. Environment: FANOUT_BIN,
FANOUT_INTERCHANGE_BIN, FANOUT_POOL_BIN (set by tests/meson.build).
"""
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time

import support
from support import FANOUT, PYTHON, fail, scratch, wait_until

FLOOD_CONNECTIONS = 8
FLOOD_MAX_SECONDS = 90.0  # the flood's end if neither of the two below comes first
FLOOD_MAX_BYTES = 400e6
FLOOD_CUTS = 10  # each connection cut this often (and 5 s passed): the server is shown to cope
FLOOD_RSS_LIMIT_MB = 100
SLOW_CONNECTIONS = 12
ANSWER_WITHIN_S = 3.0  # "under a second", with room for a busy 2-core machine
TOKEN = "tok-7d1f0c2a9e4b4b7f8a2c"


def proc_status_mb(pid, field):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def raw_get(port, target="/", host=None, headers=(), timeout=20):
    """(status, body, seconds) of one GET sent by hand, so Host is exactly what is given (None:
    no Host header)."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        head = "GET %s HTTP/1.1\r\n" % target
        if host is not None:
            head += "Host: %s\r\n" % host
        for h in headers:
            head += h + "\r\n"
        s.sendall((head + "Connection: close\r\n\r\n").encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    took = time.monotonic() - t0
    m = re.match(rb"HTTP/1\.[01] (\d+)", data)
    if not m:
        fail("GET %s (Host %r): no status line in %r" % (target, host, data[:200]))
    return int(m.group(1)), data.split(b"\r\n\r\n", 1)[-1].decode(errors="replace"), took


class Dashboard:
    """`fanout dashboard` on a free loopback port, with `extra` arguments and `env`."""

    def __init__(self, root, db, name, extra=(), env=None):
        self.ready = os.path.join(root, name + ".ready")
        self.log_path = os.path.join(root, name + ".log")
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen([FANOUT, "dashboard", "--db", db, "--listen", "127.0.0.1:0",
                                      "--ready-file", self.ready, *extra],
                                     stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env)
        log.close()
        wait_until(lambda: os.path.exists(self.ready) or self.proc.poll() is not None, 30,
                   "the dashboard to listen")
        if self.proc.poll() is not None:
            fail("fanout dashboard %s exited %d:\n%s" % (" ".join(extra), self.proc.returncode,
                                                         open(self.log_path).read()))
        self.port = int(open(self.ready).read().strip().rsplit(":", 1)[1].rstrip("/"))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


class Peers:
    """Hostile connections to 127.0.0.1:port from threads of their own, each stopping by itself
    after `seconds`. flood: header lines of 4 KB as fast as they go, reconnecting when cut.
    slow: one header line a second on one connection each."""

    def __init__(self, port, count, mode, seconds):
        self.port, self.mode = port, mode
        self.deadline = time.monotonic() + seconds
        self.stopped = threading.Event()
        self.sent = 0
        self.cuts = [0] * count  # per connection: how often the server cut it
        self.socks = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                        for i in range(count)]
        for t in self.threads:
            t.start()

    def _over(self):
        return self.stopped.is_set() or time.monotonic() > self.deadline

    def _run(self, i):
        line = ("X-Fill: " + "a" * 4000 + "\r\n").encode()
        while not self._over():
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            except OSError:
                time.sleep(0.05)
                continue
            with self.lock:
                self.socks.append(s)
            try:
                s.sendall(b"GET /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                while not self._over():
                    if self.mode == "flood":
                        s.sendall(line)
                        self.sent += len(line)
                    else:
                        s.sendall(b"X-Slow-%d: 1\r\n" % i)
                        self.stopped.wait(1.0)
                if self.mode == "slow":
                    return
            except OSError:
                self.cuts[i] += 1
                if self.mode == "slow":
                    return
                time.sleep(0.05)  # a cut flooder comes back, as an attacker would
            finally:
                if self.mode == "flood":
                    s.close()

    def still_open(self):
        """How many of the (slow) connections the server has neither answered nor closed: those
        with nothing to read, not even an end."""
        with self.lock:
            socks = list(self.socks)
        readable, _, _ = select.select(socks, [], [], 0)
        return len(socks) - len(readable)

    def stop(self):
        self.stopped.set()
        for t in self.threads:
            t.join(timeout=30)
        for s in self.socks:
            s.close()


def make_store(root):
    """A store with one finished job, made by `fanout run`."""
    folder = os.path.join(root, "job")
    support.make_files(os.path.join(folder, "data"), ["f%d.txt" % i for i in range(2)])
    support.write(os.path.join(folder, "src", "score.py"), support.PASS_THROUGH)
    job = support.write(os.path.join(folder, "job.yaml"), support.job_yaml("bounds", output=None))
    db = os.path.join(root, "store.db")
    support.fanout("run", job, "--db", db, "--python", PYTHON, "--quiet", timeout=240)
    return db


def token_file(root, name, mode=0o600, text=TOKEN + "\n"):
    path = os.path.join(root, name)
    support.write(path, text)
    os.chmod(path, mode)
    return path


def header_flood(root, db):
    d = Dashboard(root, db, "flood", ["--token-file", token_file(root, "flood.token")])
    try:
        before = proc_status_mb(d.proc.pid, "VmRSS")
        t0 = time.monotonic()
        peers = Peers(d.port, FLOOD_CONNECTIONS, "flood", FLOOD_MAX_SECONDS)
        peak = 0.0
        while not peers._over() and peers.sent < FLOOD_MAX_BYTES:
            if d.proc.poll() is not None:
                peers.stop()
                fail("the dashboard died under the header flood (exit %d)" % d.proc.returncode)
            peak = max(peak, proc_status_mb(d.proc.pid, "VmHWM"))
            if peak > FLOOD_RSS_LIMIT_MB:
                break  # shown: no need to grow it further
            if min(peers.cuts) >= FLOOD_CUTS and time.monotonic() - t0 > 5:
                break
            time.sleep(0.2)
        peers.stop()
        took = time.monotonic() - t0
        peak = max(peak, proc_status_mb(d.proc.pid, "VmHWM"))
        if peak > FLOOD_RSS_LIMIT_MB:
            fail("%d header-flooding connections took the dashboard from %.1f MB to a peak of "
                 "%.1f MB RSS in %.0f s (limit %d MB; %.0f MB sent)" % (
                     FLOOD_CONNECTIONS, before, peak, took, FLOOD_RSS_LIMIT_MB, peers.sent / 1e6))
        if min(peers.cuts) < FLOOD_CUTS:
            fail("a flooding connection was cut only %d times in %.0f s (%.0f MB sent)" % (
                min(peers.cuts), took, peers.sent / 1e6))
        status, _, _ = raw_get(d.port, "/api/jobs", "127.0.0.1",
                               ["Authorization: Bearer " + TOKEN])
        if status != 200:
            fail("after the flood, GET /api/jobs with the token: %d" % status)
        print("ok: %d header-flooding connections for %.0f s (%.1f MB sent, each cut %d+ times): "
              "peak RSS %.1f MB (%.1f MB before)" % (FLOOD_CONNECTIONS, took, peers.sent / 1e6,
                                                     min(peers.cuts), peak, before))
    finally:
        d.stop()


def answered_beside_slow_peers(port, count, target, headers, what):
    """Opens `count` slow connections, then GETs `target`: fails unless it is answered 200
    within ANSWER_WITHIN_S while they are all still open. Returns the body."""
    peers = Peers(port, count, "slow", 60)
    try:
        wait_until(lambda: len(peers.socks) == count, 30, "%d slow connections" % count)
        time.sleep(2.5)  # each has sent a few header lines and waits to send the next
        try:
            status, body, took = raw_get(port, target, "127.0.0.1", headers,
                                         timeout=ANSWER_WITHIN_S * 4)
        except socket.timeout:
            fail("%s: GET %s was not answered in %.0f s with %d slow connections open" % (
                what, target, ANSWER_WITHIN_S * 4, count))
        still = peers.still_open()
    finally:
        peers.stop()
    if status != 200 or took > ANSWER_WITHIN_S:
        fail("%s: GET %s with %d slow connections open: %d after %.2f s (expected 200 within "
             "%.0f s)" % (what, target, count, status, took, ANSWER_WITHIN_S))
    if still != count:
        fail("%s: only %d of the %d slow connections were still open: the answer did not have to "
             "wait for them" % (what, still, count))
    print("ok: %s answered GET %s in %.2f s beside %d slow connections" % (what, target, took,
                                                                         count))
    return body


def slow_peers(root, db):
    d = Dashboard(root, db, "slow", ["--token-file", token_file(root, "slow.token")])
    try:
        body = answered_beside_slow_peers(d.port, SLOW_CONNECTIONS, "/api/jobs",
                                          ["Authorization: Bearer " + TOKEN], "the dashboard")
        if '"bounds"' not in body:
            fail("GET /api/jobs does not list the job: %s" % body[:300])
    finally:
        d.stop()


def refused(root, db, name, extra, want, env=None):
    p = subprocess.run([FANOUT, "dashboard", "--db", db, "--listen", "127.0.0.1:0", *extra],
                       capture_output=True, text=True, timeout=60, env=env)
    if p.returncode != 2 or not re.search(want, p.stderr):
        fail("%s: exit %d (expected 2 with /%s/): %s" % (name, p.returncode, want, p.stderr))


def token_not_in_ps(root, db):
    for name, extra, env in (
            ("--token-file", ["--token-file", token_file(root, "ps.token")], None),
            ("FANOUT_DASHBOARD_TOKEN", [], dict(os.environ, FANOUT_DASHBOARD_TOKEN=TOKEN))):
        d = Dashboard(root, db, "ps-" + name.strip("-").lower(), extra, env)
        try:
            cmdline = open("/proc/%d/cmdline" % d.proc.pid, "rb").read()
            if TOKEN.encode() in cmdline:
                fail("%s: the token is in /proc/%d/cmdline: %r" % (name, d.proc.pid, cmdline))
            for headers, want in (([], 401), (["Authorization: Bearer " + TOKEN], 200),
                                  (["Authorization: Bearer " + TOKEN[:-1] + "x"], 401)):
                status, _, _ = raw_get(d.port, "/api/jobs", "127.0.0.1", headers)
                if status != want:
                    fail("%s: GET /api/jobs %s: %d, expected %d" % (name, headers, status, want))
        finally:
            d.stop()
    refused(root, db, "--token", ["--token", TOKEN], r"ps")
    refused(root, db, "a token file others can read",
            ["--token-file", token_file(root, "open.token", 0o644)], r"chmod 600")
    link = os.path.join(root, "link.token")
    os.symlink(token_file(root, "target.token"), link)
    refused(root, db, "a token file through a link", ["--token-file", link], r"symbolic link")
    refused(root, db, "an empty token file", ["--token-file", token_file(root, "empty.token",
                                                                        text="")], r"empty")
    if os.geteuid() == 0:
        theirs = token_file(root, "theirs.token")
        os.chown(theirs, 65534, 65534)
        refused(root, db, "another user's token file", ["--token-file", theirs], r"not by you")
    else:
        print("note: not root, so a token file another user owns is not tried")
    print("ok: the token from --token-file or FANOUT_DASHBOARD_TOKEN is not in /proc/PID/cmdline;"
          " --token and unsafe token files refused")


def check_hosts(port, target, what):
    for host, want in (("127.0.0.1:%d" % port, 200), ("localhost:%d" % port, 200),
                       ("[::1]:%d" % port, 200), ("127.0.0.1", 200),
                       ("rebind.example:%d" % port, 403), ("rebind.example", 403),
                       ("127.0.0.1.rebind.example:%d" % port, 403), (None, 403)):
        status, body, _ = raw_get(port, target, host)
        if status != want:
            fail("%s: GET %s with Host %r: %d, expected %d (%s)" % (what, target, host, status,
                                                                   want, body[:200]))
    print("ok: %s answers loopback Host names and refuses others with 403" % what)


def foreign_host(root, db):
    d = Dashboard(root, db, "host")
    try:
        check_hosts(d.port, "/api/jobs", "a tokenless dashboard")
        status, body, _ = raw_get(d.port, "/", "rebind.example")
        if "token" not in body:
            fail("the 403 does not say what to do: %s" % body)
    finally:
        d.stop()


def metrics_slow_peers(root):
    ixdir = os.path.join(root, "ix")
    with support.Cluster(ixdir, os.path.join(ixdir, "store.db"),
                         ["--client-endpoint", "ipc://%s/client" % ixdir,
                          "--pool-endpoint", "ipc://%s/pool" % ixdir, "--write-root", root,
                          "--metrics-listen", "127.0.0.1:0"]) as cl:
        def address():
            m = re.search(r"metrics: http://127\.0\.0\.1:(\d+)/metrics", open(cl.log).read())
            return int(m.group(1)) if m else None
        port = wait_until(address, 30, "the metrics address in the interchange's log")
        body = answered_beside_slow_peers(port, 8, "/metrics", [], "/metrics")
        if not re.search(r"^fanout_pools ", body, re.M):
            fail("/metrics lacks fanout_pools:\n%s" % body[:2000])
        check_hosts(port, "/metrics", "a loopback /metrics")


SCENARIOS = ("token_not_in_ps", "foreign_host", "slow_peers", "header_flood",
             "metrics_slow_peers")


def main():
    """Runs every scenario, or those named on the command line."""
    support.require_fanout()
    names = sys.argv[1:] or SCENARIOS
    for n in names:
        if n not in SCENARIOS:
            fail("no scenario %r (there are: %s)" % (n, ", ".join(SCENARIOS)))
    with scratch("http-bounds") as root:
        os.chmod(root, 0o700)
        db = make_store(root) if any(n != "metrics_slow_peers" for n in names) else None
        for n in names:
            if n == "metrics_slow_peers":
                metrics_slow_peers(root)
            else:
                globals()[n](root, db)
    return 0


if __name__ == "__main__":
    sys.exit(main())
