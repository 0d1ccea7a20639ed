"""gpufleet operator CLI: one module per subcommand group (``cmd_*.py``)."""
