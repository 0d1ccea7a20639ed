"""The Slurm daemon check of the acceptance: module_utils/ops/daemons.py and its filters."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.control_daemons import (
    control_daemon_targets,
    control_daemons_down,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import daemons

CTL_UNITS = ["slurmctld", "munge", "slurmdbd"]
NODE_UNITS = ["munge", "slurmd"]


def result(host: str, units: list[str], stdout: str, rc: int, role: str = "node", **extra) -> dict:
    """One item of a registered loop over control_daemon_targets, as ansible.builtin.command leaves it."""
    return {
        "item": {"host": host, "units": units, "role": role},
        "stdout": stdout,
        "stdout_lines": stdout.splitlines(),
        "stderr": extra.pop("stderr", ""),
        "rc": rc,
        "changed": False,
        "failed": False,
        **extra,
    }


def healthy() -> list[dict]:
    return [
        result("lab-ctl01", CTL_UNITS, "active\nactive\nactive", 0, "controller"),
        result("lab-gpu01", NODE_UNITS, "active\nactive", 0),
        result("lab-gpu02", NODE_UNITS, "active\nactive", 0),
    ]


def test_targets_controller_first_then_each_node():
    assert daemons.targets("lab-ctl01", CTL_UNITS, ["lab-gpu01", "lab-gpu02", "lab-gpu01"], NODE_UNITS) == [
        {"host": "lab-ctl01", "units": CTL_UNITS, "role": "controller"},
        {"host": "lab-gpu01", "units": NODE_UNITS, "role": "node"},
        {"host": "lab-gpu02", "units": NODE_UNITS, "role": "node"},
    ]


def test_targets_controller_that_is_a_node_is_asked_once_for_both():
    assert daemons.targets("aio01", ["slurmctld", "munge"], ["aio01"], NODE_UNITS) == [
        {"host": "aio01", "units": ["slurmctld", "munge", "slurmd"], "role": "controller"}
    ]


def test_targets_empty_unit_lists_turn_the_check_off():
    assert daemons.targets("lab-ctl01", [], ["lab-gpu01"], []) == []
    assert control_daemon_targets("lab-ctl01", [], ["lab-gpu01"], NODE_UNITS) == [
        {"host": "lab-gpu01", "units": NODE_UNITS, "role": "node"}
    ]


def test_every_daemon_running_is_no_violation():
    assert daemons.check(healthy(), "multi-node") == {"down": [], "violations": []}


@pytest.mark.parametrize(
    ("index", "stdout", "rc", "host", "unit", "daemon", "state"),
    [
        # systemctl is-active slurmctld munge slurmdbd, after systemctl stop slurmctld
        (0, "inactive\nactive\nactive\n", 3, "lab-ctl01", "slurmctld", "slurmctld", "inactive"),
        # munged killed: the unit failed
        (0, "active\nfailed\nactive\n", 3, "lab-ctl01", "munge", "munged", "failed"),
        (0, "active\nactive\nactivating\n", 3, "lab-ctl01", "slurmdbd", "slurmdbd", "activating"),
        (1, "inactive\nactive\n", 3, "lab-gpu01", "munge", "munged", "inactive"),
        (2, "active\nfailed\n", 3, "lab-gpu02", "slurmd", "slurmd", "failed"),
    ],
)
def test_one_daemon_down_is_named_with_its_host(index, stdout, rc, host, unit, daemon, state):
    results = healthy()
    results[index] = dict(results[index], stdout=stdout, stdout_lines=stdout.splitlines(), rc=rc)
    out = daemons.check(results, "multi-node")
    assert out["down"] == [{"host": host, "unit": unit, "daemon": daemon, "state": state, "stage": "multi-node"}]
    (v,) = out["violations"]
    assert (v["code"], v["severity"], v["host"]) == ("ACCEPTANCE_CONTROL_DAEMON_DOWN", "error", host)
    assert v["field"] == ("acceptance_control_daemons_controller" if index == 0 else "acceptance_control_daemons_node")
    assert v["message"].startswith(f"{daemon} is not running on {host} (systemd unit {unit}: {state})")
    assert "the multi-node runs, the bisect and the drain were skipped" in v["message"]
    assert f"systemctl start {unit}" in v["message"] and f"journalctl -u {unit}" in v["message"]


def test_reloading_counts_as_running():
    results = [result("lab-ctl01", ["slurmctld"], "reloading\n", 3, "controller")]
    assert daemons.check(results, "drain")["down"] == []


@pytest.mark.parametrize(
    ("stage", "label", "said"),
    [
        ("multi-node", "", "found before the multi-node runs; the multi-node runs, the bisect and the drain"),
        ("bisect", "pool h100-lab", "found before the bisect of pool h100-lab; the bisect and the drain were skipped"),
        ("drain", "", "found before the drain; no node was drained"),
    ],
)
def test_message_says_when_and_what_was_skipped(stage, label, said):
    results = [result("lab-ctl01", ["slurmctld"], "inactive\n", 3, "controller")]
    (v,) = daemons.check(results, stage, label=label)["violations"]
    assert said in v["message"], v["message"]


def test_a_daemon_already_reported_is_down_but_not_reported_twice():
    first = daemons.check([result("lab-ctl01", ["slurmctld"], "inactive\n", 3, "controller")], "multi-node")
    again = daemons.check(
        [
            result("lab-ctl01", ["slurmctld", "munge"], "inactive\ninactive\n", 3, "controller"),
        ],
        "drain",
        seen=first["down"],
    )
    assert [(d["unit"], d["stage"]) for d in again["down"]] == [("slurmctld", "drain"), ("munge", "drain")]
    assert [v["message"].split(" ")[0] for v in again["violations"]] == ["munged"]


def test_unreachable_or_skipped_host_gives_no_verdict():
    results = [
        result("lab-gpu01", NODE_UNITS, "", None, unreachable=True, msg="Failed to connect to the host via ssh"),
        dict(result("lab-gpu02", NODE_UNITS, "", None), skipped=True),
    ]
    assert daemons.check(results, "multi-node") == {"down": [], "violations": []}


def test_systemctl_failing_leaves_the_state_unknown_and_down():
    results = [
        result("lab-gpu01", NODE_UNITS, "", 127, stderr="", msg="[Errno 2] No such file or directory: b'systemctl'")
    ]
    out = daemons.check(results, "multi-node")
    assert [d["state"] for d in out["down"]] == [
        "unknown (systemctl exit 127: [Errno 2] No such file or directory: b'systemctl')"
    ] * 2
    assert daemons.states(["slurmd"], "", 3) == {"slurmd": "unknown (systemctl printed no state)"}


def test_filter_takes_the_registered_loop():
    registered = {"changed": False, "msg": "All items completed", "results": healthy()}
    registered["results"][0]["stdout"] = "inactive\nactive\nactive"
    out = control_daemons_down(registered, "multi-node")
    assert [v["message"].split(" (")[0] for v in out["violations"]] == ["slurmctld is not running on lab-ctl01"]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: control_daemons_down("x", "multi-node"), "input must be a loop's results"),
        (lambda: control_daemons_down([], "later"), "stage must be one of"),
        (lambda: control_daemons_down([{"stdout": "active"}], "drain"), "has no item"),
        (lambda: control_daemon_targets(["lab-ctl01"], CTL_UNITS, [], NODE_UNITS), "the controller's name"),
        (lambda: control_daemon_targets("lab-ctl01", "slurmctld", [], NODE_UNITS), "list of systemd unit names"),
    ],
)
def test_filter_misuse(call, match):
    with pytest.raises(AnsibleFilterError, match=match):
        call()
