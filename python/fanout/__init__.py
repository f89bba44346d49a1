"""fanout from Python (docs/python.md): Client and Job run, follow and query fanout jobs through
the `fanout` program; Executor is a concurrent.futures.Executor whose calls are the mini-batches
of one fanout job. Standard library only; Python >= 3.8."""

from fanout._cli import FanoutError
from fanout.client import Client, Job
from fanout.executor import CallFailed, CallTimeout, Executor

__all__ = ["CallFailed", "CallTimeout", "Client", "Executor", "FanoutError", "Job"]
