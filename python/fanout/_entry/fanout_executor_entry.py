"""The entry script of a fanout.Executor's job (python/fanout/executor.py): the first item of a
mini-batch is "ID:BASE64" of a pickled (fn, [(args, kwargs), ...]), followed by an empty item
for each further call (one item per call); its row is "ID MAC BASE64"
of the pickled list of outcomes, one per call: (True, value) or (False, (exception pickled or
None, traceback text, "Type: message")). MAC is the hex HMAC-SHA256 of "ID BASE64" under the
Executor's key ($FANOUT_EXECUTOR_KEY, taken out of the environment before any of the caller's code
runs here): the Executor unpickles only rows that carry it. A call's exception is its outcome;
only a crash or a timeout fails the mini-batch. Standard library only (plus cloudpickle when the
caller used it)."""

import base64
import hashlib
import hmac
import os
import pickle
import sys
import traceback

# Neither the calls nor the programs they start inherit the key.
_KEY = bytes.fromhex(os.environ.pop("FANOUT_EXECUTOR_KEY", ""))
_main_loaded = False


def _row_mac(ident, payload):
    """As fanout.executor._row_mac."""
    return hmac.new(_KEY, ident + b" " + payload, hashlib.sha256).hexdigest().encode("ascii")


def _load_callers_main():
    """Makes the caller's functions importable as multiprocessing's spawn does: the caller's
    sys.path, in its order after this worker's own (so after the standard library: a module
    planted in the caller's folder never replaces one of it), and its main script run as
    __mp_main__ (its `if __name__ == "__main__":` block does not run) and seen as __main__, so
    functions pickled as __main__.f are found."""
    global _main_loaded
    if _main_loaded:
        return
    _main_loaded = True
    for p in os.environ.get("FANOUT_EXECUTOR_PATH", "").split(os.pathsep):
        if p and p not in sys.path:
            sys.path.append(p)
    main_path = os.environ.get("FANOUT_EXECUTOR_MAIN", "")
    if main_path:
        import runpy
        import types
        mod = types.ModuleType("__mp_main__")
        mod.__file__ = main_path
        sys.modules["__mp_main__"] = mod
        sys.modules["__main__"] = mod
        mod.__dict__.update(runpy.run_path(main_path, run_name="__mp_main__"))


def _failure(e):
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    try:
        exc = pickle.dumps(e, pickle.HIGHEST_PROTOCOL)
        pickle.loads(exc)  # one that does not load on the caller's side is sent as text only
    except Exception:
        exc = None
    return (False, (exc, tb, "%s: %s" % (type(e).__name__, e)))


def _dumps(obj):
    try:
        return pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
    except Exception:
        import cloudpickle  # a value only cloudpickle pickles (a lambda returned)
        return cloudpickle.dumps(obj, pickle.HIGHEST_PROTOCOL)


def _call_all(payload):
    try:
        _load_callers_main()
        fn, calls = pickle.loads(base64.b64decode(payload))
    except Exception as e:
        return [_failure(e)]
    out = []
    for args, kwargs in calls:
        try:
            out.append((True, fn(*args, **kwargs)))
        except BaseException as e:  # SystemExit, KeyboardInterrupt too: the call's outcome
            out.append(_failure(e))
    return out


class _Rows(list):
    """The rows of a mini-batch, and how many of its items (one per call; executor-serve adds
    an empty item per call after the first) succeeded: the calls that did not raise. The worker
    counts the others as failed items (pool/python/fanout_worker.py, _classify)."""

    fanout_items_succeeded = 0


def run(mini_batch):
    rows = _Rows()
    for item in mini_batch:
        if not item:
            continue  # a call's place: its call travels in the mini-batch's first item
        ident, _, payload = item.partition(":")
        outcomes = _call_all(payload)
        try:
            data = _dumps(outcomes)
            rows.fanout_items_succeeded += sum(1 for ok, _ in outcomes if ok)
        except Exception as e:  # a result that does not pickle fails its calls, as text
            data = _dumps([(False, (None, "", "result not picklable: %s: %s" % (
                type(e).__name__, e)))] * len(outcomes))
        ident_b = ident.encode("ascii", "replace")
        payload = base64.b64encode(data)
        rows.append(b" ".join((ident_b, _row_mac(ident_b, payload), payload)).decode("ascii"))
    return rows
