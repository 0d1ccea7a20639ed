"""kubernetes_node's join.yml for a control-plane node, as Ansible runs it: etcd's health first
(no token, key or join while a member is down), then a certificate key for this join only,
uploaded with the certificates and given to the join, never printed and not left on disk.

ansible-playbook runs the tasks on local hosts (cp01 the first control-plane node, cp02 joining);
kubectl, kubeadm and openssl are stand-ins on PATH that log every call and answer from files."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from lab_playbook import VENV_BIN, ansible_env

pytestmark = [
    pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv"),
    # join.yml joins only a node without a kubelet configuration
    pytest.mark.skipif(Path("/etc/kubernetes/kubelet.conf").exists(), reason="this machine is a Kubernetes node"),
]

STUBS = {
    # kubectl -n kube-system exec etcd-cp01 -- etcdctl ... endpoint health --cluster -w json
    "kubectl": """#!/bin/sh
echo "kubectl $*" >> "$STUB_DIR/calls"
cat "$STUB_DIR/etcd"
exit "$(cat "$STUB_DIR/etcd_rc")"
""",
    "kubeadm": """#!/bin/sh
echo "kubeadm $*" >> "$STUB_DIR/calls"
case "$1 $2" in
  "certs certificate-key") echo 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef ;;
  "token create") echo abcdef.0123456789abcdef ;;
  "join --config") cp "$3" "$STUB_DIR/join.yaml" ;;
esac
""",
    "openssl": """#!/bin/sh
# Reads its input as openssl pkey does: a writer into the pipe must not meet a closed end.
case " $* " in *" -pubin "*) cat >/dev/null ;; esac
echo "public key"
""",
}
KEY = "0123456789abcdef" * 4
HEALTHY = [
    {"endpoint": "https://10.0.0.11:2379", "health": True, "took": "1.7ms"},
    {"endpoint": "https://10.0.0.13:2379", "health": True, "took": "1.9ms"},
]
INVENTORY = """all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  children:
    k8s_cp:
      hosts: {cp01: {}, cp02: {}, cp03: {}}
"""
PLAYBOOK = """- name: Join cp02 as a control-plane node
  hosts: cp02
  gather_facts: false
  vars:
    gpufleet_brief: {cluster: {name: t, control_plane: kubernetes}, controllers: {group: k8s_cp}, pools: []}
    gpufleet_pool: {}
  tasks:
    - name: Join
      ansible.builtin.include_role:
        name: kubernetes_node
        tasks_from: join
      vars:
        _kubernetes_node_join_control_plane: true
        kubernetes_node_api_endpoint: 10.0.0.10:6443
        kubernetes_node_address: 10.0.0.12
