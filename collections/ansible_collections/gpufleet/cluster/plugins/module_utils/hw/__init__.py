"""Hardware facts gathered on each node (stdlib only: runs on targets) and the hardware gate that judges them."""
