"""azureml.data (docs/azure-sdk.md)."""

from azureml._fanout_v1 import FileDataset, OutputFileDatasetConfig, TabularDataset

__all__ = ["FileDataset", "OutputFileDatasetConfig", "TabularDataset"]
