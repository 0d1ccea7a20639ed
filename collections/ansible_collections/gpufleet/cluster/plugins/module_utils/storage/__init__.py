"""The storage plane: its decisions, its preflight checks and its acceptance."""
