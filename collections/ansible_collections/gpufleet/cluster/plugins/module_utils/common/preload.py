# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Controller side only: import the collection's Jinja plugins before Ansible forks its workers.

Used by the collection's strategies (gpufleet.cluster.mitogen_linear, gpufleet.cluster.linear).
"""

from __future__ import annotations

import importlib
import pkgutil

# The collection's Jinja plugins, imported once in the controller before the workers fork.
PRELOAD_PACKAGES = (
    "ansible_collections.gpufleet.cluster.plugins.filter",
    "ansible_collections.gpufleet.cluster.plugins.test",
)


def preload_jinja_plugins(packages: tuple[str, ...] = PRELOAD_PACKAGES) -> list[str]:
    """Import the collection's filter and test plugins (and the module_utils they use); return what was imported.

    Ansible forks a worker per task and host, and a worker that templates any gpufleet.cluster
    filter imports every filter file of the collection (it cannot tell from the name which file
    holds it), with netaddr and the acceptance and preflight helpers behind them: about 0.3 s per
    host per task on the lab. Imported in the controller before the first fork, each worker
    inherits them. A plugin that fails to import is left to Ansible, which reports it where it is used.
    """
    imported = []
    for package_name in packages:
        try:
            package = importlib.import_module(package_name)
        except ImportError:
            continue
        for info in pkgutil.iter_modules(package.__path__):
            name = f"{package_name}.{info.name}"
            try:
                importlib.import_module(name)
            except Exception:  # Ansible reports a broken plugin where it is used
                continue
            imported.append(name)
    return imported
