"""The rolling upgrade's plan: what changes, in which order, and every reason it cannot start."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.k8s import upgrade


def _version(v):
    return {"clientVersion": {"gitVersion": v}, "serverVersion": {"major": "1", "minor": "33", "gitVersion": v}}


def _nodes(**kubelets):
    """kubectl get nodes -o json with each node's kubelet version; 'NotReady:<v>' marks a NotReady node."""
    items = []
    for name, v in kubelets.items():
        ready = not v.startswith("NotReady:")
        items.append(
            {
                "kind": "Node",
                "metadata": {"name": name.replace("_", "-")},
                "status": {
                    "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                    "nodeInfo": {"kubeletVersion": v.removeprefix("NotReady:")},
                },
            }
        )
    return {"kind": "List", "items": items}


CP, WORKERS = ["cp-1", "cp-2"], ["gpu-1", "gpu-2"]


def _codes(result):
    return sorted((v["code"], v["host"] or "") for v in result["errors"])


def test_patch_upgrade_moves_every_node_control_plane_first():
    nodes = _nodes(cp_1="v1.33.4", cp_2="v1.33.4", gpu_1="v1.33.4", gpu_2="v1.33.4")
    result = upgrade.plan("1.33.5", _version("v1.33.4"), nodes, CP, WORKERS)
    assert result["errors"] == []
    assert result["apply"] is True
    assert (result["cluster"], result["target"]) == ("v1.33.4", "v1.33.5")
    assert result["order"] == ["cp-1", "cp-2", "gpu-1", "gpu-2"]
    assert all(n["upgrade"] for n in result["nodes"].values())


def test_nothing_to_do_when_everything_runs_the_pin():
    nodes = _nodes(cp_1="v1.33.5", cp_2="v1.33.5", gpu_1="v1.33.5", gpu_2="v1.33.5")
    result = upgrade.plan("1.33.5", _version("v1.33.5"), nodes, CP, WORKERS)
    assert result["errors"] == [] and result["apply"] is False and result["order"] == []


def test_an_interrupted_upgrade_resumes_with_the_nodes_left_behind():
    # The control plane was moved and one worker upgraded before the controller died.
    nodes = _nodes(cp_1="v1.33.4", cp_2="v1.33.4", gpu_1="v1.33.5", gpu_2="v1.33.4")
    result = upgrade.plan("1.33.5", _version("v1.33.5"), nodes, CP, WORKERS)
    assert result["errors"] == [] and result["apply"] is False
    assert result["order"] == ["cp-1", "cp-2", "gpu-2"]


def test_one_minor_at_a_time_and_never_down():
    nodes = _nodes(cp_1="v1.33.4", cp_2="v1.33.4", gpu_1="v1.33.4", gpu_2="v1.33.4")
    assert _codes(upgrade.plan("1.35.0", _version("v1.33.4"), nodes, CP, WORKERS)) == [("K8S_UPGRADE_SKIPS_MINOR", "")]
    assert upgrade.plan("1.34.1", _version("v1.33.4"), nodes, CP, WORKERS)["errors"] == []
    down = upgrade.plan("1.33.3", _version("v1.33.4"), nodes, CP, WORKERS)
    assert ("K8S_UPGRADE_DOWNGRADE", "") in _codes(down)
    assert "kubeadm does not downgrade" in down["errors"][0]["message"]


def test_every_node_problem_at_once_naming_the_host():
    nodes = _nodes(cp_1="v1.33.4", cp_2="NotReady:v1.33.4", gpu_1="v1.29.9", gpu_2="v1.34.2")
    result = upgrade.plan("1.34.1", _version("v1.33.4"), nodes, CP, [*WORKERS, "gpu-3"])
    assert _codes(result) == [
        ("K8S_UPGRADE_DOWNGRADE", "gpu-2"),
        ("K8S_UPGRADE_KUBELET_SKEW", "gpu-1"),
        ("K8S_UPGRADE_NODE_MISSING", "gpu-3"),
        ("K8S_UPGRADE_NODE_NOT_READY", "cp-2"),
    ]
    skew = next(v for v in result["errors"] if v["code"] == "K8S_UPGRADE_KUBELET_SKEW")
    assert "v1.29.9" in skew["message"] and "v1.34.1" in skew["message"]


def test_three_minors_behind_is_within_the_skew_policy():
    nodes = _nodes(cp_1="v1.33.4", cp_2="v1.33.4", gpu_1="v1.31.0", gpu_2="v1.33.4")
    assert upgrade.plan("1.34.0", _version("v1.33.4"), nodes, CP, WORKERS)["errors"] == []


@pytest.mark.parametrize("target", ["1.33", "latest", "", None])
def test_a_target_that_is_not_an_exact_version(target):
    result = upgrade.plan(target, _version("v1.33.4"), _nodes(cp_1="v1.33.4"), ["cp-1"], [])
    assert _codes(result) == [("K8S_UPGRADE_TARGET", "")] and result["order"] == []


def test_no_server_version():
    result = upgrade.plan("1.33.5", {"clientVersion": {"gitVersion": "v1.33.5"}}, _nodes(), ["cp-1"], [])
    assert _codes(result) == [("K8S_UPGRADE_SERVER", "")]


def test_a_host_in_both_lists_is_planned_once():
    nodes = _nodes(cp_1="v1.33.4")
    assert upgrade.plan("1.33.5", _version("v1.33.4"), nodes, ["cp-1"], ["cp-1"])["order"] == ["cp-1"]
