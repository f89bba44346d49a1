"""fanout's stand-in for the `azureml_user` package that ParallelRunStep puts on an entry script's path."""
