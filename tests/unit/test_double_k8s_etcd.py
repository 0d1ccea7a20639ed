"""The Kubernetes doubles' etcd (molecule/resources/doubles/stack/k8s): the API server stand-in
answers etcdctl's `endpoint health --cluster` for the stacked-etcd members (the control-plane
nodes) and refuses a control-plane join while a member is down, as kubeadm's check-etcd phase does;
kubectl's `exec etcd-<node> -- etcdctl ...` prints what etcdctl prints; the role's parser
(k8s.etcd_unhealthy) reads it back."""

from __future__ import annotations

import json
import sys

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.k8s import objects as k8s
from k8s_doubles import load_double


def load(name):
    return load_double(name)


@pytest.fixture
def apiserver(tmp_path, monkeypatch):
    api = load("kube-apiserver")
    monkeypatch.setattr(api, "ETCD_UNHEALTHY", str(tmp_path / "etcd-unhealthy"))
    state = {
        "objects": {},
        "tokens": {"abcdef.0123456789abcdef": 9e12},
        "certificate_key": "k" * 64,
        "certs_expire": 9e12,
        "ca_hash": "sha256:aa",
        "rv": 0,
    }
    cp = {"node-role.kubernetes.io/control-plane": ""}
    api.put(state, api.node("cp01", "10.0.0.11", [], cp))
    api.put(state, api.node("cp02", "10.0.0.12", [], cp))
    api.put(state, api.node("gpu01", "10.0.0.101", [], {}))
    return api, state, tmp_path / "etcd-unhealthy"


def join(api, state, **kw):
    req = {
        "token": "abcdef.0123456789abcdef",
        "ca_hash": "sha256:aa",
        "node": "cp03",
        "address": "10.0.0.13",
        "taints": [],
        "control_plane": True,
        "certificate_key": "k" * 64,
        **kw,
    }
    return api.Handler.bootstrap(None, state, "/bootstrap/join", req)


def test_members_are_the_control_plane_nodes_in_etcdctl_fields(apiserver):
    api, state, _down = apiserver
    members = api.etcd_health(state)
    assert [m["endpoint"] for m in members] == ["https://10.0.0.11:2379", "https://10.0.0.12:2379"]
    assert all(m["health"] is True and set(m) == {"endpoint", "health", "took"} for m in members)
    assert k8s.etcd_unhealthy(json.dumps(members)) == []


def test_a_control_plane_join_is_refused_while_a_member_is_down(apiserver):
    api, state, down = apiserver
    down.write_text("cp02\n")
    members = api.etcd_health(state)
    assert [m["health"] for m in members] == [True, False]
    assert k8s.etcd_unhealthy(json.dumps(members)) == ["https://10.0.0.12:2379: context deadline exceeded"]
    code, body = join(api, state)
    assert code == 500
    assert body["message"].startswith("error execution phase check-etcd: etcd cluster is not healthy")
    assert "https://10.0.0.12:2379" in body["message"]
    assert "Node//cp03" not in state["objects"]
    # a worker joins whatever etcd says (it adds no member)
    assert join(api, state, node="gpu02", control_plane=False)[0] == 200


def test_a_healthy_cluster_takes_the_join_with_the_uploaded_key_only(apiserver):
    api, state, _down = apiserver
    assert join(api, state, certificate_key="0" * 64)[0] == 403
    code, _ = join(api, state)
    assert code == 200
    assert "node-role.kubernetes.io/control-plane" in state["objects"]["Node//cp03"]["metadata"]["labels"]
    assert len(api.etcd_health(state)) == 3


