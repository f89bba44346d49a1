"""fanout.Executor's decoding of a call's outcome (python/fanout/executor.py): the exception a
worker pickled, with its traceback as the cause; a crash's text as CallFailed."""

import pickle

from fanout.executor import CallFailed, _exception


def test_a_pickled_exception_comes_back_with_its_traceback():
    exc = _exception((pickle.dumps(ValueError("bad x")), "Traceback ...\nValueError: bad x\n",
                      "ValueError: bad x"))
    assert isinstance(exc, ValueError) and str(exc) == "bad x"
    assert "Traceback ..." in str(exc.__cause__)


def test_an_exception_that_cannot_be_unpickled_is_call_failed():
    exc = _exception((b"not a pickle", "", "Weird: it broke"))
    assert isinstance(exc, CallFailed) and str(exc) == "Weird: it broke"
    assert exc.__cause__ is None
