"""Shared code of the Kubernetes test doubles (kubeadm, kubectl, helm, kubelet and the API
server stand-in), test bed only.

The API server stand-in (gpufleet-double-kube-apiserver) keeps every object in one JSON file
on the first control-plane node and answers plain HTTP on port 6443; kubectl and kubeadm
reach it at the ``server:`` of their kubeconfig, as the real tools reach the real one.
Every invocation of a double is recorded in /var/log/gpufleet-doubles/<tool>.log as a JSON
line: its argv with secret values replaced by their SHA-256 (a token never reaches a log),
and what it did.
"""

import hashlib
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request

import yaml

# Where the logs and the cluster's state are kept; a unit test that runs the doubles outside the test
# bed points them at its own directories.
LOG_DIR = os.environ.get("GPUFLEET_DOUBLE_LOG_DIR", "/var/log/gpufleet-doubles")
STATE_DIR = os.environ.get("GPUFLEET_DOUBLE_K8S_STATE_DIR", "/var/lib/gpufleet-doubles/k8s")
TOKEN_RE = re.compile(r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b")
KEY_RE = re.compile(r"\b[0-9a-f]{64}\b")
VERSION = os.environ.get("GPUFLEET_DOUBLE_K8S_VERSION", "@K8S_VERSION@")


def digest(secret):
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()[:16]


def redact(text):
    """Tokens and certificate keys replaced by their digests (as a log may hold them)."""
    text = TOKEN_RE.sub(lambda m: "<token " + digest(m.group(0)) + ">", text)
    return KEY_RE.sub(lambda m: "<key " + digest(m.group(0)) + ">", text)


def log(tool, argv, **what):
    os.makedirs(LOG_DIR, exist_ok=True)
    entry = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": os.uname().nodename,
        "argv": [redact(a) for a in argv],
    }
    entry.update(what)
    with open(os.path.join(LOG_DIR, tool + ".log"), "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")


def fail(tool, message, code=1):
    # kubectl prints the API server's refusals as they come ("Error from server (NotFound): ..."),
    # its own errors after "error: ".
    plain = tool == "kubeadm" or message.startswith("Error from server")
    print(message if plain else f"error: {message}", file=sys.stderr)
    sys.exit(code)


def load_docs(path):
    """The YAML documents of a file, or of standard input for ``-`` (kubectl's ``-f -``)."""
    if path == "-":
        return [d for d in yaml.safe_load_all(sys.stdin.read()) if d]
    with open(path, encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d]


def selector_terms(selector):
    """The terms of a label selector, split at the commas that are not inside a set's parentheses."""
    terms, depth, term = [], 0, ""
    for ch in selector or "":
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(term.strip())
            term = ""
        else:
            term += ch
    return [t for t in [*terms, term.strip()] if t]


SET_TERM = re.compile(r"^(!?)([^\s!=()]+)\s+(in|notin)\s+\(([^)]*)\)$")


def selector_matches(selector, labels):
    """kubectl's label selector against a label dict: equality-based terms (``a=b``, ``a==b``, ``a!=b``),
    set-based ones (``a in (x,y)``, ``a notin (x,y)``) and existence (``a``, ``!a``)."""
    labels = labels or {}
    for term in selector_terms(selector):
        m = SET_TERM.match(term)
        if m:
            values = {v.strip() for v in m.group(4).split(",") if v.strip()}
            # A missing label is in no set: ``in`` fails, ``notin`` holds.
            if (labels.get(m.group(2)) in values) != (m.group(3) == "in"):
                return False
        elif "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def server_of(kubeconfig):
    """The API server URL of a kubeconfig (its first cluster)."""
    with open(kubeconfig, encoding="utf-8") as fh:
        cfg = yaml.safe_load(fh)
    return cfg["clusters"][0]["cluster"]["server"]


def kubeconfig(server, user):
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": f"{user}@kubernetes",
            "clusters": [{"name": "kubernetes", "cluster": {"server": server}}],
            "users": [{"name": user, "user": {"username": user}}],
            "contexts": [{"name": f"{user}@kubernetes", "context": {"cluster": "kubernetes", "user": user}}],
        }
    )


def call(server, method, path, body=None):
    """One request to the API server stand-in: (status, decoded JSON)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        server.rstrip("/") + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")
    except (urllib.error.URLError, OSError) as exc:
        return 0, {"message": f"dial tcp {server}: connect: connection refused ({exc})"}


def key_of(obj):
    """(kind, namespace, name) of an object; cluster-scoped kinds have namespace ''."""
    meta = obj.get("metadata") or {}
    kind = obj.get("kind", "")
    ns = "" if kind in CLUSTER_SCOPED else (meta.get("namespace") or "default")
    return kind, ns, meta.get("name", "")


CLUSTER_SCOPED = {
    "Node",
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "ResourceFlavor",
    "ClusterQueue",
    "Installation",
    "APIServer",
    "PriorityClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "StorageClass",
    "Cohort",
    "WorkloadPriorityClass",
    "Topology",
}


def subset(want, have):
    """True when every field of ``want`` is in ``have`` with the same value (kubectl diff's view of
    what an apply would change, ignoring fields the server adds)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and subset(v, have[k]) for k, v in want.items())
    if isinstance(want, list):
        return (
            isinstance(have, list)
            and len(want) == len(have)
            and all(subset(w, h) for w, h in zip(want, have, strict=True))
        )
    return want == have
