"""fanout's azureml (SDK v1 shapes, docs/azure-sdk.md); only `fanout python` puts it on sys.path."""
