"""batch/v1 Jobs as the kubectl stand-in plays them (gpufleet test double), test bed only.

What a cluster does with a Job, played by the kubectl stand-in at each call (there is no controller
running between calls: every ``kubectl get``, ``wait``, ``logs`` and ``delete`` first brings the
Jobs up to date, as the controllers would have by then):

* the API server: the Job is decoded strictly (an unknown field is refused with the API's
  ``strict decoding error``, as ``kubectl create`` asks for by default since 1.27) and validated
  (a pod template without ``restartPolicy`` Never or OnFailure, a podFailurePolicy without Never,
  an Indexed Job without completions, a container without an image, a mount of an unknown volume
  are refused with the API's messages); it gives the Job a uid;
* Kueue (v1beta1, v0.14): a Job labelled ``kueue.x-k8s.io/queue-name`` is suspended by its webhook
  and gets a Workload (``job-<name>-<hash>``, owned by the Job) whose pod set asks for the pod's
  resources; the LocalQueue's ClusterQueue admits it when one of its flavors (in order) matches the
  pod's node selector and has the quota left (nominal quota less what its other admitted, unfinished
  Workloads use): conditions ``QuotaReserved`` and ``Admitted`` (their lastTransitionTime, one-second
  resolution as the API's times), ``status.admission``; then the Job is unsuspended and the flavor's
  node labels and tolerations are added to its pod template. Otherwise the Workload stays
  ``QuotaReserved=False`` (reason ``Pending`` or ``Inadmissible``, Kueue's messages) and the Job
  suspended;
* the Job controller: an unsuspended Job gets a pod per missing completion index
  (``<job>-<index>-<5 random characters>``, labels ``batch.kubernetes.io/job-name``, ``job-name``,
  ``batch.kubernetes.io/job-completion-index``, ``controller-uid``); a failed pod is counted in
  ``status.failed`` (unless a podFailurePolicy rule ignores it) and replaced while the failures stay
  within ``backoffLimit``, else the Job fails (``BackoffLimitExceeded``); a succeeded pod completes its
  index and the Job (``SuccessCriteriaMet``, ``Complete``; the Workload ``Finished``); past its
  ``activeDeadlineSeconds`` (counted from its start, after Kueue unsuspended it) its running pods
  are stopped and the Job fails (``DeadlineExceeded``);
* the scheduler: the pod is placed by the same rules as an MPIJob's workers (``place`` of kubectl);
* the kubelet: the pod's container command runs on the node the scheduler placed it on (the
  production image's programs are that node's), reached over SSH at the Node's InternalIP with the
  test bed's key (``api.node_shell``), in a session of its own, with the container's environment
  alone, ``HOSTNAME`` and ``JOB_COMPLETION_INDEX``; its output, carried back by SSH, is the pod's
  log, and its exit code the container's (255 when the node could not be reached, as a lost node's
  pod ends). A ``hostPath`` volume of type DirectoryOrCreate is made on that node; a ``hostPath``
  the pod reads (the dataset, the weights) is that node's file. ``kubectl delete pod`` sends
  SIGTERM to the container's processes on the node, SIGKILL after the grace period, and the pod
  ends Failed (exit code 143 or 137) before its object is removed, as a pod deleted by a user does
  (no ``DisruptionTarget`` condition: that is for evictions and preemptions).
"""

import contextlib
import datetime
import hashlib
import json
import os
import random
import shlex
import subprocess
import time
import uuid

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
# Where the kubelet keeps, on the node, each running container's process group.
KUBELET_DIR = "/run/gpufleet-doubles/kubelet"
KUEUE_API = "kueue.x-k8s.io/v1beta1"
# The characters of a generated name's suffix (k8s.io/apimachinery/pkg/util/rand).
_ALNUM = "bcdfghjklmnpqrstvwxz2456789"

