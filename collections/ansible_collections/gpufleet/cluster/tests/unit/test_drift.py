"""Driver drift (module_utils/ops/drift.py and its filters): pins, pool majority, holds, report and Markdown.

Every node's facts are built by ``build_facts`` from the real-format fixtures (``hw_helpers.healthy_raw``),
changed where a test needs drift the way the tools would print it.
"""

from __future__ import annotations

import copy
import fnmatch
import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.drift import FilterModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.facts import build_facts
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops.drift import (
    COMPONENT_NAMES,
    DEFAULT_HOLD_PATTERNS,
    drift_check,
    drift_markdown,
    remediation_markdown,
)
from hw_helpers import BRIEF, fixture, healthy_raw

PIN = BRIEF["software"]["driver"]  # 570.133.20
NEWER = "570.148.08"
POOL = BRIEF["pools"][0]["name"]
# The driver packages of NVIDIA's Debian repository at the pin, as dpkg-query prints them (hi = held).
DRIVER_DPKG = f"nvidia-driver-cuda\t{PIN}-1\thi \nnvidia-kernel-open-dkms\t{PIN}-1\thi \n"


def brief(**software) -> dict:
    b = copy.deepcopy(BRIEF)
    b["cluster"] = {"name": "lab"}
    b["software"].update(software)
    return b


def raw(driver_packages: str | None = None, loaded: str | None = None, kernel: str | None = None) -> dict:
    """A healthy node's raw outputs; ``driver_packages``: the installed driver packages' version,
    ``loaded``: the version of the loaded module (and so of what nvidia-smi reports)."""
    r = healthy_raw()
    r["dpkg"] = r["dpkg"] + DRIVER_DPKG.replace(PIN, driver_packages or PIN)
    if loaded:
        for key in ("driver_proc", "query_gpu", "smi_q"):
            r[key] = r[key].replace(PIN, loaded)
    if kernel:
        r["osrelease"] = kernel + "\n"
    return r


def record(facts: dict | None, holds: list[str] | None = None, pool: str = POOL) -> dict:
    """A host's record as the drift playbook builds it: everything the roles hold is held unless told."""
    if holds is None and facts is not None:
        holds = sorted(facts.get("packages") or {})
    return {"pool": pool, "facts": facts, "holds": holds}


def healthy(**kw) -> dict:
    return build_facts(raw(**kw))


def items(report: dict, host: str) -> list[tuple[str, str]]:
    return [(d["component"], d["basis"]) for d in report["nodes"][host]["drift"]]


# ------------------------------------------------------------------ clean


def test_clean_pool_reports_every_node_clean_with_its_versions():
    records = {h: record(healthy()) for h in ("gpu01", "gpu02", "gpu03")}
    report = drift_check(records, brief())
    assert report["clean"] == ["gpu01", "gpu02", "gpu03"]
    assert report["drifted"] == report["unknown"] == []
    assert report["counts"] == {"nodes": 3, "clean": 3, "drifted": 0, "unknown": 0, "reboot": 0, "items": 0}
    node = report["nodes"]["gpu02"]
    assert node["status"] == "clean" and node["drift"] == [] and node["reboot"] is False
    assert node["versions"]["driver-package"] == PIN
    assert node["versions"]["driver-loaded"] == PIN
    assert node["versions"]["kernel"] == "6.8.0-51-generic"
    assert set(node["versions"]) == set(COMPONENT_NAMES)
    assert report["kind"] == "drift" and report["schema"] == 1 and report["cluster"] == "lab"
    json.dumps(report)  # the playbook writes it as is


# ------------------------------------------------------------------ pins


