"""azureml.pipeline.core (docs/azure-sdk.md)."""

from azureml._fanout_v1 import Pipeline, PipelineData, PipelineRun, PortDataReference, StepRun

__all__ = ["Pipeline", "PipelineData", "PipelineRun", "PortDataReference", "StepRun"]