# Strict decoding: the fields of each object level a Job carries (Kubernetes 1.33's OpenAPI).
_FIELDS = {
    "job": {"apiVersion", "kind", "metadata", "spec", "status"},
    "metadata": {
        "name",
        "generateName",
        "namespace",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "managedFields",
        "selfLink",
    },
    "jobspec": {
        "activeDeadlineSeconds",
        "backoffLimit",
        "backoffLimitPerIndex",
        "completionMode",
        "completions",
        "managedBy",
        "manualSelector",
        "maxFailedIndexes",
        "parallelism",
        "podFailurePolicy",
        "podReplacementPolicy",
        "selector",
        "successPolicy",
        "suspend",
        "template",
        "ttlSecondsAfterFinished",
    },
    "template": {"metadata", "spec"},
    "podspec": {
        "activeDeadlineSeconds",
        "affinity",
        "automountServiceAccountToken",
        "containers",
        "dnsConfig",
        "dnsPolicy",
        "enableServiceLinks",
        "ephemeralContainers",
        "hostAliases",
        "hostIPC",
        "hostNetwork",
        "hostPID",
        "hostUsers",
        "hostname",
        "imagePullSecrets",
        "initContainers",
        "nodeName",
        "nodeSelector",
        "os",
        "overhead",
        "preemptionPolicy",
        "priority",
        "priorityClassName",
        "readinessGates",
        "resourceClaims",
        "resources",
        "restartPolicy",
        "runtimeClassName",
        "schedulerName",
        "schedulingGates",
        "securityContext",
        "serviceAccount",
        "serviceAccountName",
        "setHostnameAsFQDN",
        "shareProcessNamespace",
        "subdomain",
        "terminationGracePeriodSeconds",
        "tolerations",
        "topologySpreadConstraints",
        "volumes",
    },
    "container": {
        "args",
        "command",
        "env",
        "envFrom",
        "image",
        "imagePullPolicy",
        "lifecycle",
        "livenessProbe",
        "name",
        "ports",
        "readinessProbe",
        "resizePolicy",
        "resources",
        "restartPolicy",
        "securityContext",
        "startupProbe",
        "stdin",
        "stdinOnce",
        "terminationMessagePath",
        "terminationMessagePolicy",
        "tty",
        "volumeDevices",
        "volumeMounts",
        "workingDir",
    },
    "podfailurepolicy": {"rules"},
    "rule": {"action", "onExitCodes", "onPodConditions"},
    "env": {"name", "value", "valueFrom"},
    "resources": {"claims", "limits", "requests"},
    "volumemount": {"mountPath", "mountPropagation", "name", "readOnly", "recursiveReadOnly", "subPath", "subPathExpr"},
    "hostpath": {"path", "type"},
}


class JobError(Exception):
    """What the API server answers to a Job it refuses (kubectl prints it and exits 1)."""


