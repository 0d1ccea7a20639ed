"""The topology brief: its schema, the accelerator catalogue, NVIDIA's compatibility tables and package matrix."""
