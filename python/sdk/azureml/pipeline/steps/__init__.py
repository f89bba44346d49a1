"""azureml.pipeline.steps (docs/azure-sdk.md)."""

from azureml._fanout_v1 import ParallelRunConfig, ParallelRunStep

__all__ = ["ParallelRunConfig", "ParallelRunStep"]
