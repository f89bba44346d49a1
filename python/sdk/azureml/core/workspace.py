"""azureml.core.workspace: the workspace is a local folder (docs/azure-sdk.md)."""

from azureml._fanout_v1 import Workspace

__all__ = ["Workspace"]
