#!/usr/bin/env python3
"""fanout.Executor (python/fanout/executor.py) end to end, run under `fanout python` so the
package comes from the tree: map order, submit futures, an exception with its remote
traceback, a timeout, a call that segfaults its worker (its future fails, the others finish),
cancel_futures, and every result exactly once on the embedded default and on a keyed TCP
interchange. Real fanout, interchange, pools and workers. Environment: tests/meson.build."""

import concurrent.futures as cf
import faulthandler
import os
import signal
import time

from support import fail, scratch
import support

import fanout


def square(x):
    return x * x


def add(a, b, c=0):
    return a + b + c


def boom(x):
    raise ValueError("boom %d" % x)


def segfault_on_3(x):
    if x == 3:
        os.kill(os.getpid(), signal.SIGSEGV)
    return x


def sleep_for(s, payload=b""):
    time.sleep(s)
    return s


def touch_then(path, value):
    open(path, "w").close()
    return value


def stdlib_shapes(tmp):
    """As concurrent.futures does it: as_completed in completion order, wait(FIRST_EXCEPTION),
    Future.cancel() of a queued call (True, and the call never runs), one Executor used from
    several threads at once."""
    import threading
    db = os.path.join(tmp, "shapes", "fanout.db")
    with fanout.Executor(max_workers=2, db=db, name="shapes") as ex:
        slow, quick = ex.submit(sleep_for, 3), ex.submit(square, 5)
        order = list(cf.as_completed([slow, quick], timeout=180))
        if order != [quick, slow] or quick.result() != 25:
            fail("as_completed gave %s, expected the quick call first" % order)
        slow, bad = ex.submit(sleep_for, 5), ex.submit(boom, 1)
        done, pending = cf.wait([slow, bad], timeout=180, return_when=cf.FIRST_EXCEPTION)
        if done != {bad} or pending != {slow}:
            fail("wait(FIRST_EXCEPTION): done %s, pending %s" % (done, pending))
        # Threads: each submits and maps; every result where it belongs.
        errors = []

        def use(k):
            try:
                futs = [ex.submit(add, k, i) for i in range(40)]
                got = list(ex.map(add, [k] * 40, range(40), chunksize=3))
                want = [k + i for i in range(40)]
                if [f.result(timeout=180) for f in futs] != got or got != want:
                    errors.append("thread %d: %s" % (k, got[:5]))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append("thread %d: %r" % (k, e))
        threads = [threading.Thread(target=use, args=(k * 1000,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        if errors:
            fail("an Executor used from 4 threads: %s" % errors)
    # Future.cancel(): with one mini-batch in flight, the calls behind wait in the Executor.
    marks = os.path.join(tmp, "cancel-marks")
    os.makedirs(marks)
    with fanout.Executor(max_workers=1, db=db, name="cancel", max_in_flight=1) as ex:
        first = ex.submit(sleep_for, 2)
        rest = [ex.submit(touch_then, os.path.join(marks, str(i)), i) for i in range(6)]
        support.wait_until(first.running, 60, "the first call to be sent")
        last = rest[-1]
        if not last.cancel() or not last.cancelled():
            fail("Future.cancel() of a queued call returned False (state %r)" % last)
        if first.cancel():
            fail("Future.cancel() of a running call returned True")
        got = [f.result(timeout=180) for f in rest[:-1]]
    if got != list(range(5)) or sorted(os.listdir(marks)) != [str(i) for i in range(5)]:
        fail("after cancelling the last queued call: results %s, calls run %s" %
             (got, sorted(os.listdir(marks))))


def raise_at_end(x):
    if x >= 997:
        raise KeyError("call %d" % x)
    return x


def counted(tmp):
    """The record counts calls: a 1,000-call map in chunks is 1,000 items in the store,
    `history --json` and `status`, the 3 calls that raised counted as failed items."""
    import json
    db = os.path.join(tmp, "counted", "fanout.db")
    with fanout.Executor(max_workers=2, db=db, name="counted") as ex:
        got = []
        try:
            for r in ex.map(raise_at_end, range(1000), chunksize=64):
                got.append(r)
            fail("map(raise_at_end) raised nothing")
        except KeyError:
            pass
    if got != list(range(997)):
        fail("map(raise_at_end) gave %d results before raising" % len(got))
    hist = json.loads(support.fanout("history", "--db", db, "--json").stdout)
    job = [j for j in hist if j["id"] == ex.job_id][0]
    if (job["items_succeeded"], job["items_failed"], job["total"]) != (997, 3, 16):
        fail("history --json of a 1,000-call map in 16 chunks with 3 raised calls: %s" % job)
    st = support.fanout("status", str(ex.job_id), "--db", db).stdout
    if "items: 997 succeeded, 3 failed" not in st:
        fail("status of the 1,000-call map:\n%s" % st)


def store_count(db, job, where):
    return support.sql_int(db, "SELECT count(*) FROM minibatches WHERE job_id = %d AND %s" %
                           (job, where))


def check_once(ex, db, chunks, what):
    """Every mini-batch's row read once, and the store holds `chunks` succeeded mini-batches."""
    if ex.rows_read != chunks or ex.rows_unexpected:
        fail("%s: %d result rows read, %d unexpected, for %d mini-batches" %
             (what, ex.rows_read, ex.rows_unexpected, chunks))
    ok = store_count(db, ex.job_id, "state = 'succeeded'")
    if ok != chunks:
        fail("%s: the store holds %d succeeded mini-batches of job %s, expected %d" %
             (what, ok, ex.job_id, chunks))


def embedded(tmp):
    db = os.path.join(tmp, "store", "fanout.db")
    with fanout.Executor(max_workers=2, db=db, name="pyexec") as ex:
        # map: in order, with several iterables, chunked or not.
        got = list(ex.map(square, range(300)))
        if got != [x * x for x in range(300)]:
            fail("map(square) gave %s..." % got[:10])
        got = list(ex.map(add, range(50), range(50), chunksize=1))
        if got != [2 * x for x in range(50)]:
            fail("map(add, chunksize=1) gave %s..." % got[:10])
        # submit: futures, keyword arguments.
        futs = [ex.submit(add, i, 1, c=10) for i in range(40)]
        got = sorted(f.result(timeout=120) for f in cf.as_completed(futs, timeout=180))
        if got != sorted(i + 11 for i in range(40)):
            fail("submit futures gave %s" % got)
        # An exception: its type, message and the worker's traceback as its cause.
        e = ex.submit(boom, 7).exception(timeout=120)
        if not isinstance(e, ValueError) or str(e) != "boom 7":
            fail("boom(7) raised %r, expected ValueError('boom 7')" % (e,))
        tb = str(e.__cause__)
        if "Traceback" not in tb or "in boom" not in tb or "raise ValueError" not in tb:
            fail("the remote traceback is missing: %r" % tb)
        # A segfault fails its own call only.
        futs = [ex.submit(segfault_on_3, i) for i in range(8)]
        cf.wait(futs, timeout=180)
        for i, f in enumerate(futs):
            if i == 3:
                err = f.exception()
                if not isinstance(err, fanout.CallFailed):
                    fail("the segfaulting call raised %r, expected fanout.CallFailed" % (err,))
            elif f.exception() is not None or f.result() != i:
                fail("call %d beside the segfault: %r" % (i, f.exception()))
        # A lambda has no importable name: it travels by value when cloudpickle is there.
        lambdas = 0
        try:
            import cloudpickle  # noqa: F401
            if ex.submit(lambda x: x + 1, 1).result(timeout=120) != 2:
                fail("a lambda sent with cloudpickle gave a wrong result")
            lambdas = 1
        except ImportError:
            pass
        # map raises a call's exception at its place.
        it = ex.map(boom, [1])
        try:
            next(it)
            fail("map(boom) raised nothing")
        except ValueError:
            pass
    # 300 / 16 per chunk (2 workers) -> 19 chunks + 50 + 40 + 1 + 8 (one failed) + 1
    chunks = -(-300 // max(1, min(1024, 300 // 16))) + 50 + 40 + 1 + 7 + 1 + lambdas
    check_once(ex, db, chunks, "embedded")
    if ex.state != "partial":
        fail("the executor's job ended %r, expected partial (one call crashed)" % ex.state)
    jobs = support.sql(db, "SELECT name FROM jobs")
    if jobs != [("pyexec",)]:
        fail("one executor is one job; the store holds %s" % jobs)

    # A timeout: the call that runs past it fails with CallTimeout, the others finish.
    with fanout.Executor(max_workers=2, db=db, timeout=2) as ex:
        slow = ex.submit(sleep_for, 60)
        quick = ex.submit(sleep_for, 0)
        err = slow.exception(timeout=180)
        if not isinstance(err, fanout.CallTimeout) or not isinstance(err, TimeoutError):
            fail("a call past the timeout raised %r, expected fanout.CallTimeout" % (err,))
        if quick.result(timeout=120) != 0:
            fail("the quick call beside the timeout failed")

    # The job cancelled from outside: the running call fails, and so does any call after it.
    ex = fanout.Executor(max_workers=1, db=db)
    running = ex.submit(sleep_for, 60)
    support.wait_until(lambda: support.sql_int(
        db, "SELECT count(*) FROM attempts WHERE job_id = %d" % ex.job_id) or
        store_count(db, ex.job_id, "state = 'running'"), 120, "the call to start")
    support.fanout("cancel", str(ex.job_id), "--db", db, "--quiet", check=False)
    err = running.exception(timeout=120)
    if not isinstance(err, fanout.CallFailed) or "cancelled" not in str(err):
        fail("a call of a cancelled job raised %r" % (err,))
    late = ex.submit(square, 2).exception(timeout=10)
    if not isinstance(late, fanout.CallFailed):
        fail("a call after the job was cancelled raised %r" % (late,))
    ex.shutdown()
    if ex.state != "cancelled":
        fail("the cancelled executor's job ended %r" % ex.state)

    # cancel_futures: calls not yet sent are cancelled; the sent ones finish; none is left
    # pending. One worker, a window of 1 and large arguments keep most of them unsent.
    ex = fanout.Executor(max_workers=1, db=db, window=1)
    first = ex.submit(sleep_for, 3)
    big = b"x" * (128 << 10)
    rest = [ex.submit(sleep_for, 0, big) for _ in range(40)]
    ex.shutdown(wait=True, cancel_futures=True)
    cancelled = [f for f in rest if f.cancelled()]
    ran = [f for f in rest if not f.cancelled()]
    if first.result() != 3 or not cancelled:
        fail("cancel_futures cancelled %d of 40 queued calls (expected some)" % len(cancelled))
    for f in ran:
        if not f.done() or f.result() != 0:
            fail("a call sent before shutdown did not finish: %r" % f)
    check_once(ex, db, 1 + len(ran), "cancel_futures")


def keyed_tcp(tmp):
    keys = os.path.join(tmp, "keys")
    support.fanout("keygen", "--dir", keys)
    db = os.path.join(tmp, "ix", "ix.db")
    # The interchange writes the Executor's result rows into its folder: under --write-root.
    with support.Cluster(os.path.join(tmp, "ix"), db,
                         ix_args=["--keys", keys, "--write-root", tmp]) as cl:
        if not cl.client_ep.startswith("tcp://"):
            fail("a keyed interchange's client endpoint is %s" % cl.client_ep)
        cl.start_pool(workers=2, extra=["--keys", keys])
        # A job the interchange refuses is an error carrying its reason.
        try:
            fanout.Executor(interchange=cl.client_ep, keys=keys, work_dir="/var/tmp")
            fail("an Executor whose rows go outside --write-root started")
        except fanout.FanoutError as e:
            if "write-root" not in e.message or e.exit_status == 0:
                fail("the refused Executor's error: %r (exit %s)" % (e.message, e.exit_status))
        with fanout.Executor(interchange=cl.client_ep, keys=keys, name="pyexec-tcp",
                             work_dir=tmp) as ex:
            got = list(ex.map(square, range(200), chunksize=3))
            futs = [ex.submit(square, i) for i in range(30)]
            sub = [f.result(timeout=120) for f in futs]
        if got != [x * x for x in range(200)] or sub != [x * x for x in range(30)]:
            fail("over keyed TCP: map gave %s..., submit %s..." % (got[:5], sub[:5]))
        if ex.db != db:
            fail("the executor names the store %s, the interchange's is %s" % (ex.db, db))
        check_once(ex, db, -(-200 // 3) + 30, "keyed tcp")


def main():
    support.require_fanout()
    faulthandler.dump_traceback_later(540, exit=True)  # where it hung, before meson's timeout
    with scratch("pyexec") as tmp:
        os.chdir(tmp)
        counted(tmp)
        print("counted: ok", flush=True)
        stdlib_shapes(tmp)
        print("stdlib shapes: ok", flush=True)
        embedded(tmp)
        print("embedded: ok", flush=True)
        keyed_tcp(tmp)
    print("ok")


if __name__ == "__main__":
    main()
