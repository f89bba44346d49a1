"""azureml.core.environment (docs/azure-sdk.md)."""

from azureml._fanout_v1 import Environment

__all__ = ["Environment"]
