"""azureml.core.runconfig: accepted, unused (docs/azure-sdk.md)."""

from _fanout_azure import Bag
from azureml._fanout_v1 import CondaDependencies  # noqa: F401

DEFAULT_CPU_IMAGE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04"
DEFAULT_GPU_IMAGE = "mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.1-cudnn8-ubuntu20.04"


class RunConfiguration(Bag):
    pass


class DockerConfiguration(Bag):
    pass
