# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""The rolling upgrade of a kubeadm cluster, judged before any node is touched. Pure.

``plan`` compares the brief's ``software.kubernetes`` with what the cluster runs (the API server's
version from ``kubectl version -o json``, each node's kubelet from ``kubectl get nodes -o json``)
and answers which nodes need an upgrade, or every reason the upgrade cannot start. The rules are
kubeadm's and the version skew policy's (https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/,
https://kubernetes.io/releases/version-skew-policy/):

* one minor at a time, or a newer patch of the same minor; never a downgrade;
* the kubelets may be at most three minors older than the API server: a kubelet that the new
  control plane would leave further behind must be upgraded first, in steps;
* every node is registered and Ready: a drain of a NotReady node waits for pods that never leave,
  and kubeadm's own health check refuses NotReady control-plane nodes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import violation

KUBELET_MAX_MINORS_BEHIND = 3
_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$")


def parse(version: object) -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` of ``v1.33.4`` / ``1.33.4``; None when it is not such a version."""
    m = _VERSION_RE.fullmatch(str(version or "").strip())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _text(v: tuple[int, int, int]) -> str:
    return "v{}.{}.{}".format(*v)


def _nodes(nodes_json: Mapping) -> dict[str, dict]:
    out = {}
    for item in (nodes_json or {}).get("items") or []:
        meta = item.get("metadata") or {}
        status = item.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        out[meta.get("name")] = {
            "kubelet": (status.get("nodeInfo") or {}).get("kubeletVersion"),
            "ready": ready,
            "cordoned": bool((item.get("spec") or {}).get("unschedulable")),
        }
    return out


def plan(
    target: object,
    version_json: Mapping,
    nodes_json: Mapping,
    control_plane: Sequence[str],
    workers: Sequence[str],
) -> dict:
    """What the upgrade to ``target`` does, or why it cannot start.

    ``version_json``: ``kubectl version -o json``; ``nodes_json``: ``kubectl get nodes -o json``;
    ``control_plane`` in upgrade order (the first is the one ``kubeadm upgrade apply`` runs on);
    ``workers``: the other nodes. Returns ``{target, cluster, apply, nodes: {host: {kubelet, ready,
    upgrade}}, order, errors}``: ``apply`` is whether the control plane itself moves, ``upgrade``
    whether the node's kubelet does, ``order`` the hosts that change, control plane first.
    """
    errors: list[dict] = []
    want = parse(target)
    server = (version_json or {}).get("serverVersion") or {}
    have = parse(server.get("gitVersion"))
    if want is None:
        errors.append(
            violation(
                "K8S_UPGRADE_TARGET",
                "software.kubernetes",
                f"expected an exact Kubernetes version (e.g. '1.33.5'), found {target!r}",
            )
        )
    if have is None:
        errors.append(
            violation(
                "K8S_UPGRADE_SERVER",
                "serverVersion",
                f"expected the API server's version from kubectl version -o json, found {server.get('gitVersion')!r}",
            )
        )
    if want is None or have is None:
        return {"target": None, "cluster": None, "apply": False, "nodes": {}, "order": [], "errors": errors}

    if want < have:
        errors.append(
            violation(
                "K8S_UPGRADE_DOWNGRADE",
                "software.kubernetes",
                f"the control plane runs {_text(have)} and the brief pins {_text(want)}: kubeadm does not downgrade "
                "a cluster; pin the running version or newer",
            )
        )
    elif want[0] != have[0] or want[1] - have[1] > 1:
        errors.append(
            violation(
                "K8S_UPGRADE_SKIPS_MINOR",
                "software.kubernetes",
                f"the control plane runs {_text(have)} and the brief pins {_text(want)}: kubeadm upgrades one minor "
                f"version at a time; upgrade to {have[0]}.{have[1] + 1}.x first",
            )
        )

    registered = _nodes(nodes_json)
    nodes: dict[str, dict] = {}
    for host in [*control_plane, *workers]:
        if host in nodes:
            continue
        node = registered.get(host)
        if node is None:
            errors.append(
                violation(
                    "K8S_UPGRADE_NODE_MISSING",
                    "nodes",
                    "is in the inventory but not registered in the cluster: join it (playbooks/kubernetes.yml) "
                    "at the running version first, or leave it out with --limit",
                    host=host,
                )
            )
            continue
        kubelet = parse(node["kubelet"])
        if not node["ready"]:
            errors.append(
                violation(
                    "K8S_UPGRADE_NODE_NOT_READY",
                    "nodes",
                    "is not Ready: its drain would wait for pods that never leave; fix the node, or leave it out "
                    "with --limit and upgrade it when it is back",
                    host=host,
                )
            )
        if kubelet is None:
            errors.append(
                violation(
                    "K8S_UPGRADE_KUBELET_UNKNOWN",
                    "nodes",
                    f"expected the kubelet's version in status.nodeInfo.kubeletVersion, found {node['kubelet']!r}",
                    host=host,
                )
            )
        elif kubelet > want:
            errors.append(
                violation(
                    "K8S_UPGRADE_DOWNGRADE",
                    "nodes",
                    f"its kubelet runs {_text(kubelet)}, newer than the brief's {_text(want)}: a kubelet is not "
                    "downgraded; pin its version or newer",
                    host=host,
                )
            )
        elif kubelet[0] != want[0] or want[1] - kubelet[1] > KUBELET_MAX_MINORS_BEHIND:
            errors.append(
                violation(
                    "K8S_UPGRADE_KUBELET_SKEW",
                    "nodes",
                    f"its kubelet runs {_text(kubelet)}: more than {KUBELET_MAX_MINORS_BEHIND} minor versions behind "
                    f"{_text(want)} is outside the version skew policy; upgrade it in steps first",
                    host=host,
                )
            )
        nodes[host] = {"kubelet": node["kubelet"], "ready": node["ready"], "upgrade": kubelet != want}

    apply = have != want
    order = [h for h in nodes if nodes[h]["upgrade"] or (apply and h in control_plane)]
    return {
        "target": _text(want),
        "cluster": _text(have),
        "apply": apply,
        "nodes": nodes,
        "order": order,
        "errors": errors,
    }
