"""The cluster scenario tests the lab's cluster on hosts, a network and a cluster name of its own."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _gen():
    path = os.path.join(ROOT, "scripts", "gen_test_inventory")
    loader = importlib.machinery.SourceFileLoader("gen_test_inventory", path)
    spec = importlib.util.spec_from_loader("gen_test_inventory", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def _yaml(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _hosts(inv: dict) -> dict:
    out = {}
    for group in inv["all"]["children"].values():
        out.update(group.get("hosts") or {})
    return out


def test_the_committed_inventory_is_the_generated_one():
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "gen_test_inventory"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_same_cluster_other_names_addresses_and_cluster_name():
    lab = _hosts(_yaml("inventories", "lab", "hosts.yml"))
    ci = _hosts(_yaml("molecule", "cluster", "inventory", "hosts.yml"))
    assert sorted(ci) == sorted("ci-" + h.removeprefix("lab-") for h in lab)
    for name, lvars in lab.items():
        cvars = ci["ci-" + name.removeprefix("lab-")]
        assert cvars["ansible_host"] == lvars["ansible_host"].replace("10.250.10.", "10.250.50.")
        assert {k: v for k, v in cvars.items() if k != "ansible_host"} == {
            k: v for k, v in lvars.items() if k != "ansible_host"
        }
    lab_brief = _yaml("inventories", "lab", "brief.yml")
    ci_brief = _yaml("molecule", "cluster", "inventory", "brief.yml")
    assert ci_brief["cluster"]["name"] == "ci" != lab_brief["cluster"]["name"]
    assert ci_brief["networks"]["management"]["cidr"] == "10.250.50.0/24"
    lab_brief["cluster"]["name"] = "ci"
    lab_brief["networks"]["management"].update(cidr="10.250.50.0/24", gateway="10.250.50.1")
    # The workload's files come from the controller's file server: its address moves with it.
    workload = lab_brief["acceptance"]["workload"]
    for key in ("dataset_url", "weights_url"):
        assert workload[key].startswith("http://10.250.10.10:")
        workload[key] = workload[key].replace("10.250.10.", "10.250.50.")
    assert ci_brief == lab_brief


def _scenarios() -> list[str]:
    """Every Molecule scenario: each folder of molecule/ with a molecule.yml."""
    base = os.path.join(ROOT, "molecule")
    return sorted(d for d in os.listdir(base) if os.path.isfile(os.path.join(base, d, "molecule.yml")))


def test_the_scenarios_share_no_container_network_or_address():
    import ipaddress

    def platforms(scenario):
        return _yaml("molecule", scenario, "molecule.yml")["platforms"]

    scenarios = _scenarios()
    assert {"lab", "cluster", "gpu_stack", "rocky"} <= set(scenarios)
    pinned = _yaml("molecule", "resources", "vars", "networks.yml")["pinned_networks"]
    seen: dict[str, str] = {}
    for scenario in scenarios:
        for p in platforms(scenario):
            for key in (p["name"], p["ip"]):
                assert key not in seen, f"{key} in both {seen[key]} and {scenario}"
                seen[key] = scenario
            # On a pinned network (create.yml refuses any other), at an address in its subnet.
            assert p["network"] in pinned, f"{scenario}: {p['name']} on unpinned network {p['network']}"
            if "{{" not in pinned[p["network"]]:
                assert ipaddress.ip_address(p["ip"]) in ipaddress.ip_network(pinned[p["network"]]), p["name"]
    nets = {s: {p["network"] for p in platforms(s)} for s in scenarios}
    for i, a in enumerate(scenarios):
        for b in scenarios[i + 1 :]:
            assert nets[a].isdisjoint(nets[b]), (a, b, nets[a] & nets[b])
    fixed = [ipaddress.ip_network(v) for v in pinned.values() if "{{" not in v]
    assert all(not x.overlaps(y) for i, x in enumerate(fixed) for y in fixed[i + 1 :]), fixed
    # Each platform's address is the one its inventory names.
    ci = _hosts(_yaml("molecule", "cluster", "inventory", "hosts.yml"))
    assert {p["name"]: p["ip"] for p in platforms("cluster")} == {h: v["ansible_host"] for h, v in ci.items()}
    lab = _hosts(_yaml("inventories", "lab", "hosts.yml"))
    assert {p["name"]: p["ip"] for p in platforms("lab")} == {h: v["ansible_host"] for h, v in lab.items()}


def test_the_lab_command_drives_the_lab_scenario_which_no_test_runs():
    from gpufleet_cli import cmd_lab

    assert cmd_lab.SCENARIO == "lab"
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as fh:
        scenarios = next(line for line in fh if line.startswith("SCENARIOS ?="))
    assert "lab" not in scenarios.split("=", 1)[1].split()


def test_make_test_runs_every_scenario_but_the_lab_on_images_it_builds():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as fh:
        lines = fh.read().splitlines()

    def words(var):
        return next(line for line in lines if line.startswith(f"{var} ?=")).split("=", 1)[1].split()

    assert sorted(words("SCENARIOS")) == sorted(s for s in _scenarios() if s != "lab")
    # Each image a scenario's platform names is one scripts/testbed builds for make test.
    prefix = "localhost/gpufleet-testhost:"
    images = {p["image"] for s in _scenarios() for p in _yaml("molecule", s, "molecule.yml")["platforms"] if s != "lab"}
    assert all(i.startswith(prefix) for i in images), images
    # ${GPUFLEET_TEST_SUITE:-bookworm} is its default when CI runs it (the variable unset).
    tags = {re.sub(r"^\$\{[A-Z_]+:-([^}]*)\}$", r"\1", i.removeprefix(prefix)) for i in images}
    assert "rocky9-double" in tags and tags <= set(words("SUITES")), tags


def test_a_lab_file_that_no_longer_matches_stops_the_generator(monkeypatch, tmp_path):
    gen = _gen()
    lab = tmp_path / "lab"
    (lab / "host_vars").mkdir(parents=True)
    (lab / "hosts.yml").write_text("all:\n  hosts:\n    gpu-a:\n      ansible_host: 10.0.0.1\n")
    (lab / "brief.yml").write_text("cluster:\n  name: lab\n")
    monkeypatch.setattr(gen, "LAB", str(lab))
    try:
        gen.files()
    except gen.MappingError as exc:
        assert "hosts.yml" in str(exc)
    else:
        raise AssertionError("an inventory without lab-* hosts must not be mapped")


def test_the_scenarios_ubuntu_node_is_its_own_override_not_the_labs():
    """ci-gpu02 runs the Ubuntu 22.04 test double; the lab's lab-gpu02 keeps the lab's settings. Both
    take the doubles' CUDA repository tree of their OS from the lab's group_vars, by the driver role's
    <distro> element, not from a host override."""
    ci = _yaml("molecule", "cluster", "inventory", "host_vars", "ci-gpu02.yml")
    lab = _yaml("inventories", "lab", "host_vars", "lab-gpu02.yml")
    assert "nvidia_driver_repo_url" not in ci
    stack = _yaml("inventories", "lab", "group_vars", "gpu_lab", "stack.yml")
    assert "{{ nvidia_driver_repo_distro }}" in stack["nvidia_driver_repo_url"]
    assert ci["rdma_network_renderer"] == "networkd"
    assert {k: v for k, v in ci.items() if k in lab} == lab
    assert "nvidia_driver_repo_url" not in lab
    images = {p["name"]: p["image"] for p in _yaml("molecule", "cluster", "molecule.yml")["platforms"]}
    assert images.pop("ci-gpu02") == "localhost/gpufleet-testhost:ubuntu2204-double"
    assert all(not i.endswith("-double") for i in images.values()), images
    lab_images = {p["image"] for p in _yaml("molecule", "lab", "molecule.yml")["platforms"]}
    assert all(not i.endswith("-double") for i in lab_images), lab_images
    # netplan's rendering is read on a Debian node (netplan apply needs udev, which no container runs).
    plays = [p for p in _yaml("molecule", "cluster", "verify_netplan.yml") if "hosts" in p]
    gpu_lab = list(_yaml("molecule", "cluster", "inventory", "hosts.yml")["all"]["children"]["gpu_lab"]["hosts"])
    assert plays[0]["hosts"] == "gpu_lab[0]" and gpu_lab[0] == "ci-gpu01"


def test_an_override_that_changes_the_lab_or_names_no_lab_host_stops_the_generator(monkeypatch, tmp_path):
    gen = _gen()
    overrides = tmp_path / "overrides"
    overrides.mkdir()
    monkeypatch.setattr(gen, "OVERRIDES", str(overrides))
    (overrides / "ci-gpu02.yml").write_text("ansible_connection: local\n")
    try:
        gen.files()
    except gen.MappingError as exc:
        assert "ci-gpu02.yml: sets ansible_connection" in str(exc)
    else:
        raise AssertionError("an override of a variable the lab sets must stop the generator")
    (overrides / "ci-gpu02.yml").write_text("extra_var: 1\n")
    assert gen.files()["host_vars/ci-gpu02.yml"].endswith("not the lab:\nextra_var: 1\n")
    (overrides / "ci-gpu09.yml").write_text("extra_var: 1\n")
    try:
        gen.files()
    except gen.MappingError as exc:
        assert "ci-gpu09.yml: no such host in the lab" in str(exc)
    else:
        raise AssertionError("an override of a host the lab does not have must stop the generator")
