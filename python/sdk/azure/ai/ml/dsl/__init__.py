"""azure.ai.ml.dsl: the pipeline decorator (docs/azure-sdk.md)."""

from azure.ai.ml._fanout_v2 import pipeline

__all__ = ["pipeline"]
