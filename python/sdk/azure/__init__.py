"""fanout's Azure-shaped modules (docs/azure-sdk.md); only `fanout python` puts them on sys.path."""