def job_owner(meta: dict) -> dict:
    """The ownerReferences entry the Job controller (and Kueue) set on what a Job owns."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def now_text(t=None):
    return datetime.datetime.fromtimestamp(time.time() if t is None else t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds_since(text):
    return time.time() - datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC).timestamp()


def _unknown(obj, level, path):
    if not isinstance(obj, dict):
        return []
    return [f"{path}.{k}".lstrip(".") for k in obj if k not in _FIELDS[level]]


def unknown_fields(job):
    """The fields strict decoding refuses, as the API names them (spec.template.spec.containers[0].foo)."""
    out = _unknown(job, "job", "")
    out += _unknown(job.get("metadata"), "metadata", "metadata")
    spec = job.get("spec") or {}
    out += _unknown(spec, "jobspec", "spec")
    pfp = spec.get("podFailurePolicy")
    out += _unknown(pfp, "podfailurepolicy", "spec.podFailurePolicy")
    for i, rule in enumerate((pfp or {}).get("rules") or []):
        out += _unknown(rule, "rule", f"spec.podFailurePolicy.rules[{i}]")
    tpl = spec.get("template") or {}
    out += _unknown(tpl, "template", "spec.template")
    out += _unknown(tpl.get("metadata"), "metadata", "spec.template.metadata")
    pod = tpl.get("spec") or {}
    out += _unknown(pod, "podspec", "spec.template.spec")
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(pod.get(kind) or []):
            base = f"spec.template.spec.{kind}[{i}]"
            out += _unknown(c, "container", base)
            out += _unknown(c.get("resources"), "resources", f"{base}.resources")
            for j, e in enumerate(c.get("env") or []):
                out += _unknown(e, "env", f"{base}.env[{j}]")
            for j, m in enumerate(c.get("volumeMounts") or []):
                out += _unknown(m, "volumemount", f"{base}.volumeMounts[{j}]")
    for i, v in enumerate(pod.get("volumes") or []):
        out += _unknown(v.get("hostPath"), "hostpath", f"spec.template.spec.volumes[{i}].hostPath")
    return out


def validate(job):
    """Raise JobError with the API server's answer when it would refuse the Job."""
    name = (job.get("metadata") or {}).get("name", "")
    unknown = unknown_fields(job)
    if unknown:
        raise JobError(
            'Error from server (BadRequest): Job in version "v1" cannot be handled as a Job: strict decoding '
            "error: " + ", ".join(f'unknown field "{u}"' for u in unknown)
        )
    spec = job.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") or {}
    errs = []
    policy = pod.get("restartPolicy") or "Always"
    if policy not in ("OnFailure", "Never"):
        errs.append(
            f'spec.template.spec.restartPolicy: Unsupported value: "{policy}": supported values: "OnFailure", "Never"'
        )
    elif spec.get("podFailurePolicy") and policy != "Never":
        errs.append(
            f'spec.template.spec.restartPolicy: Invalid value: "{policy}": only "Never" is supported '
            "when podFailurePolicy is specified"
        )
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        errs.append("spec.completions: Required value: when completion mode is Indexed")
    if not pod.get("containers"):
        errs.append("spec.template.spec.containers: Required value")
    volumes = {v.get("name") for v in pod.get("volumes") or []}
    for i, c in enumerate(pod.get("containers") or []):
        if not c.get("image"):
            errs.append(f"spec.template.spec.containers[{i}].image: Required value")
        for j, m in enumerate(c.get("volumeMounts") or []):
            if m.get("name") not in volumes:
                errs.append(f'spec.template.spec.containers[{i}].volumeMounts[{j}].name: Not found: "{m.get("name")}"')
    if errs:
        raise JobError(f'The Job "{name}" is invalid: ' + (errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"))


# --- quantities and pod resources -----------------------------------------------------------------

_SUFFIX = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "m": 0.001,
}


def quantity(value):
    text = str(value)
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * _SUFFIX[suffix]
    return float(text)


def pod_requests(pod_spec):
    """The pod's requests, per resource (a limit without a request requests the limit)."""
    out = {}
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        asked = dict(res.get("limits") or {})
        asked.update(res.get("requests") or {})
        for k, v in asked.items():
            out[k] = out.get(k, 0) + quantity(v)
    return out


def _fmt(q):
    return str(int(q)) if float(q).is_integer() else f"{q:g}"


# --- Kueue ----------------------------------------------------------------------------------------


def _condition(ctype, status, reason, message, t=None):
    return {"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": now_text(t)}


def workload_name(job):
    meta = job["metadata"]
    return f"job-{meta['name']}-" + hashlib.sha256(meta["uid"].encode()).hexdigest()[:5]


def _usage(api, cq_name, exclude):
    """What the ClusterQueue's other admitted, unfinished Workloads use: {(flavor, resource): quantity}."""
    used = {}
    for wl in api.get("Workload", None)["items"]:
        if wl["metadata"]["name"] == exclude:
            continue
        st = wl.get("status") or {}
        conds = {c["type"]: c["status"] for c in st.get("conditions") or []}
        adm = st.get("admission") or {}
        if (
            adm.get("clusterQueue") != cq_name
            or conds.get("QuotaReserved") != "True"
            or conds.get("Finished") == "True"
        ):
            continue
        for ps in adm.get("podSetAssignments") or []:
            for res, qty in (ps.get("resourceUsage") or {}).items():
                key = ((ps.get("flavors") or {}).get(res), res)
                used[key] = used.get(key, 0) + quantity(qty)
    return used


def admit(api, job, wl):
    """Kueue's flavor assignment of the Workload: (flavor, None) or (None, (reason, message))."""
    ns = job["metadata"]["namespace"]
    queue = job["metadata"]["labels"][QUEUE_LABEL]
    lq = api.find("LocalQueue", ns, queue)
    if lq is None:
        return None, ("Inadmissible", f"LocalQueue {queue} doesn't exist")
    cq = api.find("ClusterQueue", "", (lq.get("spec") or {}).get("clusterQueue", ""))
    if cq is None:
        return None, ("Inadmissible", f"ClusterQueue {(lq.get('spec') or {}).get('clusterQueue')} doesn't exist")
    pod_spec = job["spec"]["template"]["spec"]
    asked = pod_requests(pod_spec)
    used = _usage(api, cq["metadata"]["name"], wl["metadata"]["name"])
    why = []
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        covered = set(group.get("coveredResources") or [])
        for fq in group.get("flavors") or []:
            flavor = api.find("ResourceFlavor", "", fq["name"]) or {}
            labels = (flavor.get("spec") or {}).get("nodeLabels") or {}
            selector = pod_spec.get("nodeSelector") or {}
            if any(k in labels and labels[k] != v for k, v in selector.items()):
                why.append(f"flavor {fq['name']} doesn't match node affinity")
                continue
            nominal = {r["name"]: quantity(r["nominalQuota"]) for r in fq.get("resources") or []}
            short = [
                (res, qty, nominal.get(res, 0) - used.get((fq["name"], res), 0))
                for res, qty in asked.items()
                if res in covered and qty > nominal.get(res, 0) - used.get((fq["name"], res), 0)
            ]
            if not short:
                return (fq["name"], labels, (flavor.get("spec") or {}).get("tolerations") or []), None
            res, qty, left = short[0]
            why.append(
                f"insufficient quota for {res} in flavor {fq['name']}, request > maximum capacity "
                f"({_fmt(qty)} > {_fmt(nominal.get(res, 0))})"
                if qty > nominal.get(res, 0)
                else f"insufficient unused quota for {res} in flavor {fq['name']}, {_fmt(qty - left)} more needed"
            )
    return None, ("Pending", "couldn't assign flavors to pod set main: " + ", ".join(why or ["no flavor"]))


def queue_job(api, job):
    """Kueue's part on a new queued Job: its Workload, admitted (Job unsuspended, flavor injected) or pending."""
    meta = job["metadata"]
    spec = job["spec"]
    created = time.time()
    wl = {
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": {
            "name": workload_name(job),
            "namespace": meta["namespace"],
            "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
            "ownerReferences": [job_owner(meta)],
            "creationTimestamp": now_text(created),
        },
        "spec": {
            "queueName": meta["labels"][QUEUE_LABEL],
            "active": True,
            "priority": 0,
            "podSets": [{"name": "main", "count": int(spec.get("parallelism", 1)), "template": spec["template"]}],
        },
    }
    chosen, why = admit(api, job, wl)
    if chosen is None:
        wl["status"] = {"conditions": [_condition("QuotaReserved", "False", why[0], why[1])]}
        api.put(wl)
        return wl
    flavor, labels, tolerations = chosen
    asked = pod_requests(spec["template"]["spec"])
    count = int(spec.get("parallelism", 1))
    cq = api.find("LocalQueue", meta["namespace"], meta["labels"][QUEUE_LABEL])["spec"]["clusterQueue"]
    wl["status"] = {
        "conditions": [
            _condition("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}"),
            _condition("Admitted", "True", "Admitted", "The workload is admitted"),
        ],
        "admission": {
            "clusterQueue": cq,
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": count,
                    "flavors": dict.fromkeys(asked, flavor),
                    "resourceUsage": {res: _fmt(q * count) for res, q in asked.items()},
                }
            ],
        },
    }
    api.put(wl)
    pod = spec["template"]["spec"]
    pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **labels}
    pod["tolerations"] = (pod.get("tolerations") or []) + [
        t for t in tolerations if t not in (pod.get("tolerations") or [])
    ]
    spec["suspend"] = False
    api.put(job)
    return wl


