"""azureml.core.run (docs/azure-sdk.md)."""

from azureml._fanout_v1 import Run

__all__ = ["Run"]
