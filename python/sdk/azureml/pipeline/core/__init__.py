"""azureml.pipeline.core (docs/azure-sdk.md)."""

from azureml._fanout_v1 import (Pipeline, PipelineData, PipelineParameter, PipelineRun,
                                PortDataReference, StepRun)

__all__ = ["Pipeline", "PipelineData", "PipelineParameter", "PipelineRun", "PortDataReference",
           "StepRun"]
