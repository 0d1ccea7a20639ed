"""The Kubernetes side of the brief: every object the Kubernetes roles apply."""
