"""azureml.core.datastore: datastores are local folders (docs/azure-sdk.md)."""

from azureml._fanout_v1 import Datastore

__all__ = ["Datastore"]
