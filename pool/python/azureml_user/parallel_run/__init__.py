"""`from azureml_user.parallel_run import EntryScript` as in ParallelRunStep; fanout's class is fanout_runtime.EntryScript."""

from fanout_runtime import EntryScript

__all__ = ["EntryScript"]
