"""azureml.core.compute_target (docs/azure-sdk.md)."""

from azureml._fanout_v1 import ComputeTargetException

__all__ = ["ComputeTargetException"]
