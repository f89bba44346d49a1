"""azureml.data.dataset_consumption_config (docs/azure-sdk.md)."""

from azureml._fanout_v1 import DatasetConsumptionConfig

__all__ = ["DatasetConsumptionConfig"]