def test_newer_driver_package_without_its_hold_drifts_that_node_only():
    """Someone ran `apt-mark unhold nvidia-driver-cuda && apt upgrade` on gpu02 and did not reboot."""
    facts = healthy(driver_packages=NEWER)
    holds = sorted(set(facts["packages"]) - {"nvidia-driver-cuda"})
    records = {"gpu01": record(healthy()), "gpu02": record(facts, holds), "gpu03": record(healthy())}
    report = drift_check(records, brief())
    assert report["drifted"] == ["gpu02"] and report["clean"] == ["gpu01", "gpu03"]
    assert items(report, "gpu02") == [("driver-package", "pin"), ("hold", "hold")]
    package, hold = report["nodes"]["gpu02"]["drift"]
    assert (package["expected"], package["found"]) == (PIN, NEWER)
    for word in ("gpu02", "nvidia-driver-cuda", PIN, NEWER):
        assert word in package["message"]
    assert (hold["expected"], hold["found"], hold["package"]) == ("held", "not held", "nvidia-driver-cuda")
    assert "nvidia-driver-cuda" in hold["message"] and "gpu02" in hold["message"]
    # the new module is not loaded yet: the loaded one is still the pin, so no reboot is required by it
    assert report["nodes"]["gpu02"]["reboot"] is False


def test_every_driver_package_must_match_the_pin():
    r = raw()
    r["dpkg"] = r["dpkg"].replace(f"nvidia-kernel-open-dkms\t{PIN}-1", f"nvidia-kernel-open-dkms\t{NEWER}-1")
    report = drift_check({"gpu01": record(build_facts(r))}, brief())
    (item,) = report["nodes"]["gpu01"]["drift"]
    assert item["component"] == "driver-package" and item["found"] == NEWER
    assert "nvidia-kernel-open-dkms" in item["message"] and "nvidia-driver-cuda" not in item["message"]


def test_loaded_module_other_than_the_pin_needs_a_reboot():
    report = drift_check({"gpu01": record(healthy(loaded=NEWER)), "gpu02": record(healthy())}, brief())
    node = report["nodes"]["gpu01"]
    assert ("driver-loaded", "pin") in items(report, "gpu01")
    assert ("driver-running", "pin") in items(report, "gpu01")
    assert node["reboot"] is True and report["reboot"] == ["gpu01"] and report["counts"]["reboot"] == 1
    assert report["nodes"]["gpu02"]["reboot"] is False


def test_unknown_loaded_module_falls_back_to_the_packages_for_the_reboot():
    r = raw(driver_packages=NEWER)
    r.pop("driver_proc")  # no /proc/driver/nvidia/version: which module is loaded is unknown
    report = drift_check({"gpu01": record(build_facts(r))}, brief())
    node = report["nodes"]["gpu01"]
    assert node["versions"]["driver-loaded"] is None
    assert ("driver-loaded", "pin") not in items(report, "gpu01")
    assert node["reboot"] is True


def test_fabric_manager_must_be_the_pinned_driver_when_installed():
    r = raw()
    r["fabricmanager_version"] = r["fabricmanager_version"].replace(PIN, NEWER)
    report = drift_check({"gpu01": record(build_facts(r))}, brief())
    (item,) = report["nodes"]["gpu01"]["drift"]
    assert (item["component"], item["expected"], item["found"]) == ("fabric-manager", PIN, NEWER)
    # a PCIe node without a fabric manager is not drifted for it
    r = raw()
    r.pop("fabricmanager_version")
    r["dpkg"] = "\n".join(line for line in r["dpkg"].splitlines() if "fabricmanager" not in line) + "\n"
    assert drift_check({"gpu01": record(build_facts(r))}, brief())["clean"] == ["gpu01"]


@pytest.mark.parametrize(
    ("software", "component", "found"),
    [
        ({"cuda": "12.9"}, "cuda", "12.8.1"),
        ({"nccl": "2.27.3"}, "nccl", "2.26.2"),
        ({"container_toolkit": "1.17.8"}, "container-toolkit", "1.17.5"),
        ({"kernel": "6.8.0-60-generic"}, "kernel", "6.8.0-51-generic"),
        ({"rdma_core": "52.0"}, "rdma-core", "50.0"),
        ({"driver_flavor": "proprietary"}, "driver-flavor", "open"),
        ({"dcgm": "4.2.3"}, "dcgm", "not installed"),
    ],
)
def test_each_pin_is_compared(software, component, found):
    report = drift_check({"gpu01": record(healthy())}, brief(**software))
    (item,) = report["nodes"]["gpu01"]["drift"]
    assert (item["component"], item["basis"], item["found"]) == (component, "pin", found)
    assert item["expected"] == str(next(iter(software.values())))