# --- the kubelet: the container as a process on this host -----------------------------------------


def _files(api, pod):
    base = os.path.join(api.logs_dir, pod["metadata"]["namespace"], pod["metadata"]["name"])
    return base + ".log", base + ".pid", base + ".rc"


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _reap(pid):
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _node_files(pod):
    """The container's process-group file on its node."""
    meta = pod["metadata"]
    return f"{KUBELET_DIR}/{meta['namespace']}/{meta['name']}.pid"


def run_container(api, pod, index):
    """Start the pod's container on its node, detached: its output the pod's log; (pid of the local
    SSH session, None) or (None, why)."""
    container = pod["spec"]["containers"][0]
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    if not argv:
        return None, "the production image's entrypoint is unknown to the test double: give the container a command"
    node = pod["spec"]["nodeName"]
    shell, why = api.node_shell(node)
    if shell is None:
        return None, why
    log, pidfile, rcfile = _files(api, pod)
    os.makedirs(os.path.dirname(log), exist_ok=True)
    node_pid = _node_files(pod)
    dirs = [os.path.dirname(node_pid)] + [
        (vol.get("hostPath") or {})["path"]
        for vol in pod["spec"].get("volumes") or []
        if (vol.get("hostPath") or {}).get("type") == "DirectoryOrCreate"
    ]
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    env.update({e["name"]: str(e.get("value", "")) for e in container.get("env") or []})
    env.update(HOSTNAME=pod["metadata"]["name"], JOB_COMPLETION_INDEX=str(index))
    # On the node: the container in a session of its own (its process group is what a deletion
    # signals), its group recorded, and this shell's exit code the container's.
    script = "\n".join(
        [
            "mkdir -p " + " ".join(shlex.quote(p) for p in dirs) + " || exit 127",
            "cd /",
            "env -i "
            + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
            + " setsid "
            + " ".join(shlex.quote(a) for a in argv)
            + " </dev/null 2>&1 &",
            f"echo $! > {shlex.quote(node_pid)}",
            "wait $!",
        ]
    )
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", '"$@"; echo $? > "$GPUFLEET_DOUBLE_RC"', "sh", *shell, script],
            env={**os.environ, "GPUFLEET_DOUBLE_RC": rcfile},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd="/",
        )
    with open(pidfile, "w", encoding="utf-8") as fh:
        fh.write(str(proc.pid))
    return proc.pid, None


