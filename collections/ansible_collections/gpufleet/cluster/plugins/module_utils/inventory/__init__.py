"""Inventories read the way Ansible reads them, and generated from a rack sheet."""
