"""The Slurm node health check (roles/slurm_node/templates/usr/local/sbin/gpufleet-node-health.j2).

The template is rendered with the role's defaults and run with bash against a test bed in a
temporary directory: GPU device nodes (links to /dev/null, a character device), a sysfs tree of
RDMA ports, a kernel log (the lab's double, molecule/resources/doubles/kernel-log.double, plus
the lines a test appends), and stand-in sinfo / scontrol / logger on PATH that read and change
a small table of the cluster's nodes (node|partition|state|reason), as slurmctld would.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path

import jinja2
import jinja2.nativetypes
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.xid_drain_reasons import xid_drain_reasons
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import xid_catalogue

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "roles/slurm_node/templates/usr/local/sbin/gpufleet-node-health.j2"
DEFAULTS = yaml.safe_load((ROOT / "roles/slurm_node/defaults/main.yml").read_text())
# What the role renders into the check: the catalogue's XIDs for the default actions, as the
# xid_drain_reasons filter of slurm_node_health_xids does.
DEFAULT_XIDS = xid_catalogue.drain_reasons(DEFAULTS["slurm_node_health_xid_actions"])
LAB_KERNEL_LOG = ROOT / "molecule/resources/doubles/kernel-log.double"
XID79_LOG = ROOT / "tests/fixtures/node_health/kernel-log-xid79.double"
NODE = "gpu02"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id").read_text().strip()

FAKE_SINFO = """\
#!/usr/bin/env python3
# Stand-in sinfo: --noheader --Node [--nodes=N] [--partition=P] --format=<%N %P %T %E, '|'-separated>
import os, sys
table = {table!r}
if os.path.exists(table + ".unreachable"):
    sys.exit("sinfo: error: Unable to contact slurm controller (connect failure)")
opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if "=" in a)
for line in open(table):
    node, part, state, reason = line.rstrip("\\n").split("|", 3)
    if opts.get("nodes", node) != node or opts.get("partition", part) != part:
        continue
    out = opts["format"]
    for key, value in (("%N", node), ("%P", part), ("%T", state), ("%E", reason or "none")):
        out = out.replace(key, value)
    print(out)
"""

FAKE_SCONTROL = """\
#!/usr/bin/env python3
# Stand-in scontrol: update NodeName=N State=DRAIN Reason=R | State=RESUME, applied to the table.
import os, sys
table, calls = {table!r}, {calls!r}
with open(calls, "a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\\n")
if os.path.exists(table + ".scontrol-fails"):
    sys.exit("slurm_update error: Unable to contact slurm controller")
opts = dict(a.split("=", 1) for a in sys.argv[2:])
rows = [line.rstrip("\\n").split("|", 3) for line in open(table)]
for row in rows:
    if row[0] != opts["NodeName"]:
        continue
    if opts["State"] == "DRAIN":
        row[2] = "drained" if row[2] in ("idle", "drained") else "draining"
        row[3] = opts["Reason"]
    elif opts["State"] == "RESUME":
        row[2] = "idle" if row[2] in ("drained", "idle") else "allocated"
        row[3] = "none"
with open(table, "w") as fh:
    fh.writelines("|".join(row) + "\\n" for row in rows)