def _pid(api, pod):
    try:
        with open(_files(api, pod)[1], encoding="utf-8") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def container_exit(api, pod):
    """The container's exit code once it ended by itself, else None (still running)."""
    try:
        with open(_files(api, pod)[2], encoding="utf-8") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        pid = _pid(api, pod)
        if pid is not None:
            _reap(pid)
            if not _alive(pid):
                return 137  # gone without writing its code: killed
        return None


def kill_container(api, pod, grace_s):
    """SIGTERM to the container's processes on its node, SIGKILL after the grace period; its exit
    code (its own when it had ended already; 137 when its node could not be reached)."""
    shell, _why = api.node_shell(pod["spec"].get("nodeName") or "")
    if shell is None or _pid(api, pod) is None:
        return 137
    ticks = max(1, int(grace_s / 0.05))
    script = "\n".join(
        [
            f"pf={shlex.quote(_node_files(pod))}",
            '[ -s "$pf" ] || exit 3',
            'pg=$(cat "$pf")',
            'kill -TERM "-$pg" 2>/dev/null || exit 3',
            "i=0",
            'while kill -0 "-$pg" 2>/dev/null; do',
            f'  i=$((i + 1)); if [ "$i" -ge {ticks} ]; then kill -KILL "-$pg"; echo 137; exit 0; fi',
            "  sleep 0.05",
            "done",
            "echo 143",
        ]
    )
    res = subprocess.run([*shell, script], stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    code = int(res.stdout.strip()) if res.returncode == 0 and res.stdout.strip().isdigit() else None
    # The SSH session ends with the container: wait for it, so that the log is complete.
    pid = _pid(api, pod)
    for _ in range(200):
        _reap(pid)
        if not _alive(pid):
            break
        time.sleep(0.05)
    if code is None:  # it had ended already, or its node could not be reached: killed, as far as we know
        code = container_exit(api, pod)
    return 137 if code is None else code


# --- the Job controller ---------------------------------------------------------------------------


def _pods_of(api, job):
    meta = job["metadata"]
    return list(api.get("Pod", meta["namespace"], None, f"{JOB_NAME_LABEL}={meta['name']}")["items"])


def _suffix():
    return "".join(random.choice(_ALNUM) for _ in range(5))


def start_pod(api, job, index):
    meta, spec = job["metadata"], job["spec"]
    tpl = json.loads(json.dumps(spec["template"]))
    labels = {
        **((tpl.get("metadata") or {}).get("labels") or {}),
        JOB_NAME_LABEL: meta["name"],
        "job-name": meta["name"],
        "controller-uid": meta["uid"],
        "batch.kubernetes.io/controller-uid": meta["uid"],
    }
    annotations = {}
    if spec.get("completionMode") == "Indexed":
        labels[INDEX_LABEL] = str(index)
        annotations[INDEX_LABEL] = str(index)
    name = (
        f"{meta['name']}-{index}-{_suffix()}"
        if spec.get("completionMode") == "Indexed"
        else f"{meta['name']}-{_suffix()}"
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "uid": str(uuid.uuid4()),
            "labels": labels,
            "annotations": annotations,
            "finalizers": ["batch.kubernetes.io/job-tracking"],
            "ownerReferences": [job_owner(meta)],
            "creationTimestamp": now_text(),
        },
        "spec": tpl["spec"],
    }
    used = {}
    for other in api.get("Pod", None)["items"]:
        node = (other.get("spec") or {}).get("nodeName")
        if node and (other.get("status") or {}).get("phase") in ("Running", "Pending"):
            for res, qty in pod_requests(other["spec"]).items():
                used[(node, res)] = used.get((node, res), 0) + qty
    node, why = api.place(api.get("Node", None)["items"], pod["spec"], used)
    if node is None:
        pod["status"] = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": why}],
        }
        api.put(pod)
        return pod
    pod["spec"]["nodeName"] = node
    pid, why = run_container(api, pod, index)
    container = pod["spec"]["containers"][0]
    if pid is None:
        pod["status"] = {"phase": "Failed", "reason": "StartError", "message": why}
    else:
        pod["status"] = {
            "phase": "Running",
            "startTime": now_text(),
            "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container.get("image"),
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now_text()}},
                }
            ],
        }
    api.put(pod)
    return pod


