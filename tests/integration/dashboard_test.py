#!/usr/bin/env python3
"""`fanout dashboard` (client/commands/dashboard.*, docs/observability.md) in headless Chromium.

Real jobs run with the real binaries; the dashboard serves their store; Debian's `chromium` is
driven over the DevTools protocol on a pipe (--remote-debugging-pipe), so one page is read twice
without reloading it:
- live_job_page: the page of a running job shows its completed count rising between two reads,
  in the same document (a marker set on the window survives), with no console error, and a
  screenshot that is not blank.
- pages_render: the job list (with its filters), compare (two jobs picked) and tune pages render
  every chart with data and log no console error.
- token: a non-loopback --listen without a token is refused (exit 2); with --token-file, a
  request without it or with a wrong one gets 401, with it 200 (the token's other sources and
  limits: http_bounds_test.py).
- read_only: the dashboard never writes the store (its file is unchanged by a dashboard that
  only reads an ended store).

Exit 77 (meson: skipped) when chromium is missing, naming why. Environment: FANOUT_BIN (set by
tests/meson.build).
"""
import base64
import fcntl
import hashlib
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import support
from support import FANOUT, PYTHON, SKIP, fail, fanout, scratch, sql, sql_int, wait_until
from report_html_test import find_chromium, png_colours

ENTRY = '''
import os
import time

SLEEP = {sleep}

def run(mini_batch):
    rows = []
    for path in mini_batch:
        name = os.path.basename(path)
        if name.startswith("bad"):
            raise ValueError("cannot score " + name)
        time.sleep(SLEEP)
        rows.append(name)
    return rows
'''


def make_job(root, name, files, bad=0, sleep=0.0, mini_batch_size=1):
    folder = os.path.join(root, name)
    support.make_files(os.path.join(folder, "data"), ["doc%03d.txt" % i for i in range(files)])
    support.make_files(os.path.join(folder, "data"), ["bad%03d.txt" % i for i in range(bad)])
    support.write(os.path.join(folder, "src", "score.py"), ENTRY.replace("{sleep}", repr(sleep)))
    return support.write(os.path.join(folder, "job.yaml"), support.job_yaml(
        name, output=None, mini_batch_size=mini_batch_size, concurrency=2, retries=0,
        timeout=60))