def test_cuda_pin_is_major_minor():
    """software.cuda 12.8 accepts the 12.8.1 toolkit (the gate compares it the same way)."""
    assert drift_check({"gpu01": record(healthy())}, brief(cuda="12.8"))["clean"] == ["gpu01"]


def test_optional_pins_are_ignored_when_absent():
    """No kernel / dcgm / doca_ofed / rdma_core / container_toolkit pin: a lone node is clean whatever it runs."""
    b = brief()
    b["software"].pop("container_toolkit")
    r = raw(kernel="6.1.0-31-amd64")
    r["dpkg"] += "datacenter-gpu-manager-4-core\t1:4.1.0-1\tii \n"
    report = drift_check({"gpu01": record(build_facts(r))}, b)
    assert report["clean"] == ["gpu01"]
    assert set(report["pins"]) == {"driver", "driver_flavor", "cuda", "nccl"}
    assert report["nodes"]["gpu01"]["versions"]["dcgm"] == "4.1.0"


def test_doca_ofed_pin_applies_to_the_doca_stack_only():
    inbox = brief(doca_ofed="2.10.0")  # rdma_stack inbox: doca-ofed is not installed, by design
    assert drift_check({"gpu01": record(healthy())}, inbox)["clean"] == ["gpu01"]
    doca = brief(doca_ofed="2.10.0", rdma_stack="doca-ofed")
    (item,) = drift_check({"gpu01": record(healthy())}, doca)["nodes"]["gpu01"]["drift"]
    assert (item["component"], item["found"]) == ("doca-ofed", "not installed")


# ------------------------------------------------------------------ pool majority


def test_pool_majority_catches_an_unpinned_kernel():
    records = {
        "gpu01": record(healthy()),
        "gpu02": record(healthy(kernel="6.8.0-60-generic")),
        "gpu03": record(healthy()),
    }
    report = drift_check(records, brief())
    assert report["drifted"] == ["gpu02"]
    (item,) = report["nodes"]["gpu02"]["drift"]
    assert (item["component"], item["basis"]) == ("kernel", "pool")
    assert (item["expected"], item["found"]) == ("6.8.0-51-generic", "6.8.0-60-generic")
    assert "2 of 3" in item["message"] and POOL in item["message"]


def test_two_node_tie_has_no_majority():
    records = {"gpu01": record(healthy()), "gpu02": record(healthy(kernel="6.8.0-60-generic"))}
    assert drift_check(records, brief())["clean"] == ["gpu01", "gpu02"]


def test_majority_counts_only_nodes_of_the_same_pool():
    records = {
        "gpu01": record(healthy()),
        "gpu02": record(healthy(kernel="6.8.0-60-generic")),
        "gpu03": record(healthy()),
        "l40s01": record(healthy(kernel="6.8.0-60-generic"), pool="l40s-infer"),
    }
    report = drift_check(records, brief())
    assert report["drifted"] == ["gpu02"]  # l40s01 is alone in its pool


def test_unreadable_nodes_do_not_vote_but_count_in_the_majority():
    """One odd node of three readable: drift. The unreadable fourth does not make a 2-of-4 non-majority."""
    records = {
        "gpu01": record(healthy()),
        "gpu02": record(healthy(kernel="6.8.0-60-generic")),
        "gpu03": record(healthy()),
        "gpu04": record(None),
    }
    report = drift_check(records, brief())
    assert report["drifted"] == ["gpu02"] and report["unknown"] == ["gpu04"]


