"""azureml.exceptions (docs/azure-sdk.md)."""

from azureml._fanout_v1 import (ActivityFailedException, ComputeTargetException,
                                UserErrorException)

__all__ = ["ActivityFailedException", "ComputeTargetException", "UserErrorException"]
