"""azure.ai.ml.exceptions (docs/azure-sdk.md)."""

from azure.ai.ml._fanout_v2 import JobException

__all__ = ["JobException"]
