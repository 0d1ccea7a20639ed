"""The container runtime's configuration (nvidia-ctk for containerd)."""