class Dashboard:
    """`fanout dashboard` on a free loopback port; url is its base URL."""

    def __init__(self, root, db, *extra, name="dash"):
        self.ready = os.path.join(root, name + ".ready")
        self.log = open(os.path.join(root, name + ".log"), "w")
        self.proc = subprocess.Popen([FANOUT, "dashboard", "--db", db, "--listen",
                                      "127.0.0.1:0", "--ready-file", self.ready, *extra],
                                     stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        wait_until(lambda: os.path.exists(self.ready) or self.proc.poll() is not None, 30,
                   "the dashboard to listen")
        if self.proc.poll() is not None:
            fail("fanout dashboard exited %d" % self.proc.returncode)
        self.url = open(self.ready).read().strip().split("=", 1)[1]
        self.db = db

    def stop(self):
        self.proc.terminate()
        if self.proc.wait(timeout=30) != 0:
            fail("fanout dashboard: exit %d after SIGTERM" % self.proc.returncode)
        self.log.close()


def http(url, headers=None):
    """(status, body) of a GET."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Browser:
    """Headless Chromium driven over the DevTools protocol on fds 3 and 4 (one page)."""

    def __init__(self, chromium, root):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        # Above the fds the child gets, so that the dup2()s below cannot clobber one another.
        to_chrome_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
        from_chrome_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)

        def fds():
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.log = open(os.path.join(root, "chromium.log"), "w")
        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", "--remote-debugging-pipe", "--window-size=1300,2400",
             "--user-data-dir=" + os.path.join(root, "chromium-profile"), "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4), stdout=self.log, stderr=self.log,
            stdin=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.next_id = 0
        self.replies = {}
        self.events = queue.Queue()
        self.errors = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(domain + ".enable", session=True)

    def _read(self):
        buf = b""
        while True:
            chunk = os.read(self.from_chrome, 1 << 16)
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self.cv:
                    if "id" in msg:
                        self.replies[msg["id"]] = msg
                        self.cv.notify_all()
                        continue
                self._event(msg)

    def _event(self, msg):
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            self.errors.append("exception: %s" % p.get("exceptionDetails", {}))
        elif method == "Runtime.consoleAPICalled" and p.get("type") == "error":
            self.errors.append("console.error: %s" % p.get("args"))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            self.errors.append("log: %s %s" % (p["entry"].get("text"), p["entry"].get("url")))
        self.events.put(msg)

    def call(self, method, params=None, session=False, timeout=120):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self.cv:
            while self.next_id not in self.replies:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    fail("chromium: no reply to %s" % method)
                self.cv.wait(left)
            reply = self.replies.pop(self.next_id)
        if "error" in reply:
            fail("chromium: %s: %s" % (method, reply["error"]))
        return reply.get("result", {})

    def open(self, url):
        """Navigates and waits for the load event."""
        while not self.events.empty():
            self.events.get_nowait()
        self.call("Page.navigate", {"url": url}, session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                ev = self.events.get(timeout=1)
            except queue.Empty:
                continue
            if ev.get("method") == "Page.loadEventFired":
                return
        fail("chromium: %s did not load" % url)

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True},
                      session=True)
        if "exceptionDetails" in r:
            fail("chromium: %s: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except SystemExit:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def check_charts(b, label, min_charts):
    """Every canvas of the page drawn with data, and no script error."""
    wait_until(lambda: b.eval("document.documentElement.getAttribute('data-rendered')")
               is not None, 30, label + ": the drawing script")
    canvases = b.eval("[...document.querySelectorAll('canvas')].map("
                      "(c) => Number(c.getAttribute('data-points') || 0))")
    if len(canvases) < min_charts:
        fail("%s: %d charts, expected at least %d" % (label, len(canvases), min_charts))
    if any(n == 0 for n in canvases):
        fail("%s: a chart has no data: %s" % (label, canvases))
    drawn = int(b.eval("document.documentElement.getAttribute('data-rendered')"))
    if drawn != len(canvases):
        fail("%s: %d of %d charts drawn" % (label, drawn, len(canvases)))
    if b.eval("document.documentElement.getAttribute('data-errors')"):
        fail("%s: the page counted script errors" % label)
    if b.errors:
        fail("%s: console errors:\n%s" % (label, "\n".join(b.errors)))
    return len(canvases)


def live_job_page(b, dash, root, db, common):
    job = make_job(root, "slow", 120, sleep=0.25)
    client = subprocess.Popen([FANOUT, "run", job, *common], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        job_id = wait_until(lambda: sql_int(
            db, "SELECT j.id FROM jobs j WHERE j.name = 'slow' AND j.state = 'running' AND "
                "(SELECT count(*) FROM minibatches m WHERE m.job_id = j.id AND "
                "m.state = 'succeeded') >= 2"), 120, "the slow job to be running")
        b.open("%sjobs/%d" % (dash.url, job_id))
        b.eval("window.fanoutTestMarker = 'same document'")
        read = lambda: b.eval("document.documentElement.getAttribute('data-live-reads') && "
                              "Number(document.getElementById('live-completed').textContent)")
        first = wait_until(read, 60, "the first live read of the job page")
        second = wait_until(lambda: (lambda n: n if n and n > first else None)(read()), 90,
                            "the completed count to rise past %d without a reload" % first)
        if b.eval("window.fanoutTestMarker") != "same document":
            fail("the job page was reloaded between the two reads")
        if sql_int(db, "SELECT state = 'running' FROM jobs WHERE id = %d" % job_id) != 1:
            print("note: the job ended before the second read")
        # The figures were replaced in place too: the charts are redrawn with data.
        wait_until(lambda: b.eval("document.querySelectorAll('canvas').length") >= 3, 60,
                   "the live page's charts")
        if b.errors:
            fail("live job page: console errors:\n%s" % "\n".join(b.errors))
        # The job is named once, also after the live refresh replaced the figures' body.
        heads = b.eval("[...document.querySelectorAll('h1')].map((h) => h.textContent)")
        if heads != ["fanout job %d: slow" % job_id]:
            fail("live job page: h1 elements %s, expected one naming job %d" % (heads, job_id))
        titles = b.eval("document.querySelectorAll('title').length")
        if titles != 1 or b.eval("document.title") != "fanout job %d: slow" % job_id:
            fail("live job page: %d title elements, title %r" % (titles, b.eval("document.title")))
        shot = os.path.join(root, "live.png")
        b.screenshot(shot)
        colours = png_colours(shot)
        if colours < 8:
            fail("live job page: screenshot nearly blank (%d colours)" % colours)
        print("ok: job %d's page read %d then %d completed without reloading; screenshot %d "
              "colours" % (job_id, first, second, colours))
        fanout("cancel", str(job_id), "--db", db, "--quiet", check=False)
    finally:
        try:
            client.wait(timeout=120)
        except subprocess.TimeoutExpired:
            client.kill()
            client.wait()
    return job_id


def pages_render(b, dash, small, failing):
    b.open(dash.url)
    rows = b.eval("document.querySelectorAll('#jobs tr').length - 1")
    if rows != 2:
        fail("job list: %d rows, expected 2" % rows)
    check_charts(b, "job list", 0)
    state = sql(dash.db, "SELECT state FROM jobs WHERE id = %d" % failing)[0][0]
    b.open(dash.url + "?state=" + state)
    names = b.eval("[...document.querySelectorAll('#jobs tr td:nth-child(3)')].map("
                   "(td) => td.textContent)")
    if names != ["failing"]:
        fail("job list filtered by state=%s shows %s" % (state, names))
    b.open(dash.url + "?name=smal")
    names = b.eval("[...document.querySelectorAll('#jobs tr td:nth-child(3)')].map("
                   "(td) => td.textContent)")
    if names != ["small"]:
        fail("job list filtered by name shows %s" % names)
    b.open("%scompare?jobs=%d&jobs=%d" % (dash.url, small, failing))
    n = check_charts(b, "compare", 2)
    b.open("%sjobs/%d/tune" % (dash.url, small))
    if "mini_batch_size" not in b.eval("document.body.textContent"):
        fail("tune page: no mini_batch_size advice")
    t = check_charts(b, "tune", 5)
    b.open("%sjobs/%d" % (dash.url, failing))
    j = check_charts(b, "failing job page", 6)
    if "ValueError" not in b.eval("document.body.textContent"):
        fail("failing job page: the failures are not shown")
    print("ok: list, filters, compare (%d charts), tune (%d), job page (%d) render" % (n, t, j))


def token(root, db):
    r = fanout("dashboard", "--db", db, "--listen", "0.0.0.0:0", check=False, timeout=30)
    if r.returncode != 2 or "--token" not in r.stderr:
        fail("non-loopback --listen without a token: exit %d, %s" % (r.returncode, r.stderr))
    token_file = support.write(os.path.join(root, "dash.token"), "s3cret-token\n", mode=0o600)
    d = Dashboard(root, db, "--token-file", token_file, name="token")
    try:
        for headers, url, want in (
                ({}, d.url, 401), ({}, d.url + "api/jobs", 401),
                ({}, d.url + "?token=wrong", 401),
                ({"Authorization": "Bearer wrong-token!"}, d.url + "api/jobs", 401),
                ({"Authorization": "Bearer s3cret-token"}, d.url + "api/jobs", 200),
                ({}, d.url + "?token=s3cret-token", 200),
                ({"Cookie": "fanout_token=s3cret-token"}, d.url + "api/jobs", 200)):
            status, _ = http(url, headers)
            if status != want:
                fail("token: GET %s %s: %d, expected %d" % (url, headers, status, want))
    finally:
        d.stop()
    print("ok: non-loopback without a token refused; wrong or missing token 401")


def main():
    chromium = find_chromium()
    if not chromium:
        print("SKIP: chromium is not installed (tools/deps-debian-test.txt)")
        return SKIP
    support.require_fanout()
    with scratch("dashboard") as root:
        db = os.path.join(root, "fanout.db")
        common = ["--db", db, "--quiet", "--run-dir", os.path.join(root, "runs"), "--python",
                  PYTHON]
        fanout("run", make_job(root, "small", 30, mini_batch_size=2), *common)
        small = sql_int(db, "SELECT max(id) FROM jobs")
        fanout("run", make_job(root, "failing", 8, bad=3), *common, check=False)
        failing = sql_int(db, "SELECT max(id) FROM jobs")
        token(root, db)
        before = hashlib.sha256(open(db, "rb").read()).hexdigest()
        dash = Dashboard(root, db)
        b = Browser(chromium, root)
        try:
            pages_render(b, dash, small, failing)
            if hashlib.sha256(open(db, "rb").read()).hexdigest() != before:
                fail("the dashboard changed the store file")
            live_job_page(b, dash, root, db, common)
        finally:
            b.close()
            dash.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
