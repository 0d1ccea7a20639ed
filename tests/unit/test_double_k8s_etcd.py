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


def _serve(api, handler):
    """An API server stand-in on a free local port, in a thread; its URL and a stop function."""
    import threading
    from http.server import ThreadingHTTPServer

    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop():
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_address[1]}", stop


def test_a_joined_control_plane_nodes_api_server_serves_the_first_nodes_store(tmp_path, monkeypatch):
    first = load_double("kube-apiserver", "gpufleet_apiserver_first")
    joined = load_double("kube-apiserver", "gpufleet_apiserver_joined")
    monkeypatch.setattr(first, "STATE", str(tmp_path / "first" / "state.json"))
    monkeypatch.setattr(first, "PEER", str(tmp_path / "first" / "etcd-peer"))
    monkeypatch.setattr(first.d, "STATE_DIR", str(tmp_path / "first"))
    monkeypatch.setattr(joined, "STATE", str(tmp_path / "joined" / "state.json"))
    monkeypatch.setattr(joined, "PEER", str(tmp_path / "joined" / "etcd-peer"))
    # The first node keeps the store; a node with neither store nor peer is a first node too.
    assert first.handler_class() is first.Handler
    assert joined.handler_class() is joined.Handler
    first_url, stop_first = _serve(first, first.handler_class())
    (tmp_path / "joined").mkdir()
    (tmp_path / "joined" / "etcd-peer").write_text(first_url + "\n")
    assert joined.handler_class() is joined.SharedStoreHandler
    joined_url, stop_joined = _serve(joined, joined.handler_class())
    try:
        call = first.d.call
        cp = {"node-role.kubernetes.io/control-plane": ""}
        assert call(joined_url, "PUT", "/object", first.node("cp02", "10.0.0.12", [], cp))[0] == 201
        assert call(first_url, "PUT", "/object", first.node("cp01", "10.0.0.11", [], cp))[0] == 201
        # Written through either, read through either: one store.
        for url in (first_url, joined_url):
            code, nodes = call(url, "GET", "/objects?kind=Node")
            assert code == 200
            assert sorted(n["metadata"]["name"] for n in nodes["items"]) == ["cp01", "cp02"]
            code, members = call(url, "GET", "/etcd/health")
            assert [m["endpoint"] for m in members] == ["https://10.0.0.11:2379", "https://10.0.0.12:2379"]
        # A refusal comes back as the first node's API server gave it.
        code, answer = call(joined_url, "POST", "/bootstrap/join", {"token": "nope", "node": "x"})
        assert code == 403
        assert "invalid bootstrap token" in answer["message"]
        assert call(joined_url, "GET", "/healthz") == (200, "ok")
        assert not (tmp_path / "joined" / "state.json").exists()
    finally:
        stop_joined()
        stop_first()


@pytest.fixture
def kubeadm_join(tmp_path, monkeypatch):
    """kubeadm join on a fresh node, the cluster's API server answered in memory."""
    adm = load("kubeadm")
    conf = tmp_path / "etc-kubernetes"
    monkeypatch.setattr(adm, "K", str(conf))
    monkeypatch.setattr(adm, "PKI", str(conf / "pki"))
    monkeypatch.setattr(adm, "PEER", str(tmp_path / "state" / "etcd-peer"))
    monkeypatch.setattr(adm, "preflight", lambda argv, files: None)
    monkeypatch.setattr(adm, "kubelet_start", lambda cfg: None)
    monkeypatch.setattr(adm.d, "log", lambda *a, **kw: None)
    uploaded = {
        "kubernetesVersion": "v1.33.4",
        "clusterName": "stack-test",
        "networking": {"podSubnet": "10.244.0.0/16", "serviceSubnet": "10.96.0.0/12"},
    }
    calls = []

    def call(server, method, path, body=None):
        calls.append((server, method, path))
        if path.startswith("/object?kind=ConfigMap"):
            return 200, {"data": {"ClusterConfiguration": adm.d.yaml.safe_dump(uploaded)}}
        if path == "/version":
            return 200, {"gitVersion": "v1.33.5"}
        return 200, {"ok": True}

    monkeypatch.setattr(adm.d, "call", call)

    def run(control_plane):
        doc = {
            "apiVersion": adm.API,
            "kind": "JoinConfiguration",
            "discovery": {
                "bootstrapToken": {
                    "token": "abcdef.0123456789abcdef",
                    "apiServerEndpoint": "10.0.0.9:6443",
                    "caCertHashes": ["sha256:aa"],
                }
            },
            "nodeRegistration": {"name": "cp02", "kubeletExtraArgs": [{"name": "node-ip", "value": "10.0.0.12"}]},
        }
        if control_plane:
            doc["controlPlane"] = {"localAPIEndpoint": {"advertiseAddress": "10.0.0.12"}, "certificateKey": "k" * 64}
        path = tmp_path / "join.yaml"
        path.write_text(adm.d.yaml.safe_dump(doc))
        adm.join(["join", "--config", str(path)])

    return adm, conf, tmp_path / "state" / "etcd-peer", calls, run


def test_a_control_plane_join_runs_the_control_plane_from_the_uploaded_configuration(kubeadm_join):
    adm, conf, peer, calls, run = kubeadm_join
    run(control_plane=True)
    pods = {p.stem: adm.d.yaml.safe_load(p.read_text()) for p in (conf / "manifests").iterdir()}
    assert sorted(pods) == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
    api = pods["kube-apiserver"]["spec"]["containers"][0]
    # the cluster's version now (an upgraded cluster's), this node's address, the uploaded networks
    assert api["image"] == "registry.k8s.io/kube-apiserver:v1.33.5"
    assert "--advertise-address=10.0.0.12" in api["command"]
    assert "--cluster-cidr=10.244.0.0/16" in pods["kube-controller-manager"]["spec"]["containers"][0]["command"]
    assert peer.read_text().strip() == "http://10.0.0.9:6443"
    assert adm.d.server_of(str(conf / "admin.conf")) == "http://10.0.0.9:6443"
    assert adm.d.server_of(str(conf / "kubelet.conf")) == "http://10.0.0.9:6443"
    assert adm.d.server_of(str(conf / "scheduler.conf")) == "http://10.0.0.12:6443"
    assert ("http://10.0.0.9:6443", "POST", "/bootstrap/join") in calls


def test_a_worker_join_runs_no_control_plane(kubeadm_join):
    _adm, conf, peer, _calls, run = kubeadm_join
    run(control_plane=False)
    assert not (conf / "manifests").exists()
    assert not (conf / "admin.conf").exists()
    assert not peer.exists()
    assert (conf / "kubelet.conf").exists()