"""

FAKE_LOGGER = """\
#!/bin/bash
# Stand-in logger: the message (after --) goes to a file, not to this machine's journal.
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
echo "$*" >> {log}
"""


class Bed:
    """A node's hardware, kernel log and Slurm view, and the health check rendered against them."""

    def __init__(self, root: Path, **overrides):
        self.root = root
        self.bin = root / "bin"
        self.dev = root / "dev"
        self.ib = root / "infiniband"
        self.state_dir = root / "state"
        self.kernel_log = root / "kernel-log"
        self.table = root / "slurm-nodes"
        self.calls = root / "scontrol-calls"
        self.logged = root / "logged"
        for d in (self.bin, self.dev, self.ib):
            d.mkdir()
        self.kernel_log.write_text(LAB_KERNEL_LOG.read_text())
        self._tool("sinfo", FAKE_SINFO.format(table=str(self.table)))
        self._tool("scontrol", FAKE_SCONTROL.format(table=str(self.table), calls=str(self.calls)))
        self._tool("logger", FAKE_LOGGER.format(log=shlex.quote(str(self.logged))))
        self.gpus(8)
        for i in range(8):
            self.port(f"mlx5_{i}", 1, "ACTIVE")
        self.nodes({NODE: "idle", "gpu01": "idle"})
        self.vars = {
            "ansible_managed": "Ansible managed: test",
            "slurm_node_gpu_device_prefix": str(self.dev / "nvidia"),
            "slurm_node_health_gpus": 8,
            "slurm_node_health_driver": "",
            "slurm_node_health_kernel_log_command": f"cat {shlex.quote(str(self.kernel_log))}",
            "slurm_node_health_xids": DEFAULT_XIDS,
            "slurm_node_health_state_dir": str(self.state_dir),
            "slurm_node_health_rdma_class_dir": str(self.ib),
            "slurm_node_health_rdma_ports": 8,
            "slurm_node_health_rdma_devices": [],
            "slurm_node_health_rdma_link_layer": "InfiniBand",
            "slurm_node_health_partition": "h100",
            "slurm_node_health_drain_max_share": DEFAULTS["slurm_node_health_drain_max_share"],
        }
        self.vars.update(overrides)
        self.render()

    def _tool(self, name: str, text: str) -> None:
        path = self.bin / name
        path.write_text(text)
        path.chmod(0o755)

    def render(self) -> None:
        env = jinja2.Environment(keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
        env.filters["comment"] = lambda text: "# " + text
        env.filters["quote"] = lambda value: shlex.quote(str(value))
        self.script = self.root / "gpufleet-node-health"
        self.script.write_text(env.from_string(TEMPLATE.read_text()).render(**self.vars))
        self.script.chmod(0o755)

    # --- the node's hardware and kernel log
    def gpus(self, count: int) -> None:
        for old in self.dev.glob("nvidia*"):
            old.unlink()
        for i in range(count):
            (self.dev / f"nvidia{i}").symlink_to("/dev/null")  # a character device, as the GPUs' are
        (self.dev / "nvidiactl").symlink_to("/dev/null")  # not a GPU: never counted

    def port(self, dev: str, port: int, state: str, link_layer: str = "InfiniBand") -> None:
        codes = {"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4}
        path = self.ib / dev / "ports" / str(port)
        path.mkdir(parents=True, exist_ok=True)
        (path / "state").write_text(f"{codes[state]}: {state}\n")
        (path / "link_layer").write_text(link_layer + "\n")

    def xid(self, code: int, pci: str = "0000:1b:00", text: str = "", stamp: str | None = None) -> str:
        stamp = stamp or time.strftime("%Y-%m-%dT%H:%M:%S.") + f"{time.time_ns() // 1000 % 1000000:06d}+00:00"
        line = f"{stamp} gpu-node kernel: NVRM: Xid (PCI:{pci}): {code}, pid=4242, name=python3, {text or 'test'}"
        with self.kernel_log.open("a") as fh:
            fh.write(line + "\n")
        return line

    # --- Slurm's view
    def nodes(self, states: dict[str, str | tuple[str, str]], partition: str = "h100") -> None:
        rows = []
        for node, value in states.items():
            state, reason = value if isinstance(value, tuple) else (value, "none")
            rows.append(f"{node}|{partition}|{state}|{reason}\n")
        self.table.write_text("".join(rows))

    def slurm(self, node: str = NODE) -> tuple[str, str]:
        for line in self.table.read_text().splitlines():
            name, _part, state, reason = line.split("|", 3)
            if name == node:
                return state, reason
        raise KeyError(node)

    def operator_resumes(self, node: str = NODE) -> None:
        """What `scontrol update NodeName=<node> State=RESUME` does, typed by an operator (not logged as ours)."""
        rows = [line.split("|", 3) for line in self.table.read_text().splitlines()]
        for row in rows:
            if row[0] == node:
                row[2], row[3] = ("idle" if row[2] == "drained" else "allocated"), "none"
        self.table.write_text("".join("|".join(row) + "\n" for row in rows))

    def scontrol_calls(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []

    def log_lines(self) -> list[str]:
        return self.logged.read_text().splitlines() if self.logged.exists() else []

    def run(self, *args: str) -> subprocess.CompletedProcess:
        env = {"PATH": f"{self.bin}:/usr/bin:/bin", "SLURMD_NODENAME": NODE}
        return subprocess.run(
            [str(self.script), *args], env=env, capture_output=True, text=True, check=False, timeout=60
        )


@pytest.fixture
def bed(tmp_path):
    return Bed(tmp_path)


def drained(reason: str) -> tuple[str, str]:
    return ("drained", "gpufleet health: " + reason)


# --------------------------------------------------------------------------- healthy node


def test_a_healthy_node_changes_nothing(bed):
    result = bed.run()
    assert result.returncode == 0, result.stderr
    assert bed.scontrol_calls() == []
    assert bed.slurm() == ("idle", "none")
    check = bed.run("--check")
    assert (check.returncode, check.stdout.strip()) == (0, "gpufleet health: ok (8 GPUs, 8 RDMA ports ACTIVE)")


def test_the_lab_kernel_log_double_holds_only_an_application_fault(bed):
    """The lab's double has an Xid 13 (an application's bad address): that never drains."""
    assert "NVRM: Xid (PCI:0000:2a:00): 13," in LAB_KERNEL_LOG.read_text()
    assert bed.run().returncode == 0
    assert bed.slurm() == ("idle", "none")


# --------------------------------------------------------------------------- a GPU lost


def test_a_lost_gpu_drains_the_node_and_its_return_resumes_it(bed):
    bed.gpus(7)
    result = bed.run()
    assert result.returncode == 1
    assert result.stderr.strip() == "gpufleet health: expected 8 GPUs, found 7"
    assert bed.slurm() == drained("expected 8 GPUs, found 7")
    assert bed.log_lines() == [f"drained {NODE}: gpufleet health: expected 8 GPUs, found 7"]
    # Checked again while still broken: no second drain.
    assert bed.run().returncode == 1
    assert len(bed.scontrol_calls()) == 1
    bed.gpus(8)
    assert bed.run().returncode == 0
    assert bed.slurm() == ("idle", "none")
    assert bed.scontrol_calls()[-1] == f"update NodeName={NODE} State=RESUME"


def test_a_gpu_lost_under_a_running_job_still_drains_and_lets_the_job_finish(bed):
    bed.nodes({NODE: "allocated", "gpu01": "idle"})
    bed.gpus(7)
    result = bed.run()
    assert result.returncode == 1
    assert bed.scontrol_calls() == [
        f"update NodeName={NODE} State=DRAIN Reason=gpufleet health: expected 8 GPUs, found 7"
    ]
    assert bed.slurm() == ("draining", "gpufleet health: expected 8 GPUs, found 7")


def test_another_drain_is_neither_overwritten_nor_resumed(bed):
    bed.nodes({NODE: ("drained", "bios update (ticket 4711)"), "gpu01": "idle"})
    bed.gpus(7)
    result = bed.run()
    assert result.returncode == 1
    assert bed.scontrol_calls() == []
    assert "drained by someone else" in bed.log_lines()[0]
    bed.gpus(8)
    assert bed.run().returncode == 0
    assert bed.scontrol_calls() == []
    assert bed.slurm() == ("drained", "bios update (ticket 4711)")


def test_the_driver_version_is_compared_where_nvidia_smi_exists(tmp_path):
    bed = Bed(tmp_path, slurm_node_health_driver="570.133.20")
    smi = bed.bin / "nvidia-smi"
    smi.write_text("#!/bin/bash\nfor i in 0 1 2 3 4 5 6 7; do echo 570.124.06; done\n")
    smi.chmod(0o755)
    assert bed.run().returncode == 1
    assert bed.slurm() == drained("expected driver 570.133.20, found 570.124.06")


# --------------------------------------------------------------------------- XIDs


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (79, "XID 79 (GPU has fallen off the bus; action: reboot) on 0000:1b:00.0"),
        (48, "XID 48 (double-bit ECC error; action: reset_gpu) on 0000:1b:00.0"),
        (64, "XID 64 (GPU memory remapping failure; action: reset_gpu) on 0000:1b:00.0"),
        (74, "XID 74 (NVLink error; action: reset_gpu) on 0000:1b:00.0"),
        (95, "XID 95 (uncontained memory error; action: reset_gpu) on 0000:1b:00.0"),
        (119, "XID 119 (GSP RPC timeout; action: reset_gpu) on 0000:1b:00.0"),
        (120, "XID 120 (GSP error; action: reset_gpu) on 0000:1b:00.0"),
    ],
)
def test_an_xid_that_needs_a_reset_or_reboot_drains(bed, code, reason):
    bed.xid(code)
    assert bed.run().returncode == 1
    assert bed.slurm() == drained(reason)


@pytest.mark.parametrize("code", [13, 31, 43, 45, 63, 92, 94, 154])
def test_an_application_or_informational_xid_does_not_drain(bed, code):
    bed.xid(code)
    assert bed.run().returncode == 0
    assert bed.slurm() == ("idle", "none")


def test_the_roles_xid_list_is_rendered_from_the_catalogue():
    """slurm_node_health_xids, templated as Ansible would with the collection's filter, is the catalogue's
    XIDs for the default actions: every XID NVIDIA answers with a reset, a reboot or a drain, none of the
    application faults."""
    env = jinja2.nativetypes.NativeEnvironment(undefined=jinja2.StrictUndefined)
    env.filters["gpufleet.cluster.xid_drain_reasons"] = xid_drain_reasons
    rendered = env.from_string(DEFAULTS["slurm_node_health_xids"]).render(
        slurm_node_health_xid_actions=DEFAULTS["slurm_node_health_xid_actions"]
    )
    assert rendered == DEFAULT_XIDS
    for entry in xid_catalogue.xids():
        assert (int(entry.key) in rendered) == (entry.action != "none"), entry
    assert rendered[79] == "GPU has fallen off the bus; action: reboot"
    assert rendered[61] == "internal micro-controller breakpoint; action: drain"
    assert {13, 31, 43, 45, 63, 92, 94, 154}.isdisjoint(rendered)
    with pytest.raises(AnsibleFilterError, match=r"found \['restart'\]"):
        xid_drain_reasons(["reboot", "restart"])


def test_an_xid_of_a_mig_instance_drains_naming_the_gpu(bed):
    """NVIDIA's format for an error in a MIG GPU instance: "(PCI:0000:01:00 GPU-I:05)"."""
    bed.xid(95, "0000:01:00 GPU-I:05", "Uncontained: FBHUB. RST: Yes, D-RST: No")
    assert bed.run().returncode == 1
    assert bed.slurm() == drained("XID 95 (uncontained memory error; action: reset_gpu) on 0000:01:00.0")


def test_an_xid_nvidia_does_not_expect_drains_for_a_look(bed):
    bed.xid(61)
    assert bed.run().returncode == 1
    assert bed.slurm() == drained("XID 61 (internal micro-controller breakpoint; action: drain) on 0000:1b:00.0")


def test_the_first_new_xid_is_named_as_the_cause(bed):
    """A GPU falling off the bus: Xid 79, then 154 and 45 that follow from it (not draining)."""
    bed.kernel_log.write_text(LAB_KERNEL_LOG.read_text() + XID79_LOG.read_text())
    assert bed.run().returncode == 1
    assert bed.slurm() == drained("XID 79 (GPU has fallen off the bus; action: reboot) on 0000:1b:00.0")
    bed.xid(48, "0000:2A:00")
    assert bed.run().returncode == 1
    assert bed.slurm() == drained("XID 79 (GPU has fallen off the bus; action: reboot) on 0000:1b:00.0 and 1 more")


def test_an_xid_handled_by_an_operator_does_not_drain_again_but_a_new_one_does(bed):
    first = bed.xid(79)
    assert bed.run().returncode == 1
    assert bed.slurm() == drained("XID 79 (GPU has fallen off the bus; action: reboot) on 0000:1b:00.0")
    assert (bed.state_dir / "xid-pending").read_text() == f"{BOOT_ID}\n{first}\n"
    # The fault stays in the log: the node stays drained, check after check.
    assert bed.run().returncode == 1
    assert len(bed.scontrol_calls()) == 1
    # The operator reseats the GPU and resumes the node: that XID is now handled.
    bed.operator_resumes()
    assert bed.run().returncode == 0
    assert bed.slurm() == ("idle", "none")
    assert (bed.state_dir / "xid-handled").read_text() == f"{BOOT_ID}\n{first}\n"
    assert not (bed.state_dir / "xid-pending").exists()
    assert any("XIDs logged up to now are handled" in line for line in bed.log_lines())
    assert bed.run().returncode == 0
    assert len(bed.scontrol_calls()) == 1
    # A new XID on another GPU drains again, named alone (the handled one is not counted).
    bed.xid(48, "0000:2a:00")
    assert bed.run().returncode == 1
    assert bed.slurm() == drained("XID 48 (double-bit ECC error; action: reset_gpu) on 0000:2a:00.0")


def test_an_operator_taking_the_drain_over_handles_the_xid(bed):
    """An operator who replaces our reason with their own (an RMA ticket) has taken the fault over."""
    bed.xid(79)
    bed.run()
    bed.nodes({NODE: ("drained", "RMA 1234: GPU 3"), "gpu01": "idle"})
    assert bed.run().returncode == 0
    assert bed.slurm() == ("drained", "RMA 1234: GPU 3")
    bed.operator_resumes()
    assert bed.run().returncode == 0
    assert bed.slurm() == ("idle", "none")


def test_a_handled_xid_of_an_earlier_boot_does_not_hide_this_boots(bed):
    line = bed.xid(79)
    bed.state_dir.mkdir()
    (bed.state_dir / "xid-handled").write_text(f"00000000-0000-0000-0000-000000000000\n{line}\n")
    assert bed.run().returncode == 1
    assert bed.slurm() == drained("XID 79 (GPU has fallen off the bus; action: reboot) on 0000:1b:00.0")


def test_an_xid_not_drained_by_the_circuit_breaker_is_not_taken_as_handled(bed):
    bed.nodes({NODE: "idle", "gpu01": drained("expected 8 GPUs, found 7")})
    bed.xid(79)
    assert bed.run().returncode == 2
    assert not (bed.state_dir / "xid-pending").exists()
    # The other node is back in service: this one now drains for the same XID.
    bed.nodes({NODE: "idle", "gpu01": "idle"})
    assert bed.run().returncode == 1
    assert bed.slurm() == drained("XID 79 (GPU has fallen off the bus; action: reboot) on 0000:1b:00.0")


def test_an_unreadable_kernel_log_warns_and_does_not_drain(bed):
    bed.kernel_log.unlink()
    result = bed.run()
    assert result.returncode == 0
    assert "cannot read the kernel log" in result.stderr
    assert bed.scontrol_calls() == []
    assert any("cannot read the kernel log" in line for line in bed.log_lines())


def test_the_xid_list_is_a_variable(tmp_path):
    bed = Bed(tmp_path, slurm_node_health_xids={94: "contained memory error"})
    bed.xid(94)
    bed.xid(79)
    assert bed.run().returncode == 1
    assert bed.slurm() == drained("XID 94 (contained memory error) on 0000:1b:00.0")


def test_a_long_kernel_log_is_read_quickly(bed):
    noise = "2026-03-02T10:02:22.112905+00:00 gpu-node kernel: mlx5_core 0000:18:00.1: link up\n"
    bed.kernel_log.write_text(LAB_KERNEL_LOG.read_text() + noise * 200_000)
    bed.xid(79)
    start = time.monotonic()
    assert bed.run().returncode == 1
    assert time.monotonic() - start < 10
    assert bed.slurm() == drained("XID 79 (GPU has fallen off the bus; action: reboot) on 0000:1b:00.0")


# --------------------------------------------------------------------------- RDMA ports


def test_a_port_down_drains_naming_it_and_its_return_resumes(bed):
    bed.port("mlx5_3", 1, "DOWN")
    assert bed.run().returncode == 1
    assert bed.slurm() == drained("mlx5_3 port 1 DOWN (expected 8 ACTIVE ports, found 7)")
    bed.port("mlx5_3", 1, "ACTIVE")
    assert bed.run().returncode == 0
    assert bed.slurm() == ("idle", "none")


def test_many_ports_down_are_named_three_at_most(bed):
    for i in (1, 2, 5, 6):
        bed.port(f"mlx5_{i}", 1, "DOWN" if i != 2 else "INIT")
    bed.run()
    assert bed.slurm() == drained(
        "mlx5_1 port 1 DOWN, mlx5_2 port 1 INIT, mlx5_5 port 1 DOWN and 1 more (expected 8 ACTIVE ports, found 4)"
    )


def test_a_vanished_device_drains_by_count(bed):
    for path in sorted((bed.ib / "mlx5_7").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (bed.ib / "mlx5_7").rmdir()
    bed.run()
    assert bed.slurm() == drained("RDMA: expected 8 ACTIVE ports, found 7")


def test_another_link_layer_is_not_the_fabric(bed):
    """A BlueField's Ethernet front-end port on an InfiniBand node: its state does not count."""
    bed.port("mlx5_8", 1, "DOWN", "Ethernet")
    assert bed.run().returncode == 0
    bed.port("mlx5_8", 1, "ACTIVE", "Ethernet")
    bed.port("mlx5_0", 1, "DOWN")
    bed.run()
    assert bed.slurm() == drained("mlx5_0 port 1 DOWN (expected 8 ACTIVE ports, found 7)")


def test_a_bond_is_not_the_fabric(tmp_path):
    """A RoCE node: the rails are Ethernet, and so is the front-end bond, which does not count."""
    bed = Bed(tmp_path, slurm_node_health_rdma_link_layer="Ethernet")
    for i in range(8):
        bed.port(f"mlx5_{i}", 1, "ACTIVE", "Ethernet")
    bed.port("mlx5_bond_0", 1, "DOWN", "Ethernet")
    assert bed.run().returncode == 0
    bed.port("mlx5_bond_0", 1, "ACTIVE", "Ethernet")
    bed.port("mlx5_4", 1, "DOWN", "Ethernet")
    bed.run()
    assert bed.slurm() == drained("mlx5_4 port 1 DOWN (expected 8 ACTIVE ports, found 7)")


def test_the_pools_rdma_devices_choose_the_fabric(tmp_path):
    bed = Bed(tmp_path, slurm_node_health_rdma_devices=["mlx5_[0-3]", "mlx5_1[01]"], slurm_node_health_rdma_ports=6)
    for i in (10, 11):
        bed.port(f"mlx5_{i}", 1, "ACTIVE")
    bed.port("mlx5_5", 1, "DOWN")  # not the fabric
    assert bed.run().returncode == 0
    bed.port("mlx5_11", 1, "DOWN")
    bed.run()
    assert bed.slurm() == drained("mlx5_11 port 1 DOWN (expected 6 ACTIVE ports, found 5)")


def test_no_rdma_fabric_means_no_port_check(tmp_path):
    bed = Bed(tmp_path, slurm_node_health_rdma_ports=0)
    bed.port("mlx5_0", 1, "DOWN")
    result = bed.run("--check")
    assert (result.returncode, result.stdout.strip()) == (0, "gpufleet health: ok (8 GPUs)")


# --------------------------------------------------------------------------- circuit breaker


@pytest.mark.parametrize(
    ("others", "share", "drains", "why"),
    [
        # ceil(0.25 x 2) = 1: one node of a 2-node pool may be drained...
        ({"gpu01": "idle"}, 0.25, True, ""),
        # ...but not a second one.
        ({"gpu01": drained("expected 8 GPUs, found 7")}, 0.25, False, "1 of 2 nodes of partition h100 already"),
        # ceil(0.25 x 4) = 1 with one already drained; ceil(0.5 x 4) = 2.
        (
            {"gpu01": drained("RDMA: expected 8 ACTIVE ports, found 7"), "gpu03": "idle", "gpu04": "mixed"},
            0.25,
            False,
            "at most 1 may be",
        ),
        (
            {"gpu01": drained("RDMA: expected 8 ACTIVE ports, found 7"), "gpu03": "idle", "gpu04": "mixed"},
            0.5,
            True,
            "",
        ),
        # Other drains do not count against the share, but the last node in service is kept.
        ({"gpu01": ("drained", "bios update"), "gpu03": "allocated"}, 0.25, True, ""),
        ({"gpu01": ("drained", "bios update")}, 0.25, False, f"{NODE} is the last node in service"),
        # A node that does not answer (idle*) is not in service.
        ({"gpu01": "idle*"}, 0.25, False, "last node in service"),
        # A single-node pool is never drained by the check.
        ({}, 1.0, False, "last node in service"),
    ],
)
def test_the_circuit_breaker(tmp_path, others, share, drains, why):
    bed = Bed(tmp_path, slurm_node_health_drain_max_share=share)
    bed.nodes({NODE: "idle", **others})
    bed.gpus(7)
    result = bed.run()
    if drains:
        assert result.returncode == 1
        assert bed.slurm() == drained("expected 8 GPUs, found 7")
    else:
        assert result.returncode == 2
        assert bed.scontrol_calls() == []
        assert bed.slurm() == ("idle", "none")
        assert why in result.stderr
        assert "not drained by the circuit breaker" in result.stderr
        assert bed.log_lines()[0].startswith(f"circuit breaker: {NODE} not drained: ")


def test_the_breaker_counts_only_the_nodes_partition(bed):
    rows = (
        f"{NODE}|h100|idle|none\ngpu01|h100|idle|none\n"
        "gpu11|l40s|drained|gpufleet health: expected 4 GPUs, found 3\ngpu12|l40s|idle|none\n"
    )
    bed.table.write_text(rows)
    bed.gpus(7)
    assert bed.run().returncode == 1


def test_a_node_already_in_our_drain_gets_its_reason_updated_past_the_breaker(bed):
    bed.nodes({NODE: drained("expected 8 GPUs, found 7"), "gpu01": drained("expected 8 GPUs, found 6")})
    bed.gpus(7)
    bed.port("mlx5_3", 1, "DOWN")
    assert bed.run().returncode == 1
    assert bed.slurm() == drained("expected 8 GPUs, found 7; mlx5_3 port 1 DOWN (expected 8 ACTIVE ports, found 7)")


# --------------------------------------------------------------------------- robustness


def test_no_answer_from_slurm_drains_nothing(bed):
    Path(str(bed.table) + ".unreachable").touch()
    bed.gpus(7)
    result = bed.run()
    assert result.returncode == 2
    assert bed.scontrol_calls() == []
    assert "sinfo lists no node" in result.stderr


def test_a_failed_drain_says_so(bed):
    Path(str(bed.table) + ".scontrol-fails").touch()
    bed.gpus(7)
    result = bed.run()
    assert result.returncode == 2
    assert "scontrol could not drain" in result.stderr


def test_check_only_changes_nothing(bed):
    bed.gpus(6)
    bed.xid(79)
    bed.port("mlx5_2", 1, "DOWN")
    result = bed.run("--check")
    assert result.returncode == 1
    assert result.stdout.strip() == (
        "gpufleet health: expected 8 GPUs, found 6; mlx5_2 port 1 DOWN (expected 8 ACTIVE ports, found 7); "
        "XID 79 (GPU has fallen off the bus; action: reboot) on 0000:1b:00.0"
    )
    assert "\n" not in result.stdout.strip()
    assert bed.scontrol_calls() == []
    assert not bed.state_dir.exists()


def test_the_rendered_script_is_valid_bash_with_the_roles_defaults(tmp_path):
    bed = Bed(tmp_path)
    assert subprocess.run(["bash", "-n", str(bed.script)], check=False).returncode == 0
    text = bed.script.read_text()
    assert "[79]='GPU has fallen off the bus; action: reboot'" in text
    assert "DRAIN_MAX_PERMILLE=250" in text
    assert DEFAULTS["slurm_node_health_kernel_log_command"].startswith("journalctl -k -b ")
    assert DEFAULTS["slurm_node_health_rdma_class_dir"] == "/sys/class/infiniband"


def test_the_script_runs_under_set_u_without_optional_tools(tmp_path):
    """No nvidia-smi on PATH (the driver is then not checked) and no kernel log command: a clean check."""
    bed = Bed(tmp_path, slurm_node_health_kernel_log_command="", slurm_node_health_driver="570.133.20")
    result = bed.run()
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == ""
