"""azure.ai.ml.entities (docs/azure-sdk.md): Environment and ResourceConfiguration are kept in
the job (fanout notes the environment as unused); compute and data assets are cloud-only."""

from _fanout_azure import Bag
from azure.ai.ml._fanout_v2 import (Environment, Parallel, PipelineJob, ResourceConfiguration,
                                    RetrySettings)


class AmlCompute(Bag):
    def __init__(self, *, name=None, size=None, min_instances=None, max_instances=None,
                 **kwargs):
        super().__init__(name=name, size=size, min_instances=min_instances,
                         max_instances=max_instances, type="amlcompute", **kwargs)


class Data(Bag):
    pass


class Model(Bag):
    pass


__all__ = ["AmlCompute", "Data", "Environment", "Model", "Parallel", "PipelineJob",
           "ResourceConfiguration", "RetrySettings"]