def test_a_pinned_component_is_judged_by_its_pin_not_the_pool():
    """Two nodes moved to the newer driver; the one still on the pin is not 'odd one out'."""
    records = {
        "gpu01": record(healthy(driver_packages=NEWER, loaded=NEWER)),
        "gpu02": record(healthy(driver_packages=NEWER, loaded=NEWER)),
        "gpu03": record(healthy()),
    }
    report = drift_check(records, brief())
    assert report["drifted"] == ["gpu01", "gpu02"] and report["clean"] == ["gpu03"]
    for host in ("gpu01", "gpu02"):
        assert all(basis == "pin" for _component, basis in items(report, host))
        assert len({c for c, _ in items(report, host)}) == len(items(report, host))  # each component once


# ------------------------------------------------------------------ holds


def test_holds_unknown_skips_the_hold_check():
    facts = healthy()
    report = drift_check({"gpu01": {"pool": POOL, "facts": facts, "holds": None}}, brief())
    assert report["clean"] == ["gpu01"]
    report = drift_check({"gpu01": {"pool": POOL, "facts": facts, "holds": []}}, brief())
    held = sorted(d["package"] for d in report["nodes"]["gpu01"]["drift"])
    expected = sorted(p for p in facts["packages"] if any(fnmatch.fnmatchcase(p, g) for g in DEFAULT_HOLD_PATTERNS))
    assert held == expected and "nvidia-driver-cuda" in held and "libnccl2" in held
    assert "rdma-core" not in held  # an OS package the roles do not hold


@pytest.mark.parametrize(
    "held",
    [
        "nvidia-driver-cuda",  # apt-mark showhold
        "nvidia-driver-cuda:amd64",  # apt-mark showhold, multi-arch
        f"nvidia-driver-cuda-0:{PIN}-1.*",  # dnf versionlock list
    ],
)
def test_hold_list_formats(held):
    facts = healthy()
    holds = [p for p in facts["packages"] if p != "nvidia-driver-cuda"] + [held]
    assert drift_check({"gpu01": record(facts, holds)}, brief())["clean"] == ["gpu01"]


def test_hold_patterns_override_the_default():
    facts = healthy()
    report = drift_check({"gpu01": record(facts, [])}, brief(), hold_patterns=["libnccl*"])
    assert [d["package"] for d in report["nodes"]["gpu01"]["drift"]] == ["libnccl2"]


def test_default_hold_patterns_are_what_the_roles_hold():
    """The names the roles apt-mark hold (defaults and vars) match; the dependencies they only pin do not."""
    held = [
        "nvidia-driver-cuda",
        "nvidia-kernel-open-dkms",
        "nvidia-kernel-dkms",
        "nvidia-driver-570-open",
        "nvidia-dkms-570-open",
        "nvidia-driver-570",
        "nvidia-dkms-570",
        "kmod-nvidia-open-dkms",
        "kmod-nvidia-latest-dkms",
        "nvidia-persistenced",
        "nvidia-fabricmanager-570",
        "nvidia-fabricmanager",
        "nvidia-fabric-manager",
        "cuda-toolkit-12-8",
        "cuda-toolkit-12-10",
        "libnccl2",
        "libnccl-dev",
        "datacenter-gpu-manager-4-core",
        "datacenter-gpu-manager-4-cuda12",
        "nvidia-container-toolkit",
        "nvidia-container-toolkit-base",
        "libnvidia-container-tools",
        "libnvidia-container1",
    ]
    not_held = [
        "nvidia-driver-cuda-libs",
        "cuda-toolkit-12-8-config-common",
        "cuda-toolkit-config-common",
        "libnvidia-compute-570",
        "datacenter-gpu-manager-4-proprietary-cuda12",
        "nvidia-driver-local-repo-ubuntu2404-570.133.20",
        "rdma-core",
    ]

    def matches(name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in DEFAULT_HOLD_PATTERNS)

    assert [n for n in held if not matches(n)] == []
    assert [n for n in not_held if matches(n)] == []


# ------------------------------------------------------------------ unknown hosts, input errors


