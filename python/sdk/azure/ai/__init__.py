"""fanout's azure.ai (docs/azure-sdk.md)."""