@pytest.mark.parametrize(
    ("answer", "rc", "printed"),
    [
        ([{"endpoint": "https://10.0.0.11:2379", "health": True, "took": "1.7ms"}], 0, "json"),
        (
            [
                {"endpoint": "https://10.0.0.11:2379", "health": True, "took": "1.7ms"},
                {
                    "endpoint": "https://10.0.0.12:2379",
                    "health": False,
                    "took": "5s",
                    "error": "context deadline exceeded",
                },
            ],
            1,
            "json",
        ),
    ],
)
def test_kubectl_exec_etcdctl_prints_and_exits_as_etcdctl(monkeypatch, capsys, answer, rc, printed):
    kubectl = load("kubectl")
    monkeypatch.setattr(kubectl.d, "call", lambda _srv, _m, path, _b=None: (200, answer))
    command = [
        "etcdctl",
        "--endpoints=https://127.0.0.1:2379",
        "--cacert=/etc/kubernetes/pki/etcd/ca.crt",
        "endpoint",
        "health",
        "--cluster",
        "-w",
        "json",
    ]
    assert kubectl.etcdctl("srv", "cp01", command) == rc
    out, err = capsys.readouterr()
    assert json.loads(out) == answer
    assert ("Error: unhealthy cluster" in err) == bool(rc)
    assert len(k8s.etcd_unhealthy(out)) == rc


@pytest.mark.parametrize("text", ["", "Error: context deadline exceeded", "[]", "{}", "null"])
def test_no_member_list_is_not_a_healthy_cluster(text):
    (problem,) = k8s.etcd_unhealthy(text)
    assert problem.startswith("etcdctl printed no member list")


def test_kubeadm_uploads_the_certificates_with_the_key_given(monkeypatch, tmp_path, capsys):
    """`kubeadm init phase upload-certs --upload-certs --certificate-key KEY`: the API server stand-in
    gets that key (a join with another is refused); the log keeps a digest only."""
    kubeadm = load("kubeadm")
    sent = []
    monkeypatch.setattr(kubeadm, "config", lambda argv, kinds: ("x.yaml", {"InitConfiguration": {}}))
    monkeypatch.setattr(kubeadm.d, "server_of", lambda _cfg: "http://cp01:6443")
    monkeypatch.setattr(kubeadm.d, "call", lambda _srv, _m, path, body=None: sent.append((path, body)) or (200, {}))
    monkeypatch.setattr(kubeadm.d, "LOG_DIR", str(tmp_path))
    key = "ab" * 32
    kubeadm.init(["init", "phase", "upload-certs", "--upload-certs", "--certificate-key", key, "--config", "x.yaml"])
    assert sent == [("/bootstrap/certs", {"certificate_key": key})]
    logged = (tmp_path / "kubeadm.log").read_text()
    assert key not in logged and '"action": "upload-certs"' in logged
    capsys.readouterr()


def test_kubectl_exec_reaches_etcdctl_in_the_etcd_pod_of_a_control_plane_node(monkeypatch, capsys, tmp_path):
    """The whole `kubectl ... -n kube-system exec etcd-<node> -- etcdctl ...` call, as the role and the
    gpu_stack verify make it: the pod must be a control-plane node's etcd, and the exit status is
    etcdctl's."""
    kubectl = load("kubectl")
    nodes = {
        "cp01": {"metadata": {"name": "cp01", "labels": {"node-role.kubernetes.io/control-plane": ""}}},
        "gpu01": {"metadata": {"name": "gpu01", "labels": {}}},
    }
    health = [{"endpoint": "https://10.0.0.11:2379", "health": True, "took": "1.7ms"}]

    def call(_srv, _method, path, _body=None):
        if path == "/etcd/health":
            return 200, health
        name = path.rsplit("name=", 1)[1]
        return (200, nodes[name]) if name in nodes else (404, {"message": "not found"})

    monkeypatch.setattr(kubectl.d, "call", call)
    monkeypatch.setattr(kubectl, "server", lambda _opts: "http://cp01:6443")
    monkeypatch.setattr(kubectl.d, "LOG_DIR", str(tmp_path))
    etcdctl = ["--", "etcdctl", "--endpoints=https://127.0.0.1:2379", "endpoint", "health", "--cluster", "-w", "json"]
    base = ["--kubeconfig", "/etc/kubernetes/admin.conf", "-n", "kube-system", "exec"]
    monkeypatch.setattr(sys, "argv", ["kubectl", *base, "etcd-cp01", *etcdctl])
    with pytest.raises(SystemExit) as exc:
        kubectl.main()
    assert exc.value.code == 0
    assert json.loads(capsys.readouterr().out) == health
    for pod in ("etcd-gpu01", "etcd-cp09", "kube-apiserver-cp01"):
        monkeypatch.setattr(sys, "argv", ["kubectl", *base, pod, *etcdctl])
        with pytest.raises(SystemExit) as exc:
            kubectl.main()
        assert exc.value.code == 1
        assert f'pods "{pod}" not found' in capsys.readouterr().err


