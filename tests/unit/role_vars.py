"""Render a role's defaults and vars as Ansible would, for given facts and brief, without Ansible.

Variables are templated lazily (one resolves another on first use), with Jinja2's native types
as Ansible 2.19 does, and the few Ansible filters the roles' defaults use. Enough to read what
a role would install (package names, versions, repository URLs) for every OS of the vendor
matrix; not a full Ansible templar.
"""

from __future__ import annotations

import copy
import functools
import itertools
import re
from pathlib import Path
from typing import Any

import yaml
from ansible.plugins.filter.core import FilterModule as CoreFilters
from ansible.plugins.filter.mathstuff import FilterModule as MathFilters
from ansible.plugins.test.core import TestModule as CoreTests
from ansible_collections.gpufleet.cluster.plugins.filter.host_addresses import host_addresses
from jinja2 import StrictUndefined
from jinja2.nativetypes import NativeEnvironment

ROOT = Path(__file__).resolve().parents[2]


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "y", "t")
    return bool(value)


def _environment() -> NativeEnvironment:
    env = NativeEnvironment(undefined=StrictUndefined)
    core = CoreFilters().filters()
    for name in (
        "combine",
        "regex_replace",
        "regex_escape",
        "to_json",
        "ternary",
        "flatten",
        "quote",
        "mandatory",
        "extract",
    ):
        env.filters[name] = core[name]
    env.filters["zip"] = MathFilters().filters()["zip"]
    env.filters["gpufleet.cluster.host_addresses"] = host_addresses
    env.filters["bool"] = _bool
    env.filters["product"] = lambda *lists: [list(t) for t in itertools.product(*lists)]
    env.tests["match"] = lambda value, pattern: re.match(pattern, str(value)) is not None
    env.tests["search"] = lambda value, pattern: re.search(pattern, str(value)) is not None
    env.tests["version"] = CoreTests().tests()["version"]
    return env


ENV = _environment()


@functools.cache
def _compile(source: str):
    return ENV.from_string(source)


@functools.cache
def _load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text()) if path.exists() else {}


def _concat(nodes) -> Any:
    """Like Ansible 2.19: a template of one expression keeps the expression's type (a string stays
    a string: "12.8" is not read as a number), several parts are joined as text."""
    parts = list(nodes)
    if len(parts) == 1:
        return parts[0]
    return "".join(str(p) for p in parts)


class Vars(dict):
    """A role's variables: values are templated when read, each in the context of all."""

    def __getitem__(self, key: str) -> Any:
        return self.render(dict.__getitem__(self, key))

    def render(self, value: Any) -> Any:
        if isinstance(value, str):
            if "{{" not in value and "{%" not in value:
                return value
            template = _compile(value)
            result = _concat(template.root_render_func(template.new_context(self, shared=True)))
            # A template that yields a string that is itself a template (a default naming
            # another variable's template) is rendered again, as Ansible does.
            return self.render(result) if isinstance(result, str) and result != value else result
        if isinstance(value, list):
            return [self.render(v) for v in value]
        if isinstance(value, dict):
            return {k: self.render(v) for k, v in value.items()}
        return value


def role_vars(role: str, facts: dict[str, Any], brief: dict[str, Any], extra: dict[str, Any] | None = None) -> Vars:
    """defaults/main.yml then vars/main.yml (vars win) of ``role``, with ansible_facts and the brief."""
    data: dict[str, Any] = {}
    for part in ("defaults/main.yml", "vars/main.yml", f"vars/{facts.get('os_family', '')}.yml"):
        data.update(copy.deepcopy(_load(ROOT / "roles" / role / part) or {}))
    data.update(
        ansible_facts=facts,
        gpufleet_brief=brief,
        ansible_check_mode=False,
        inventory_hostname="node01",
        groups={"all": ["node01"]},
        hostvars={"node01": {"ansible_host": "10.0.0.1"}},
    )
    data.update(extra or {})
    # Jinja's globals (dict, range, namespace...): a shared context does not carry them.
    for name, value in ENV.globals.items():
        data.setdefault(name, value)
    return Vars(data)
