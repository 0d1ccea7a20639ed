"""The direct YAML reader (module_utils/inventory/reader.py) against Ansible's own inventory.

A seeded generator writes random YAML inventories: groups nested through ``children`` (a group
written in several places, its hosts and vars split between them), host ranges, the same host in
several groups with different inline vars, ``vars:`` at every level, ``ansible_group_priority``,
and group_vars/ and host_vars/ in every form Ansible's host_group_vars plugin reads (``name``,
``name.yml``, ``name.yaml``, ``name.json``, a directory with subdirectories, several at once),
``group_vars/all`` included. For every inventory, ``groups`` and every host's variables must be
those Ansible gives (InventoryManager + VariableManager, what ``ansible-inventory --list`` prints,
read by the CLI's slow path in one child Python for all of them). A few are also checked against
the real ``ansible-inventory --list``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.reader import load_inventory
from gpufleet_cli.cmd_preflight import ansible_read

ROOT = Path(__file__).resolve().parents[6]
ANSIBLE_INVENTORY = ROOT / ".venv" / "bin" / "ansible-inventory"
SEEDS = range(200)

GROUP_NAMES = ["gpu", "ctl", "rack_a", "rack_b", "pool1", "infra", "login", "storage", "edge-x"]
HOST_PATTERNS = ["n01", "n02", "n03", "n04", "n[01:03]", "n[02:04]", "gpu[1:3]", "gpu2", "r[a:c]x", "rbx", "s[01:09:4]"]
VAR_NAMES = ["v1", "v2", "v3", "ansible_host", "bmc_ip", "fabric_ips", "storage_ip", "rack"]
FILE_NAMES = ["a.yml", "b.yaml", "c", "d.json", "sub/e.yml", "sub/f", "z.yml", ".hidden.yml", "g.yml~", "h.txt"]


def _value(rng: random.Random):
    kind = rng.randrange(7)
    if kind == 0:
        return rng.randint(-3, 300)
    if kind == 1:
        return f"10.{rng.randint(0, 9)}.0.{rng.randint(1, 250)}"
    if kind == 2:
        return rng.choice([True, False, None, "yes", "{{ not_templated }}"])
    if kind == 3:
        return [f"10.30.{i}.{rng.randint(1, 9)}" for i in range(rng.randint(0, 3))]
    if kind == 4:
        return {"a": rng.randint(0, 9), "b": [rng.random() < 0.5]}
    if kind == 5:
        return round(rng.uniform(0, 10), 2)
    return rng.choice(["x", "", "1.30", "0o17"])


def _vars(rng: random.Random, lo: int = 1) -> dict:
    return {k: _value(rng) for k in rng.sample(VAR_NAMES, rng.randint(lo, 3))}


def _shuffled(rng: random.Random, d: dict) -> dict:
    keys = list(d)
    rng.shuffle(keys)
    return {k: d[k] for k in keys}


def _write_vars(rng: random.Random, base: Path, name: str) -> None:
    """group_vars/<name> or host_vars/<name> in one or more of the forms Ansible reads."""
    base.mkdir(exist_ok=True)
    for form in rng.sample(["", ".yml", ".yaml", ".json", "/"], rng.choice([1, 1, 1, 2, 3])):
        if form == "/":
            d = base / name
            if d.exists():
                continue
            for f in rng.sample(FILE_NAMES, rng.randint(1, 4)):
                path = d / f
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(yaml.safe_dump(_vars(rng), sort_keys=False))
        elif form == "":
            if (base / name).exists():
                continue
            (base / name).write_text("" if rng.random() < 0.1 else yaml.safe_dump(_vars(rng), sort_keys=False))
        elif form == ".json":
            (base / f"{name}.json").write_text(json.dumps(_vars(rng)))
        else:
            (base / f"{name}{form}").write_text(yaml.safe_dump(_vars(rng), sort_keys=False))


def generate(seed: int, directory: Path) -> Path:
    """Write inventory number ``seed`` (hosts.yml, group_vars/, host_vars/) under ``directory``."""
    rng = random.Random(seed)
    names = rng.sample(GROUP_NAMES, rng.randint(1, 6))
    top: dict = {}
    all_node: dict | None = {} if rng.random() < 0.7 else None
    occurrences: dict[str, list[dict]] = {}

    def place(container: dict, section: str, name: str) -> dict:
        children = container.setdefault(section, {})
        return children.setdefault(name, {})

    for i, g in enumerate(names):
        parents = rng.sample(names[:i], rng.randint(0, min(2, i)))
        occ = []
        if not parents:
            if all_node is not None and rng.random() < 0.5:
                occ.append(place(all_node, "children", g))
            else:
                occ.append(top.setdefault(g, {}))
        for p in parents:
            occ.append(place(rng.choice(occurrences[p]), "children", g))
        occurrences[g] = occ
        # The group's content, split between the places it is written.
        if rng.random() < 0.7:
            for k, v in _vars(rng).items():
                rng.choice(occ).setdefault("vars", {})[k] = v
        if rng.random() < 0.25:
            rng.choice(occ).setdefault("vars", {})["ansible_group_priority"] = rng.randint(0, 3)
        for pattern in rng.sample(HOST_PATTERNS, rng.randint(0, 3)):
            hvars = _vars(rng) if rng.random() < 0.6 else None
            rng.choice(occ).setdefault("hosts", {})[pattern] = hvars
    if all_node is not None:
        if rng.random() < 0.6:
            all_node["vars"] = _vars(rng)
        if rng.random() < 0.3:
            all_node["hosts"] = {rng.choice(HOST_PATTERNS): _vars(rng, 0) or None}
        top["all"] = all_node

    def finish(node):
        if not isinstance(node, dict):
            return node
        out = {k: ({n: finish(c) for n, c in v.items()} if k in ("children", "hosts") else v) for k, v in node.items()}
        return _shuffled(rng, out) or None

    doc = _shuffled(rng, {name: finish(node) for name, node in top.items()})
    hosts_yml = directory / "hosts.yml"
    hosts_yml.write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=False))

    inv = load_inventory(str(hosts_yml))
    for g in rng.sample([*names, "all", "ungrouped"], rng.randint(0, len(names) + 1)):
        _write_vars(rng, directory / "group_vars", g)
    hosts = inv.groups["all"]
    for h in rng.sample(hosts, rng.randint(0, len(hosts))):
        _write_vars(rng, directory / "host_vars", h)
    return hosts_yml


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """(seed, source given to Ansible, hosts.yml) for every seed, and Ansible's reading of all of them."""
    base = tmp_path_factory.mktemp("inventories")
    cases = []
    for seed in SEEDS:
        d = base / f"s{seed:03d}"
        d.mkdir()
        hosts_yml = generate(seed, d)
        # Half as the directory (as -i inventories/<site>), half as the file.
        cases.append((seed, str(d if seed % 2 else hosts_yml), hosts_yml))
    results = ansible_read([c[1] for c in cases], keys=None, timeout=600)
    return cases, results