def test_unreadable_host_is_unknown():
    report = drift_check({"gpu01": record(healthy()), "gpu02": record(None)}, brief())
    assert report["unknown"] == ["gpu02"] and report["clean"] == ["gpu01"]
    node = report["nodes"]["gpu02"]
    assert node["status"] == "unknown" and node["drift"] == [] and node["reboot"] is False
    assert "gpu02" in node["message"] and "could not be read" in node["message"]


def test_pools_name_the_pool_of_a_host_without_a_record():
    records = {"gpu01": record(healthy()), "gpu02": None, "gpu03": record(healthy(), pool="")}
    report = drift_check(records, brief(), pools={"gpu01": "other", "gpu02": POOL, "gpu03": POOL})
    assert report["unknown"] == ["gpu02"]
    assert [report["nodes"][h]["pool"] for h in ("gpu01", "gpu02", "gpu03")] == [POOL, POOL, POOL]


def test_hosts_in_natural_order():
    records = {h: record(healthy()) for h in ("gpu10", "gpu2", "gpu1")}
    report = drift_check(records, brief())
    assert list(report["nodes"]) == report["clean"] == ["gpu1", "gpu2", "gpu10"]


@pytest.mark.parametrize(
    ("records", "hold_patterns"),
    [
        (["gpu01"], None),
        ({"gpu01": "facts"}, None),
        ({"gpu01": {"pool": POOL, "facts": "x", "holds": None}}, None),
        ({"gpu01": {"pool": POOL, "facts": None, "holds": "libnccl2"}}, None),
        ({}, 3),
    ],
)
def test_filter_rejects_misuse(records, hold_patterns):
    drift_filter = FilterModule().filters()["drift_check"]
    with pytest.raises(AnsibleFilterError, match="drift_check"):
        drift_filter(records, brief(), hold_patterns)


def test_filters_are_registered():
    filters = FilterModule().filters()
    assert set(filters) == {"drift_check", "drift_markdown", "remediation_markdown", "accepted_until_marks"}
    assert filters["accepted_until_marks"]("NodeName=gpu01 State=IDLE Extra=accepted_until=2027-03-03\n") == {
        "gpu01": "2027-03-03"
    }
    with pytest.raises(AnsibleFilterError, match="accepted_until_marks"):
        filters["accepted_until_marks"](42)
    report = filters["drift_check"]({"gpu01": record(healthy())}, brief())
    assert report["clean"] == ["gpu01"]
    with pytest.raises(AnsibleFilterError, match="drift_markdown"):
        filters["drift_markdown"]({"nodes": []})


# ------------------------------------------------------------------ Markdown


def test_drift_markdown_has_a_table_per_drifted_node_and_lists_the_rest():
    facts = healthy(driver_packages=NEWER, loaded=NEWER)
    holds = sorted(set(facts["packages"]) - {"nvidia-driver-cuda"})
    records = {
        "gpu01": record(healthy()),
        "gpu02": record(facts, holds),
        "gpu03": record(None),
        "gpu04": record(healthy()),
    }
    md = drift_markdown(drift_check(records, brief()))
    assert md.startswith("# Drift: lab\n")
    assert "**Verdict: DRIFTED** (1 drifted, 1 unknown, 2 clean of 4 nodes)" in md
    assert f"## gpu02 ({POOL}) — reboot needed" in md
    assert f"| driver-package | {PIN} | {NEWER} | pin |" in md
    assert f"| driver-loaded | {PIN} | {NEWER} | pin |" in md
    assert "| hold: nvidia-driver-cuda | held | not held | hold |" in md
    assert "## gpu01" not in md and "## gpu04" not in md
    assert "- gpu03: could not be read" in md
    assert md.rstrip().endswith("gpu01, gpu04")


def test_drift_markdown_of_a_clean_cluster():
    md = drift_markdown(drift_check({"gpu01": record(healthy())}, brief()))
    assert "**Verdict: CLEAN**" in md and "## Unknown" not in md and "| component |" not in md


