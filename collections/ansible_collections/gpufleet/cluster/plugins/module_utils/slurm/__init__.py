"""Slurm's configuration, built from the brief and the inventory."""
