"""azureml.core shaped for fanout (docs/azure-sdk.md): a local folder-based Workspace, datasets of
local files, Experiment.submit running pipelines through fanout.Client."""

from azureml._fanout_v1 import (Dataset, Datastore, Environment, Experiment, Model, Run,
                                UserErrorException, Workspace)
from azureml._fanout_v1 import PipelineRun  # noqa: F401

# The SDK's version attribute; fanout's shapes follow the last v1 releases.
VERSION = "1.0-fanout"

__all__ = ["Dataset", "Datastore", "Environment", "Experiment", "Model", "Run",
           "UserErrorException", "Workspace"]