def _ignored(job, pod):
    """Whether a podFailurePolicy rule ignores this failed pod (its conditions or exit code)."""
    conds = {c.get("type"): c.get("status") for c in (pod.get("status") or {}).get("conditions") or []}
    code = (
        (((pod.get("status") or {}).get("containerStatuses") or [{}])[0].get("state") or {}).get("terminated") or {}
    ).get("exitCode")
    for rule in ((job["spec"].get("podFailurePolicy") or {}).get("rules")) or []:
        if any(conds.get(p.get("type")) == p.get("status", "True") for p in rule.get("onPodConditions") or []):
            return rule.get("action") == "Ignore"
        on_codes = rule.get("onExitCodes") or {}
        if on_codes and code is not None and (code in on_codes.get("values", [])) == (on_codes.get("operator") == "In"):
            return rule.get("action") == "Ignore"
    return False


def _finish_pod(api, pod, code):
    phase = "Succeeded" if code == 0 else "Failed"
    container = pod["spec"]["containers"][0]
    pod["status"] = {
        **(pod.get("status") or {}),
        "phase": phase,
        "containerStatuses": [
            {
                "name": container["name"],
                "image": container.get("image"),
                "ready": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Completed" if code == 0 else "Error",
                        "finishedAt": now_text(),
                    }
                },
            }
        ],
    }
    api.put(pod)


