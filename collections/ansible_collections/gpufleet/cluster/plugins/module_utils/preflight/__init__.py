"""The preflight gate: the brief against an inventory, before any host is touched."""
