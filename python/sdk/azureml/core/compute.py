"""azureml.core.compute: compute targets are reported, not created (docs/azure-sdk.md)."""

from azureml._fanout_v1 import AmlCompute, ComputeTarget

__all__ = ["AmlCompute", "ComputeTarget"]
