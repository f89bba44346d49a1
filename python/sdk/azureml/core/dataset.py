"""azureml.core.dataset (docs/azure-sdk.md)."""

from azureml._fanout_v1 import Dataset

__all__ = ["Dataset"]
