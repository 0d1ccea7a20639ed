"""What the tests of the Kubernetes test doubles share: where the doubles live, loading one of them
as a module, and the gpu_stack scenario's image and taints."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
K8S_DOUBLES = ROOT / "molecule/resources/doubles/stack/k8s"
PROFILES = ROOT / "molecule/resources/profiles"
BRIEF = ROOT / "molecule/gpu_stack/vars/brief.yml"
IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
RESERVED = {"key": "gpufleet.io/reserved", "value": "training", "effect": "NoSchedule"}


def load_double(name: str, module_name: str | None = None):
    """The double ``name`` (a script without .py in K8S_DOUBLES) as a module; its own helper modules
    beside it are importable."""
    if str(K8S_DOUBLES) not in sys.path:
        sys.path.insert(0, str(K8S_DOUBLES))
    module_name = module_name or f"gpufleet_{name.replace('-', '_')}_double"
    loader = importlib.machinery.SourceFileLoader(module_name, str(K8S_DOUBLES / name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
