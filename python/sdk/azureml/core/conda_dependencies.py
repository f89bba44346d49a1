"""azureml.core.conda_dependencies: accepted, noted as ignored (docs/azure-sdk.md)."""

from azureml._fanout_v1 import CondaDependencies

__all__ = ["CondaDependencies"]
