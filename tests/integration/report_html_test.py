#!/usr/bin/env python3
"""report.html and `fanout compare --html` in headless Chromium.

Runs real jobs with the real binaries, then opens each page in Debian's `chromium`: the page
must log no error, every chart must have drawn data (`data-points` on each canvas, read back
with --dump-dom), and a screenshot must not be blank (distinct colours of the PNG, decoded with
zlib). Covered: a small job, a job with failures and resource samples, a running job (a
snapshot), a cancelled job, a job with 0 attempts, and compare. The charts read at a glance:
throughput bins no narrower than a task, an items-done line, whole-number ticks on counts,
distinct histogram labels, no negative overhead, and compare naming the faster run with each
run's progress and rate on one time axis (read back from attributes the drawing script sets).

Exit 77 (meson: skipped) when chromium is missing, naming why. Environment: FANOUT_BIN,
FANOUT_SOURCE_ROOT (set by tests/meson.build).
"""
import os
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import time
import zlib

from support import FANOUT, SKIP, fail, fanout, scratch, sql, sql_int, wait_until
import support

ENTRY = '''
import os
import time

SLEEP = {sleep}

def init():
    pass

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


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def make_job(root, name, files, bad=0, args="", mini_batch_size=2, retries=1, sleep=0.0):
    """A python job over `files` inputs, `bad` of which raise in run()."""
    folder = os.path.join(root, name)
    support.make_files(os.path.join(folder, "data"), ["doc%03d.txt" % i for i in range(files)],
                       lambda n: "some words %d\n" % int(n[3:6]))
    support.make_files(os.path.join(folder, "data"), ["bad%03d.txt" % i for i in range(bad)])
    support.write(os.path.join(folder, "src", "score.py"), ENTRY.replace("{sleep}", repr(sleep)))
    job = support.write(os.path.join(folder, "job.yaml"), support.job_yaml(
        name, output=None, mini_batch_size=mini_batch_size, concurrency=2, retries=retries,
        timeout=60, program_arguments=args))
    return job


def last_job(db):
    return sql(db, "SELECT max(id) FROM jobs")[0][0]


def png_colours(path):
    """Distinct RGB(A) pixel values of an 8-bit, non-interlaced PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(path + ": not a PNG")
    pos, idat, width, height, ctype = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                return 256  # another format: trust its size instead
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    colours, prev, i = set(), bytearray(stride), 0
    for _ in range(height):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 255
            elif ftype == 2:
                line[x] = (line[x] + b) & 255
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pred) & 255
        for x in range(0, stride, bpp * 7):  # a sample of the pixels is enough
            colours.add(bytes(line[x:x + bpp]))
        prev = line
    return len(colours)


def check_page(chromium, page, min_charts, label):
    """Opens `page` headless; checks errors, chart data and the screenshot."""
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-dev-shm-usage", "--allow-file-access-from-files",
            "--enable-logging=stderr", "--v=0", "--window-size=1300,2400",
            "--virtual-time-budget=5000"]
    url = "file://" + os.path.abspath(page)
    p = subprocess.run(base + ["--dump-dom", url], capture_output=True, text=True, timeout=180)
    dom = p.stdout
    if "<html" not in dom:
        fail("%s: chromium printed no DOM (exit %d)\n%s" % (label, p.returncode, p.stderr[-2000:]))
    console_errors = [l for l in p.stderr.splitlines()
                      if "CONSOLE" in l and ("Uncaught" in l or "Error" in l)]
    if console_errors:
        fail("%s: console errors:\n%s" % (label, "\n".join(console_errors)))
    if re.search(r'<html[^>]*data-errors="', dom):
        fail("%s: the page counted script errors" % label)
    m = re.search(r'<html[^>]*data-rendered="(\d+)"', dom)
    if not m:
        fail("%s: the drawing script did not finish (no data-rendered)" % label)
    canvases = re.findall(r"<canvas[^>]*>", dom)
    if len(canvases) < min_charts:
        fail("%s: %d charts, expected at least %d" % (label, len(canvases), min_charts))
    for c in canvases:
        pts = re.search(r'data-points="(\d+)"', c)
        if not pts or int(pts.group(1)) == 0:
            fail("%s: a chart has no data: %s" % (label, c))
    if int(m.group(1)) != len(canvases):
        fail("%s: %s of %d charts drawn" % (label, m.group(1), len(canvases)))
    shot = page + ".png"
    p = subprocess.run(base + ["--screenshot=" + shot, url], capture_output=True, text=True,
                       timeout=180)
    if not os.path.exists(shot) or os.path.getsize(shot) < 10000:
        fail("%s: screenshot missing or tiny (exit %d)\n%s" % (label, p.returncode,
                                                             p.stderr[-2000:]))
    colours = png_colours(shot)
    if colours < 8:
        fail("%s: screenshot nearly blank (%d colours)" % (label, colours))
    print("ok: %s: %d charts with data, %d colours in the screenshot" %
          (label, len(canvases), colours))
    return dom


def chart_attr(dom, chart, attr, label):
    """An attribute the drawing script set on the canvas `chart` (its series, an axis's ticks)."""
    tag = re.search(r'<canvas[^>]*id="%s"[^>]*>' % chart, dom)
    if not tag:
        fail("%s: no canvas %s" % (label, chart))
    m = re.search(r'%s="([^"]*)"' % attr, tag.group(0))
    if not m:
        fail("%s: canvas %s has no %s: %s" % (label, chart, attr, tag.group(0)))
    return m.group(1).split("|")


def check_integer_ticks(dom, chart, axis, label):
    ticks = chart_attr(dom, chart, "data-ticks-" + axis, label)
    if any("." in t for t in ticks):
        fail("%s: %s counts on axis %s with ticks %s" % (label, chart, axis, ticks))


def check_job_charts(page, dom, min_bin_s, label):
    """The throughput bins, the items-done line, whole-number ticks on counts, distinct
    histogram labels, and no negative overhead."""
    html = open(page).read()
    bin_s = float(re.search(r'"series":\{"bin_s":([0-9.e+-]+)', html).group(1))
    if bin_s < min_bin_s:
        fail("%s: throughput bins of %g s, narrower than a task (%g s)" % (label, bin_s, min_bin_s))
    if "items done" not in chart_attr(dom, "chart-throughput", "data-series", label):
        fail("%s: the throughput chart has no items-done line" % label)
    check_integer_ticks(dom, "chart-throughput", "y1", label)
    check_integer_ticks(dom, "chart-inflight", "y", label)
    for hist in ("chart-run-hist", "chart-overhead-hist"):
        check_integer_ticks(dom, hist, "y", label)
        ticks = chart_attr(dom, hist, "data-ticks-x", label)
        if len(set(ticks)) != len(ticks):
            fail("%s: %s repeats tick labels: %s" % (label, hist, ticks))
    lo = float(re.search(r'"overhead_hist":\{"lo":([0-9.e+-]+)', html).group(1))
    if lo < 0:
        fail("%s: the overhead histogram starts below 0 (%g s)" % (label, lo))
    print("ok: %s: bins of %g s, items done drawn, whole-number counts" % (label, bin_s))


def main():
    chromium = find_chromium()
    if not chromium:
        print("SKIP: chromium is not installed (tools/deps-debian-test.txt)")
        return SKIP
    if not FANOUT:
        print("SKIP: FANOUT_BIN is not set (run through meson test)")
        return SKIP
    with scratch("report-html") as root:
        db = os.path.join(root, "fanout.db")
        common = ["--db", db, "--quiet", "--run-dir", os.path.join(root, "runs")]

        # A small job: report.html is written at its end, next to the CSVs.
        fanout("run", make_job(root, "small", 12), *common)
        small = last_job(db)
        log_dir = sql(db, "SELECT log_dir FROM jobs WHERE id = %d" % small)[0][0]
        page = os.path.join(log_dir, "report.html")
        if not os.path.exists(page):
            fail("no report.html in " + log_dir)
        dom = check_page(chromium, page, 6, "small job")
        check_job_charts(page, dom, 0, "small job")

        # Failures and resource samples.
        job = make_job(root, "failing", 16, bad=3, args="--resource_monitor_interval 1",
                       mini_batch_size=1, sleep=0.3)
        fanout("run", job, *common, check=False)
        failing = last_job(db)
        page = os.path.join(root, "failing.html")
        fanout("report", str(failing), "--html", "--out", page, "--db", db)
        html = open(page).read()
        for needle in ('id="chart-failures"', 'id="chart-node-cpu"', 'id="chart-proc-rss"',
                       "ValueError", "exhausted their tries"):
            if needle not in html:
                fail("failing job: the page lacks " + needle)
        dom = check_page(chromium, page, 10, "job with failures and samples")
        # run() sleeps 0.3 s: no bin is narrower than that (200 bins of the job would be).
        check_job_charts(page, dom, 0.3, "job with failures and samples")
        check_integer_ticks(dom, "chart-failures", "x", "job with failures and samples")

        # A running job gives a snapshot; cancelled, it renders too.
        job = make_job(root, "slow", 200, mini_batch_size=1, sleep=0.5)
        cancel = None
        proc = subprocess.Popen([FANOUT, "run", job, *common],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            running = wait_until(lambda: sql_int(
                db, "SELECT j.id FROM jobs j WHERE j.name = 'slow' AND j.state = 'running' "
                "AND (SELECT count(*) FROM attempts a WHERE a.job_id = j.id) >= 2"), 120,
                "the slow job to show two attempts", step=0.2)
            page = os.path.join(root, "running.html")
            fanout("report", str(running), "--html", "--out", page, "--db", db)
            if "a snapshot at" not in open(page).read():
                fail("running job: the page does not say it is a snapshot")
            # Cancel before the (slow) browser checks, so the job is still running.
            cancel = fanout("cancel", str(running), "--db", db, "--quiet", check=False)
            proc.wait(timeout=120)
            check_page(chromium, page, 4, "running job")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        page = os.path.join(root, "cancelled.html")
        fanout("report", str(running), "--html", "--out", page, "--db", db)
        state = sql(db, "SELECT state FROM jobs WHERE id = %d" % running)[0][0]
        if state != "cancelled":
            fail("the slow job ended %s, not cancelled: fanout cancel said %s %s" %
                 (state, cancel.stdout, cancel.stderr))
        check_page(chromium, page, 4, "cancelled job")

        # A job with 0 attempts: the same store, a job row with nothing run.
        con = sqlite3.connect(db)
        con.execute("INSERT INTO jobs (name, state, reason, settings, created, started, ended, "
                    "log_dir) VALUES ('empty', 'cancelled', 'cancelled before any attempt', "
                    "'{\"prefetch\":0}', 1000, 1000, 1001, '')")
        con.commit()
        empty = con.execute("SELECT max(id) FROM jobs").fetchone()[0]
        con.close()
        page = os.path.join(root, "empty.html")
        fanout("report", str(empty), "--html", "--out", page, "--db", db)
        check_page(chromium, page, 0, "job with 0 attempts")

        # compare: text and page.
        page = os.path.join(root, "compare.html")
        p = fanout("compare", str(small), str(failing), "--html", page, "--db", db)
        if "mini_batch_size" not in p.stdout or "items/s" not in p.stdout:
            fail("compare: the table lacks the differing setting or the rate:\n" + p.stdout)
        dom = check_page(chromium, page, 2, "compare")
        faster = re.search(r'<p id="faster"><b>([^<]*)</b>', dom)
        # The small job (no sleep) did its items far faster than the one sleeping 0.3 s each.
        if not faster or not faster.group(1).startswith("job %d (small) was the faster" % small):
            fail("compare: the page does not name the faster run:\n" + dom[:3000])
        for chart in ("chart-compare-items", "chart-compare-minibatches"):
            series = chart_attr(dom, chart, "data-series", "compare")
            what = "items" if chart.endswith("items") else "minibatches"
            for j in (small, failing):
                for kind in (" done", "/s"):
                    if not any(x.startswith("job %d " % j) and x.endswith(what + kind)
                               for x in series):
                        fail("compare: %s lacks job %d's %s%s: %s" % (chart, j, what, kind,
                                                                       series))
            check_integer_ticks(dom, chart, "y", "compare")
        if "was the faster" not in p.stdout:
            fail("compare: the text does not name the faster run:\n" + p.stdout)
        print("all report pages render")
        return 0


if __name__ == "__main__":
    sys.exit(main())
