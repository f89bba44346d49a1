"""fanout's azureml.pipeline (docs/azure-sdk.md)."""
