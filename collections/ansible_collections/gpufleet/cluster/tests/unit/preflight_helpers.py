"""Shared helpers for the preflight tests: load fixture sites, apply table-driven mutations."""

from __future__ import annotations

import copy
import os

from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.reader import load_inventory, load_yaml_file

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "preflight")


def site(name: str):
    """(brief, groups, hostvars) of a fixture site, deep-copied so tests can mutate them."""
    d = os.path.join(FIXTURES, name)
    inv = load_inventory(os.path.join(d, "hosts.yml"))
    return (
        copy.deepcopy(load_yaml_file(os.path.join(d, "brief.yml"))),
        copy.deepcopy(inv.groups),
        copy.deepcopy(inv.hostvars),
    )


def set_path(data, path: str, value):
    """set_path(brief, "pools.0.sharing", "mig"); a value of DELETE removes the key."""
    keys = path.split(".")
    for k in keys[:-1]:
        data = data[int(k)] if isinstance(data, list) else data.setdefault(k, {})
    last = keys[-1]
    if isinstance(data, list):
        data[int(last)] = value
    elif value is DELETE:
        data.pop(last, None)
    else:
        data[last] = value


DELETE = object()


def codes(violations, severity=None):
    return {v["code"] for v in violations if severity is None or v["severity"] == severity}
