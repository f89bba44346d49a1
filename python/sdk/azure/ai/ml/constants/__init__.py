"""azure.ai.ml.constants (docs/azure-sdk.md)."""

from azure.ai.ml._fanout_v2 import AssetTypes, InputOutputModes
from azure.ai.ml._fanout_v2_client import ListViewType

__all__ = ["AssetTypes", "InputOutputModes", "ListViewType"]
