"""azure.ai.ml shaped for fanout (docs/azure-sdk.md): parallel jobs built with the SDK v2 run
locally through fanout.Client, and job.dump(path) writes the parallel job YAML `fanout run`
reads."""

from azure.ai.ml._fanout_v2 import Input, Output, command, load_component
from azure.ai.ml._fanout_v2_client import MLClient
from azure.ai.ml import constants, dsl, entities, parallel  # noqa: F401

__all__ = ["Input", "MLClient", "Output", "command", "load_component", "constants", "dsl",
           "entities", "parallel"]
