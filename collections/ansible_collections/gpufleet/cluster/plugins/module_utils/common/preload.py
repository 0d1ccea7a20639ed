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


# What every worker imports for itself otherwise: the decoder of a module's JSON result, and the
# action plugins behind most tasks (a task that names no action plugin of its own runs "normal"; the
# roles write their files with gpufleet.cluster.file_content and gpufleet.cluster.files).
WORKER_MODULES = (
    "ansible.module_utils._internal._json._profiles._module_legacy_m2c",
    # imported by name as well (Mitogen's action wrapper, the template action's copy)
    "ansible.plugins.action.normal",
    "ansible.plugins.action.copy",
)
WORKER_ACTIONS = (
    "ansible.builtin.normal",
    "ansible.builtin.command",
    "ansible.builtin.shell",
    "ansible.builtin.copy",
    "ansible.builtin.template",
    "ansible.builtin.unarchive",
    "gpufleet.cluster.file_content",
    "gpufleet.cluster.files",
)


def preload_worker_imports(
    modules: tuple[str, ...] = WORKER_MODULES, actions: tuple[str, ...] = WORKER_ACTIONS
) -> list[str]:
    """Import, before the workers fork, what each worker would import again for each task and host.

    A worker is a fork of the controller and ends with its task: a module the controller never
    imported is imported in every worker, for every task and host (the JSON profile that decodes a
    module's result, the action plugin's file; a few milliseconds each). Action plugins are loaded
    through Ansible's own loader, whose module cache the workers inherit. Returns what was loaded;
    what fails to load is left to Ansible, which reports it where it is used.
    """
    loaded = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        loaded.append(name)
    try:
        from ansible.plugins.loader import action_loader
    except ImportError:  # pragma: no cover - ansible-core is there wherever a strategy runs
        return loaded
    for name in actions:
        try:
            found = action_loader.get_with_context(name, class_only=True)
        except Exception:  # Ansible reports a broken plugin where it is used
            continue
        if found.object is not None:
            loaded.append(name)
    return loaded
