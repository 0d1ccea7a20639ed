"""ansible-core 2.19 refuses a conditional that is not a string. In YAML, an unquoted
`- x is search('a: b')` is a mapping, not a string: the play fails only when it runs.
This catches it in every playbook, role and scenario beforehand."""

from __future__ import annotations

import glob
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEYS = ("that", "when", "failed_when", "changed_when", "until")


def _yaml_files():
    pats = ("playbooks/*.yml", "roles/**/*.yml", "molecule/**/*.yml")
    return sorted({f for p in pats for f in glob.glob(os.path.join(ROOT, p), recursive=True)})


def _bad_conditionals(node, found):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in KEYS:
                for item in value if isinstance(value, list) else [value]:
                    if not isinstance(item, str | bool):
                        found.append(f"{key}: {item!r}")
            _bad_conditionals(value, found)
    elif isinstance(node, list):
        for item in node:
            _bad_conditionals(item, found)
    return found


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_conditionals_are_strings(path):
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    assert _bad_conditionals(data, []) == []


def _plays():
    for path in sorted(glob.glob(os.path.join(ROOT, "playbooks/*.yml"))):
        with open(path, encoding="utf-8") as fh:
            for play in yaml.safe_load(fh) or []:
                yield os.path.relpath(path, ROOT), play


def test_no_play_gathers_a_subset_of_facts():
    """Facts are cached (ansible.cfg) and gathered 'smart': a play that gathers only a subset
    leaves a later site.yml run with that subset (no CPU count for slurm.conf, no default
    route for NCCL_SOCKET_IFNAME). Every gathering play gathers everything."""
    subset = [
        f"{path}: {play.get('name')}: gather_subset {play['gather_subset']}"
        for path, play in _plays()
        if "gather_subset" in play
    ]
    assert subset == []
