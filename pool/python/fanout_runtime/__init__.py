"""fanout's helpers for entry scripts.

    from fanout_runtime import EntryScript          # fanout's name
    from azureml_user.parallel_run import EntryScript  # ParallelRunStep's name, same class

EntryScript() is cheap and may be created any number of times (in init(), in
every run() call ...): all instances share one per-process state, and the
logger and its file are created once, on first use.

The values come from the environment fanout-pool gives each worker:
FANOUT_LOG_DIR, FANOUT_OUTPUT_DIR, FANOUT_NODE, FANOUT_PROCESS and
FANOUT_LOGGING_LEVEL. Outside fanout (a unit test of the script, say) each
falls back to something usable: the temporary folder, the host name, the pid.
"""

import logging
import os
import socket
import sys
import tempfile
import threading

__all__ = ["EntryScript"]

LOG_FORMAT = "%(asctime)s|%(name)s|%(levelname)s|%(process)d|%(thread)d|%(funcName)s():%(lineno)d|%(message)s"

_lock = threading.Lock()
_state = {}


def _env(name):
    value = os.environ.get(name)
    return value if value else None


def _makedirs(path):
    try:
        os.makedirs(path, exist_ok=True)
        return True
    except OSError:
        return False


def _level():
    raw = (_env("FANOUT_LOGGING_LEVEL") or "INFO").strip().upper()
    if raw.lstrip("-").isdigit():
        return int(raw)
    if raw == "WARN":
        raw = "WARNING"
    level = logging.getLevelName(raw)
    return level if isinstance(level, int) else logging.INFO


def _node_id():
    return _env("FANOUT_NODE") or socket.gethostname() or "localhost"


def _agent_name():
    return _env("FANOUT_PROCESS") or "pid%d" % os.getpid()


def _log_dir():
    return _env("FANOUT_LOG_DIR") or os.path.join(tempfile.gettempdir(), "fanout_logs")


def _output_dir():
    path = _env("FANOUT_OUTPUT_DIR") or _env("AZUREML_BI_OUTPUT_PATH")
    if not path:
        path = os.path.join(tempfile.gettempdir(), "fanout_output")
    return path


def log_file_path():
    """<log_dir>/user/entry_script_log/<node>/<process>.log.txt"""
    return os.path.join(_log_dir(), "user", "entry_script_log", _node_id(), _agent_name() + ".log.txt")


def _make_logger():
    logger = logging.getLogger(_agent_name())
    logger.setLevel(_level())
    logger.propagate = False  # the file is the destination; keep stdout/stderr the user's
    path = log_file_path()
    handler = None
    if _makedirs(os.path.dirname(path)):
        try:
            handler = logging.FileHandler(path, mode="a", encoding="utf-8", delay=True)
        except OSError:
            handler = None
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logger.addHandler(handler)
    return logger


def _shared_logger():
    logger = _state.get("logger")
    if logger is None:
        with _lock:
            logger = _state.get("logger")
            if logger is None:
                logger = _state["logger"] = _make_logger()
    return logger


class EntryScript(object):
    """ParallelRunStep's EntryScript: the entry script's logger and folders."""

    @property
    def logger(self):
        """A logging.Logger named after this worker process, writing to
        <log_dir>/user/entry_script_log/<node_id>/<agent_name>.log.txt."""
        return _shared_logger()

    def get_logger(self):
        return _shared_logger()

    @property
    def output_dir(self):
        """The job's output folder (created on first use)."""
        path = _state.get("output_dir")
        if path is None:
            path = _output_dir()
            if not _makedirs(path):
                path = os.path.join(tempfile.gettempdir(), "fanout_output")
                _makedirs(path)
            _state["output_dir"] = path
        return path

    @property
    def working_dir(self):
        """The current working folder (the job's code folder)."""
        return os.getcwd()

    @property
    def log_dir(self):
        """The job's logs/ folder."""
        return _log_dir()

    @property
    def agent_name(self):
        """This worker's process name, e.g. process001."""
        return _agent_name()

    @property
    def node_id(self):
        """The node's name."""
        return _node_id()

    @property
    def process_name(self):
        return _agent_name()

    def __repr__(self):
        return "EntryScript(node_id=%r, agent_name=%r, output_dir=%r)" % (
            self.node_id, self.agent_name, _state.get("output_dir") or _output_dir())
