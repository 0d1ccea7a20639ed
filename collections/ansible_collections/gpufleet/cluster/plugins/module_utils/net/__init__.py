"""The node's networks: fabric rails and their addressing, and the host firewall."""