def _set_job_condition(job, ctype, reason, message):
    conds = [c for c in (job.get("status") or {}).get("conditions") or [] if c.get("type") != ctype]
    conds.append(
        {
            "type": ctype,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastProbeTime": now_text(),
            "lastTransitionTime": now_text(),
        }
    )
    job.setdefault("status", {})["conditions"] = conds


def _finished(job):
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def reconcile(api, job):
    """One pass of the Job controller: count ended pods (the controller's finalizer
    batch.kubernetes.io/job-tracking is removed from a pod once it is counted), complete or fail the
    Job, replace pods."""
    spec = job["spec"]
    status = job.setdefault("status", {})
    if _finished(job) or spec.get("suspend"):
        return job
    status.setdefault("startTime", now_text())
    pods = _pods_of(api, job)
    # Past activeDeadlineSeconds (from the start of the unsuspended Job) the Job controller stops
    # its running pods and fails the Job, whatever its pods would have done.
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and _seconds_since(status["startTime"]) >= int(deadline):
        for pod in pods:
            if (pod.get("status") or {}).get("phase") == "Running":
                code = container_exit(api, pod)
                _finish_pod(api, pod, kill_container(api, pod, 0) if code is None else code)
        status["active"] = 0
        message = "Job was active longer than specified deadline"
        _set_job_condition(job, "FailureTarget", "DeadlineExceeded", message)
        _set_job_condition(job, "Failed", "DeadlineExceeded", message)
        api.put(job)
        return job
    for pod in pods:
        if (pod.get("status") or {}).get("phase") == "Running":
            code = container_exit(api, pod)
            if code is not None:
                _finish_pod(api, pod, code)
    failed, succeeded, active, done_indexes = int(status.get("failed", 0)), int(status.get("succeeded", 0)), 0, set()
    for pod in pods:
        meta, phase = pod["metadata"], (pod.get("status") or {}).get("phase")
        index = int((meta.get("labels") or {}).get(INDEX_LABEL, 0))
        uncounted = "batch.kubernetes.io/job-tracking" in (meta.get("finalizers") or [])
        if phase == "Succeeded":
            done_indexes.add(index)
            succeeded += 1 if uncounted else 0
        elif phase == "Failed":
            failed += 1 if uncounted and not _ignored(job, pod) else 0
        elif phase in ("Running", "Pending"):
            active += 1
        if uncounted and phase in ("Succeeded", "Failed"):
            meta["finalizers"] = [f for f in meta["finalizers"] if f != "batch.kubernetes.io/job-tracking"]
            api.put(pod)
    status.update(failed=failed, succeeded=succeeded, active=active)
    completions = int(spec.get("completions", 1))
    if failed > int(spec.get("backoffLimit", 6)):
        for pod in pods:
            if (pod.get("status") or {}).get("phase") == "Running":
                _finish_pod(api, pod, kill_container(api, pod, 0))
        status["active"] = 0
        _set_job_condition(job, "FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
        _set_job_condition(job, "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    elif succeeded >= completions:
        status["completionTime"] = now_text()
        status["completedIndexes"] = ",".join(str(i) for i in sorted(done_indexes))
        _set_job_condition(job, "SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods")
        _set_job_condition(job, "Complete", "CompletionsReached", "Reached expected number of succeeded pods")
        wl = api.find("Workload", job["metadata"]["namespace"], workload_name(job))
        if wl is not None:
            wl["status"]["conditions"].append(_condition("Finished", "True", "Succeeded", "Job finished successfully"))
            api.put(wl)
    else:
        running = {
            int((p["metadata"].get("labels") or {}).get(INDEX_LABEL, 0))
            for p in pods
            if (p.get("status") or {}).get("phase") in ("Running", "Pending")
        }
        for index in range(min(int(spec.get("parallelism", 1)), completions)):
            if index not in running and index not in done_indexes:
                start_pod(api, job, index)
                status["active"] = status.get("active", 0) + 1
    api.put(job)
    return job


def create(api, job):
    """A new Job, after the API server accepted it: Kueue's part, then the controller's."""
    meta = job["metadata"]
    meta.setdefault("uid", str(uuid.uuid4()))
    meta.setdefault("creationTimestamp", now_text())
    meta.setdefault("namespace", "default")
    if QUEUE_LABEL in (meta.get("labels") or {}):
        job["spec"]["suspend"] = True  # Kueue's webhook
        api.put(job)
        queue_job(api, job)
    api.put(job)
    return reconcile(api, job)


def sync(api, ns=None):
    """Bring every unfinished Job up to date (the controllers' work since the last call)."""
    for job in api.get("Job", ns)["items"]:
        if not _finished(job) and not (job.get("spec") or {}).get("suspend"):
            reconcile(api, job)


def delete_pod(api, ns, name, grace_s=30.0):
    """kubectl delete pod: the container stopped (SIGTERM, SIGKILL after the grace period), the pod
    Failed, its object removed, and its Job's controller told (which replaces it)."""
    pod = api.find("Pod", ns, name)
    if pod is None:
        raise JobError(f'Error from server (NotFound): pods "{name}" not found')
    if (pod.get("status") or {}).get("phase") == "Running":
        code = container_exit(api, pod)
        _finish_pod(api, pod, kill_container(api, pod, grace_s) if code is None else code)
    job_name = (pod["metadata"].get("labels") or {}).get(JOB_NAME_LABEL)
    job = api.find("Job", ns, job_name) if job_name else None
    if job is not None:
        reconcile(api, job)
    api.delete("Pod", ns, name)
    return pod


def delete_job(api, ns, name):
    """kubectl delete job (background propagation): its pods stopped and removed, its Workload removed."""
    job = api.find("Job", ns, name)
    if job is None:
        raise JobError(f'Error from server (NotFound): jobs.batch "{name}" not found')
    for pod in _pods_of(api, job):
        if (pod.get("status") or {}).get("phase") == "Running":
            kill_container(api, pod, 1.0)
        api.delete("Pod", ns, pod["metadata"]["name"])
    api.delete("Job", ns, name)
    if job["metadata"].get("uid"):
        wl = api.find("Workload", ns, workload_name(job))
        if wl is not None:
            api.delete("Workload", ns, wl["metadata"]["name"])


def wait_job(api, ns, name, condition, timeout_s):
    """kubectl wait --for=condition=C job/NAME: the controllers keep working while it waits."""
    deadline = time.monotonic() + timeout_s
    while True:
        job = api.find("Job", ns, name)
        if job is None:
            raise JobError(f'Error from server (NotFound): jobs.batch "{name}" not found')
        if not _finished(job) and not job["spec"].get("suspend"):
            job = reconcile(api, job)
        if any(
            c.get("type", "").lower() == condition.lower() and c.get("status") == "True"
            for c in (job.get("status") or {}).get("conditions") or []
        ):
            return True
        if time.monotonic() >= deadline or _finished(job):
            return False
        time.sleep(0.2)