def test_a_join_under_the_name_of_a_ready_node_is_refused_as_kubeadm_refuses_it(apiserver):
    api, state, _down = apiserver
    code, body = join(api, state, node="gpu01", address="10.0.0.101", control_plane=False)
    assert code != 200
    assert body["message"] == (
        'error execution phase kubelet-start: a Node with name "gpu01" and status "Ready" already exists '
        "in the cluster. You must delete the existing Node or change the name of this new joining Node"
    )


def test_a_node_whose_kubelet_stopped_registers_again_with_its_labels_and_taints(apiserver):
    api, state, _down = apiserver
    node = state["objects"]["Node//gpu01"]
    node["metadata"]["labels"]["gpufleet.io/pool"] = "h100"
    node["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    api.put(state, node)
    assert api.Handler.bootstrap(None, state, "/bootstrap/kubelet-stopped", {"node": "gpu01"})[0] == 200
    ready = [c for c in state["objects"]["Node//gpu01"]["status"]["conditions"] if c["type"] == "Ready"]
    assert ready == [
        {
            "type": "Ready",
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.",
        }
    ]
    # re-imaged: a new address, and the join asks for no taints (it never does for an existing Node)
    code, _ = join(api, state, node="gpu01", address="10.0.0.201", control_plane=False, taints=[])
    assert code == 200
    again = state["objects"]["Node//gpu01"]
    assert again["metadata"]["labels"]["gpufleet.io/pool"] == "h100"
    assert again["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert again["status"]["addresses"] == [{"type": "InternalIP", "address": "10.0.0.201"}]
    assert api.node_ready(again)
    # a kubelet that reports its status is Ready again too
    api.Handler.bootstrap(None, state, "/bootstrap/kubelet-stopped", {"node": "gpu01"})
    api.Handler.bootstrap(None, state, "/bootstrap/kubelet", {"node": "gpu01", "version": "v1.32.3"})
    assert api.node_ready(state["objects"]["Node//gpu01"])


def test_kubeadm_reset_tells_the_api_server_the_kubelet_stopped(monkeypatch, tmp_path):
    kubeadm = load("kubeadm")
    conf = tmp_path / "etc-kubernetes"
    conf.mkdir()
    (conf / "kubelet.conf").write_text(kubeadm.d.kubeconfig("http://10.0.0.10:6443", "system:node:gpu01"))
    calls = []
    monkeypatch.setattr(kubeadm, "K", str(conf))
    monkeypatch.setattr(kubeadm, "PKI", str(conf / "pki"))
    monkeypatch.setattr(kubeadm, "KUBELET_CONFIG", str(tmp_path / "kubelet-config.yaml"))
    monkeypatch.setattr(
        kubeadm.d, "call", lambda server, method, path, body=None: calls.append((server, path, body)) or (200, {})
    )
    monkeypatch.setattr(kubeadm.d, "log", lambda *a, **kw: None)
    monkeypatch.setattr(kubeadm.subprocess, "run", lambda *a, **kw: None)
    kubeadm.reset(["reset", "-f"])
    assert calls == [("http://10.0.0.10:6443", "/bootstrap/kubelet-stopped", {"node": "gpu01"})]
    assert not (conf / "kubelet.conf").exists()