def test_direct_reader_equals_ansible_for_every_generated_inventory(generated):
    cases, results = generated
    assert len(results) == len(cases)
    mismatches = []
    for (seed, _source, hosts_yml), result in zip(cases, results, strict=True):
        assert "error" not in result, (seed, result)
        inv = load_inventory(str(hosts_yml))
        # Membership, not order: below the first level of children, Ansible orders a group's hosts
        # by walking sets of groups, an order that changes with Python's hash seed.
        ours = {g: sorted(hs) for g, hs in inv.groups.items()}
        theirs = {g: sorted(hs) for g, hs in result["groups"].items()}
        if ours != theirs:
            mismatches.append((seed, "groups", ours, theirs))
            continue
        for host, expected in result["hostvars"].items():
            # ansible_local is a fact (from the fact cache, {} when none), not an inventory variable.
            expected = {k: v for k, v in expected.items() if k != "ansible_local"}
            if inv.hostvars[host] != expected:
                mismatches.append((seed, host, inv.hostvars[host], expected))
                break
    assert not mismatches, f"{len(mismatches)} of {len(cases)} differ; first: {mismatches[0]}"


def test_the_generator_covers_what_it_claims(generated):
    cases, _results = generated
    texts = [Path(h).read_text() for _s, _src, h in cases]
    assert sum("children:" in t for t in texts) > 100
    assert sum("[" in t for t in texts) > 100
    assert sum("ansible_group_priority" in t for t in texts) > 20
    assert sum((Path(h).parent / "group_vars" / "all").exists() for _s, _src, h in cases) > 20
    assert sum((Path(h).parent / "host_vars").is_dir() for _s, _src, h in cases) > 100


def _unwrap(value):
    """ansible-inventory's JSON: values from some sources come as {"__ansible_unsafe": ...}."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


@pytest.mark.skipif(not ANSIBLE_INVENTORY.exists(), reason="needs the project venv")
@pytest.mark.parametrize("seed", [3, 8, 11])
def test_the_child_reads_what_ansible_inventory_lists(generated, seed):
    """The slow path's reading is ansible-inventory --list's (_meta.hostvars, untemplated)."""
    cases, results = generated
    _s, source, _h = cases[seed]
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [str(ANSIBLE_INVENTORY), "-i", source, "--list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    listed = _unwrap(json.loads(proc.stdout))["_meta"]["hostvars"]
    assert results[seed]["hostvars"] == {h: listed.get(h, {}) for h in results[seed]["hostvars"]}
