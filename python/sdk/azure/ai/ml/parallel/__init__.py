"""azure.ai.ml.parallel: parallel_run_function and RunFunction (docs/azure-sdk.md)."""

from azure.ai.ml._fanout_v2 import Parallel, RetrySettings, RunFunction, parallel_run_function

__all__ = ["Parallel", "RetrySettings", "RunFunction", "parallel_run_function"]