"""


def run(tmp_path: Path, etcd: str, rc: int = 0) -> tuple[subprocess.CompletedProcess, list[str], Path]:
    stubs, state, conf = tmp_path / "bin", tmp_path / "state", tmp_path / "conf"
    for d in (stubs, state, conf):
        d.mkdir()
    for name, text in STUBS.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    (state / "etcd").write_text(etcd)
    (state / "etcd_rc").write_text(str(rc))
    (tmp_path / "hosts.yml").write_text(INVENTORY)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", "hosts.yml", "play.yml", "-e", f"kubernetes_node_config_dir={conf}"],
        cwd=tmp_path,
        env=ansible_env(stubs, STUB_DIR=str(state)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    calls = (state / "calls").read_text().splitlines() if (state / "calls").exists() else []
    return proc, calls, state


def test_an_unhealthy_member_stops_the_join_before_any_token_or_key(tmp_path):
    down = [
        *HEALTHY,
        {"endpoint": "https://10.0.0.13:2379", "health": False, "took": "5s", "error": "context deadline exceeded"},
    ]
    proc, calls, _state = run(tmp_path, json.dumps(down[:1] + down[2:]), rc=1)
    assert proc.returncode != 0
    assert [c.split()[0] for c in calls] == ["kubectl"]
    assert "exec etcd-cp01 -- etcdctl" in calls[0] and "endpoint health --cluster -w json" in calls[0]
    out = proc.stdout + proc.stderr
    assert "cp02 was not joined as a control-plane node: etcd is not healthy" in out
    assert "https://10.0.0.13:2379: context deadline exceeded" in out


def test_no_member_list_stops_the_join(tmp_path):
    proc, calls, _state = run(tmp_path, "Error: context deadline exceeded\n", rc=1)
    assert proc.returncode != 0
    assert not [c for c in calls if c.startswith("kubeadm")]
    assert "etcdctl printed no member list" in proc.stdout + proc.stderr


def test_a_healthy_cluster_gets_a_key_for_this_join_only(tmp_path):
    proc, calls, state = run(tmp_path, json.dumps(HEALTHY))
    assert proc.returncode == 0, proc.stdout[-3000:]
    kubeadm = [c for c in calls if c.startswith("kubeadm")]
    assert [re.sub(r" --.*", "", c) for c in kubeadm] == [
        "kubeadm token create",
        "kubeadm certs certificate-key",
        "kubeadm init phase upload-certs",
        "kubeadm join",
    ]
    assert f"--upload-certs --certificate-key {KEY} --config" in kubeadm[2]
    join = (state / "join.yaml").read_text()
    assert f"certificateKey: {KEY}" in join and "apiServerEndpoint: 10.0.0.10:6443" in join
    # never printed, and nothing of the join left in the configuration directory
    assert KEY not in proc.stdout + proc.stderr
    assert "abcdef.0123456789abcdef" not in proc.stdout + proc.stderr
    assert list((tmp_path / "conf").iterdir()) == []


ROLE_PLAYBOOK = """- name: The control plane's role on three nodes{serial_name}
  hosts: k8s_cp
  gather_facts: false
{serial}  vars:
    gpufleet_brief:
      cluster: {{name: t, control_plane: kubernetes}}
      controllers: {{group: k8s_cp}}
      pools: []
      networks: {{management: {{cidr: 10.0.0.0/24}}, kubernetes: {{api_vip: 10.0.0.9}}}}
      software: {{kubernetes: "1.33.4"}}
  roles:
    - kubernetes_control_plane
"""


def run_role(tmp_path: Path, serial: bool) -> subprocess.CompletedProcess:
    (tmp_path / "hosts.yml").write_text(INVENTORY)
    text = ROLE_PLAYBOOK.format(
        serial="  serial: 1\n" if serial else "", serial_name=", one at a time" if serial else ""
    )
    (tmp_path / "play.yml").write_text(text)
    return subprocess.run(
        # The join's own tasks only (the init and the pod network are other tags); --check: no
        # node joins, a node without a kubelet configuration only previews it.
        [
            str(VENV_BIN / "ansible-playbook"),
            "-i",
            "hosts.yml",
            "play.yml",
            "--check",
            "--tags",
            "kubernetes_control_plane_join",
        ],
        cwd=tmp_path,
        env=ansible_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_role_refuses_to_join_several_control_plane_nodes_at_once(tmp_path):
    # Each join uploads the certificates under a new key, which breaks the key of a join running
    # beside it: a batch of two joining nodes fails on every host before any join task runs.
    proc = run_role(tmp_path, serial=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "this play's batch holds cp02, cp03: run it with serial: 1" in " ".join(out.split())
    assert re.search(r"cp01 +: ok=\d+ +changed=0 +unreachable=0 +failed=1", out)
    assert re.search(r"cp03 +: ok=\d+ +changed=0 +unreachable=0 +failed=1", out)
    assert "Look for this node's kubelet configuration" not in out


def test_the_role_joins_one_node_per_batch(tmp_path):
    proc = run_role(tmp_path, serial=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    # The first node initialises (another tag); each of the others reaches its join's first task.
    assert out.count("TASK [kubernetes_node : Look for this node's kubelet configuration") == 2
