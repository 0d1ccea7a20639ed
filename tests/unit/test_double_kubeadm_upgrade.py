"""The Kubernetes doubles' upgrade (molecule/resources/doubles/stack/k8s): kubeadm upgrade apply /
node refuse what the real kubeadm refuses and move the control plane's static pods and version;
the API server stand-in answers /version with it, and a kubelet's report sets its Node's
status.nodeInfo.kubeletVersion."""

from __future__ import annotations

import json

import pytest
import yaml
from k8s_doubles import load_double


@pytest.fixture
def kubeadm(tmp_path, monkeypatch):
    """kubeadm v1.33.5 on a control-plane node whose cluster runs v1.33.4; d.call answered in memory."""
    monkeypatch.setenv("GPUFLEET_DOUBLE_K8S_VERSION", "1.33.5")
    monkeypatch.setenv("HOME", str(tmp_path))
    adm = load_double("kubeadm")
    d = adm.d
    monkeypatch.setattr(d, "VERSION", "1.33.5")
    monkeypatch.setattr(d, "LOG_DIR", str(tmp_path / "log"))
    k = tmp_path / "etc-kubernetes"
    (k / "manifests").mkdir(parents=True)
    monkeypatch.setattr(adm, "K", str(k))
    (k / "admin.conf").write_text(d.kubeconfig("http://10.0.0.11:6443", "kubernetes-admin"))
    for name in ("kube-apiserver", "kube-scheduler"):
        pod = {"spec": {"containers": [{"name": name, "image": f"registry.k8s.io/{name}:v1.33.4"}]}}
        (k / "manifests" / f"{name}.yaml").write_text(yaml.safe_dump(pod))
    cluster = {"version": "v1.33.4"}
    calls = []

    def call(server, method, path, body=None):
        calls.append((method, path, body))
        if path == "/version":
            return 200, {"gitVersion": cluster["version"]}
        if path == "/bootstrap/upgrade":
            cluster["version"] = body["version"]
        return 200, {"ok": True}

    monkeypatch.setattr(d, "call", call)
    return adm, k, cluster, calls, tmp_path / "log" / "kubeadm.log"


def _images(k):
    return sorted(
        yaml.safe_load((k / "manifests" / f).read_text())["spec"]["containers"][0]["image"]
        for f in ("kube-apiserver.yaml", "kube-scheduler.yaml")
    )


def _refused(adm, argv, capsys):
    with pytest.raises(SystemExit) as exc:
        adm.upgrade(argv)
    assert exc.value.code == 1
    return capsys.readouterr().err


def test_apply_moves_the_static_pods_and_the_cluster_version(kubeadm, capsys):
    adm, k, cluster, calls, log = kubeadm
    adm.upgrade(["upgrade", "apply", "v1.33.5", "--yes"])
    assert 'SUCCESS! Your cluster was upgraded to "v1.33.5"' in capsys.readouterr().out
    assert cluster["version"] == "v1.33.5"
    assert ("POST", "/bootstrap/upgrade", {"version": "v1.33.5"}) in calls
    assert _images(k) == ["registry.k8s.io/kube-apiserver:v1.33.5", "registry.k8s.io/kube-scheduler:v1.33.5"]
    entry = json.loads(log.read_text().splitlines()[-1])
    assert (entry["action"], entry["version"], entry["from_version"], entry["rc"]) == (
        "upgrade apply",
        "v1.33.5",
        "v1.33.4",
        0,
    )


@pytest.mark.parametrize(
    ("argv", "cluster_version", "message"),
    [
        (
            ["upgrade", "apply", "v1.33.6", "--yes"],
            "v1.33.4",
            'is higher than the kubeadm version "v1.33.5". Upgrade kubeadm first',
        ),
        (["upgrade", "apply", "v1.33.5", "--yes"], "v1.31.2", "kubeadm can upgrade only 1 minor version at a time"),
        (["upgrade", "apply", "v1.33.5", "--yes"], "v1.34.0", "Downgrades are not supported"),
        (["upgrade", "apply", "v1.33.5"], "v1.33.4", "Are you sure you want to proceed? [y/N]"),
        (["upgrade", "apply"], "v1.33.4", "missing version argument"),
    ],
)
def test_apply_refuses_what_kubeadm_refuses_and_changes_nothing(kubeadm, capsys, argv, cluster_version, message):
    adm, k, cluster, _calls, _log = kubeadm
    cluster["version"] = cluster_version
    assert message in _refused(adm, argv, capsys)
    assert cluster["version"] == cluster_version
    assert _images(k) == ["registry.k8s.io/kube-apiserver:v1.33.4", "registry.k8s.io/kube-scheduler:v1.33.4"]


def test_apply_only_on_a_control_plane_node(kubeadm, capsys):
    adm, k, _cluster, _calls, _log = kubeadm
    for f in (k / "manifests").iterdir():
        f.unlink()
    assert "this is not a control-plane node" in _refused(adm, ["upgrade", "apply", "v1.33.5", "-y"], capsys)


def test_node_follows_the_cluster_version_and_needs_kubeadm_at_it(kubeadm, capsys):
    adm, k, cluster, _calls, log = kubeadm
    cluster["version"] = "v1.33.5"
    adm.upgrade(["upgrade", "node"])
    assert "successfully updated" in capsys.readouterr().out
    assert _images(k) == ["registry.k8s.io/kube-apiserver:v1.33.5", "registry.k8s.io/kube-scheduler:v1.33.5"]
    assert json.loads(log.read_text().splitlines()[-1])["action"] == "upgrade node"
    cluster["version"] = "v1.34.0"
    assert "is lower than the cluster version" in _refused(adm, ["upgrade", "node"], capsys)


def test_the_api_server_reports_the_upgraded_version_and_each_kubelet(monkeypatch):
    monkeypatch.setenv("GPUFLEET_DOUBLE_K8S_VERSION", "1.33.4")
    api = load_double("kube-apiserver")
    state = {"objects": {}, "tokens": {}, "certificate_key": None, "ca_hash": None, "rv": 0}
    init = {"ca_hash": "sha256:aa", "node": "cp01", "address": "10.0.0.11", "taints": [], "version": "v1.33.4"}
    assert api.Handler.bootstrap(None, state, "/bootstrap/init", init)[0] == 200
    assert state["cluster_version"] == "v1.33.4"
    assert api.Handler.bootstrap(None, state, "/bootstrap/upgrade", {"version": "v1.33.5"})[0] == 200
    assert state["cluster_version"] == "v1.33.5"
    code, _ = api.Handler.bootstrap(None, state, "/bootstrap/kubelet", {"node": "cp01", "version": "v1.33.5"})
    assert code == 200
    assert state["objects"]["Node//cp01"]["status"]["nodeInfo"]["kubeletVersion"] == "v1.33.5"
    assert api.Handler.bootstrap(None, state, "/bootstrap/kubelet", {"node": "gpu09", "version": "v1.33.5"})[0] == 404
