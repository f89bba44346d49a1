"""azure.ai.ml.exceptions (docs/azure-sdk.md)."""

from azure.ai.ml._fanout_v2_client import JobException, ValidationException

__all__ = ["JobException", "ValidationException"]