def test_remediation_markdown():
    drift = drift_check(
        {"gpu01": record(healthy(driver_packages=NEWER)), "gpu02": record(healthy(kernel="6.8.0-60-generic"))},
        brief(kernel="6.8.0-51-generic"),
    )
    report = {
        "kind": "remediation",
        "schema": 1,
        "cluster": "lab",
        "started": "2026-03-10T10:00:00Z",
        "finished": "2026-03-10T10:40:00Z",
        "serial": "50%",
        "batches": [["gpu01"], ["gpu02"]],
        "nodes": {
            "gpu02": {
                "before": drift["nodes"]["gpu02"]["drift"],
                "outcome": "drained",
                "reason": "NCCL all_reduce 310 GB/s below the 440 GB/s floor",
                "gate": "pass",
                "acceptance": "fail",
                "rebooted": True,
            },
            "gpu01": {
                "before": drift["nodes"]["gpu01"]["drift"],
                "outcome": "resumed",
                "reason": "",
                "gate": "pass",
                "acceptance": "pass",
                "rebooted": True,
            },
        },
    }
    md = remediation_markdown(report)
    assert md.startswith("# Remediation: lab\n")
    assert "**Verdict: FAILED** (1 drained, 1 resumed)" in md
    assert "serial 50%" in md and "Still out of service: gpu02" in md
    assert "1. gpu01\n2. gpu02" in md
    assert "| gpu01 | driver-package | resumed | yes | pass | pass | - |" in md
    assert "| gpu02 | kernel | drained | yes | pass | fail | NCCL all_reduce 310 GB/s below the 440 GB/s floor |" in md
    assert md.index("| gpu01 |") < md.index("| gpu02 |")
    report["nodes"]["gpu02"]["outcome"] = "resumed"
    assert "**Verdict: OK** (2 resumed)" in remediation_markdown(report)


def test_remediation_markdown_names_a_node_picked_up_from_its_drain_reason():
    report = {
        "kind": "remediation",
        "cluster": "lab",
        "batches": [["gpu02"]],
        "nodes": {
            "gpu02": {
                "before": [],
                "left_drained": "gpufleet remediate failed: hardware gate failed: HW_RDMA_RATE",
                "outcome": "resumed",
                "reason": "pins restored, gate and acceptance passed",
                "gate": "pass",
                "acceptance": "pass",
                "rebooted": False,
            }
        },
    }
    md = remediation_markdown(report)
    assert (
        "| gpu02 | left drained by an earlier run (gpufleet remediate failed: hardware gate failed: HW_RDMA_RATE) |"
        in md
    )
    report["nodes"]["gpu02"]["left_drained"] = None
    assert "| gpu02 | - | resumed |" in remediation_markdown(report)


# ------------------------------------------------------------------ GPU errors


def test_gpu_errors_are_named_per_node_without_making_it_drifted():
    sick = raw()
    sick["kernel_log"] = fixture("kernel_log_h100_xids.txt")
    report = drift_check({"gpu01": record(build_facts(sick)), "gpu02": record(healthy())}, brief())
    assert report["nodes"]["gpu01"]["status"] == "clean" and report["gpu_errors"] == ["gpu01"]
    assert report["nodes"]["gpu01"]["gpu_errors"] == [
        {"what": "XID 79 (GPU has fallen off the bus; action: reboot) on 0000:1b:00.0", "action": "reboot"},
        {
            "what": "XID 154 (recovery action changed to Node Reboot Required; action: reboot) on 0000:1b:00.0",
            "action": "reboot",
        },
        {"what": "XID 48 (double-bit ECC error; action: reset_gpu) on 0000:3a:00.0", "action": "reset_gpu"},
    ]
    assert report["nodes"]["gpu02"]["gpu_errors"] == []
    text = drift_markdown(report)
    assert "## GPU errors since boot" in text
    assert "| gpu01 | XID 79 (GPU has fallen off the bus; action: reboot) on 0000:1b:00.0 | reboot |" in text
    assert "GPU errors" not in drift_markdown(drift_check({"gpu02": record(healthy())}, brief()))
