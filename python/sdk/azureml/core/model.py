"""azureml.core.model: models are used from their local path (docs/azure-sdk.md)."""

from azureml._fanout_v1 import Model

__all__ = ["Model"]
