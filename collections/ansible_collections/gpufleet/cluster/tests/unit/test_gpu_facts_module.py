"""gpufleet.cluster.gpu_facts: run_command patched (community.general modprobe style), sysfs / procfs in tmp_path."""

from __future__ import annotations

import json
from unittest.mock import patch

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpufleet.cluster.plugins.modules import gpu_facts
from hw_helpers import fixture, rdma_sysfs_files, write_tree
from module_helpers import ExitJson, FailJson
from module_helpers import exit_json as _exit_json
from module_helpers import fail_json as _fail_json


# What each tool answers: argv[0] basename and a distinguishing argument -> (rc, stdout, stderr).
def healthy_answers() -> dict:
    return {
        ("nvidia-smi", "--query-gpu"): (0, fixture("query_gpu_h100.csv"), ""),
        ("nvidia-smi", "topo"): (0, fixture("topo_h100_8nic_rail.txt"), ""),
        ("nvidia-smi", "-q"): (0, fixture("smi_q_h100_healthy.txt"), ""),
        ("ibstat", None): (0, fixture("ibstat_h100_8x_ndr400_ib_bf3.txt"), ""),
        ("lscpu", None): (0, fixture("lscpu_2s_spr.txt"), ""),
        ("lsblk", None): (0, fixture("lsblk_9nvme.json"), ""),
        ("dpkg-query", None): (1, fixture("dpkg_query.txt"), "dpkg-query: no packages found matching doca-ofed\n"),
        ("ofed_info", None): (0, fixture("ofed_info_doca.txt"), ""),
        ("nvidia-ctk", None): (0, fixture("nvidia_ctk_version.txt"), ""),
        ("nv-fabricmanager", None): (0, fixture("fabricmanager_version.txt"), ""),
        ("systemctl", None): (0, "active\n", ""),
    }


class FakeHost:
    """Answers run_command / get_bin_path like a node with the given tools installed."""

    def __init__(self, answers: dict, missing: tuple[str, ...] = ()):
        self.answers = answers
        self.missing = set(missing)
        self.calls: list[list[str]] = []  # the tools' argv, as if run directly
        self.wrapped: list[list[str]] = []  # what run_command really got

    def get_bin_path(self, name, *args, **kwargs):
        return None if name in self.missing else f"/usr/bin/{name}"

    def run_command(self, args, *a, **kw):
        self.wrapped.append(list(args))
        if args[0].rsplit("/", 1)[-1] == "timeout":  # coreutils timeout --kill-after=5 N TOOL ARGS...
            args = args[3:]
        self.calls.append(list(args))
        tool = args[0].rsplit("/", 1)[-1]
        for (name, marker), answer in self.answers.items():
            if name == tool and (marker is None or any(str(x).startswith(marker) for x in args[1:])):
                return (124, "", "") if answer == "hang" else answer
        return 127, "", f"{tool}: not answered by the test"


@pytest.fixture
def roots(tmp_path):
    sysfs, procfs, cuda = tmp_path / "sys", tmp_path / "proc", tmp_path / "cuda"
    write_tree(
        str(procfs),
        {
            "meminfo": fixture("meminfo_2tib.txt"),
            "cpuinfo": fixture("cpuinfo_2s_small.txt"),
            "driver/nvidia/version": fixture("driver_proc_open.txt"),
            "sys/kernel/osrelease": "6.8.0-51-generic\n",
        },
    )
    write_tree(str(cuda), {"version.json": fixture("cuda_version.json")})
    sysfs.mkdir()
    return {"sysfs_root": str(sysfs), "procfs_root": str(procfs), "cuda_home": str(cuda)}


def run_module(args: dict, host: FakeHost, check_mode: bool = False) -> dict:
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    with (
        patch_module_args(args),
        patch.object(basic.AnsibleModule, "exit_json", _exit_json),
        patch.object(basic.AnsibleModule, "fail_json", _fail_json),
        patch.object(basic.AnsibleModule, "run_command", host.run_command),
        patch.object(basic.AnsibleModule, "get_bin_path", host.get_bin_path),
        pytest.raises(ExitJson) as exc,
    ):
        gpu_facts.main()
    result = exc.value.args[0]
    json.dumps(result)  # the result must cross the Ansible boundary as JSON
    return result


@pytest.mark.parametrize("check_mode", [False, True])
def test_healthy_node(roots, check_mode):
    host = FakeHost(healthy_answers())
    result = run_module(roots, host, check_mode)
    assert result["changed"] is False
    f = result["ansible_facts"]["gpufleet_hw"]
    assert f["gpu_count"] == 8 and f["topology"]["gpu_nic"][0][0] == "PIX"
    assert f["rdma"]["source"] == "ibstat"  # the sysfs tree has no class/infiniband
    assert f["versions"]["ofed"] == "25.01-0.6.0" and f["versions"]["driver_flavor"] == "open"
    assert f["versions"]["cuda"] == "12.8.1" and f["kernel"] == "6.8.0-51-generic"
    assert f["memory"]["total_kib"] == 2113292936 and f["cpu"]["sockets"] == 2
    assert f["sources"]["nvidia_smi"] == "ok" and f["sources"]["dpkg"] == "ok"
    assert f["problems"] == []
    query = next(c for c in host.calls if any(a.startswith("--query-gpu") for a in c))
    assert query[1:] == [
        "--query-gpu=index,name,uuid,pci.bus_id,memory.total,driver_version",
        "--format=csv,noheader,nounits",
    ]


def test_sysfs_tree_wins_over_ibstat(roots):
    ports = [(f"mlx5_{i}", 1, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand") for i in range(8)]
    write_tree(roots["sysfs_root"], rdma_sysfs_files(ports))
    write_tree(roots["sysfs_root"], {"devices/system/node/node0/": "", "devices/system/node/node1/": ""})
    host = FakeHost(healthy_answers())
    f = run_module(roots, host)["ansible_facts"]["gpufleet_hw"]
    assert f["rdma"]["source"] == "sysfs" and len(f["rdma"]["ports"]) == 8
    assert not any(c[0].endswith("/ibstat") for c in host.calls)


def test_nvme_from_sysfs_skips_lsblk(roots):
    write_tree(roots["sysfs_root"], {"class/nvme/nvme0/model": "M\n", "class/nvme/nvme0/nvme0n1/size": "7501476528\n"})
    host = FakeHost(healthy_answers())
    f = run_module(roots, host)["ansible_facts"]["gpufleet_hw"]
    assert f["nvme"][0]["size_bytes"] == 7501476528 * 512
    assert not any(c[0].endswith("/lsblk") for c in host.calls)


def test_node_without_any_tool(roots):
    tools = (
        "nvidia-smi",
        "ibstat",
        "lscpu",
        "lsblk",
        "dpkg-query",
        "rpm",
        "ofed_info",
        "nvidia-ctk",
        "nv-fabricmanager",
        "systemctl",
    )
    f = run_module(roots, FakeHost({}, missing=tools))["ansible_facts"]["gpufleet_hw"]
    assert f["gpu_count"] == 0 and f["topology"] is None and f["fabric"] is None
    assert f["sources"]["nvidia_smi"] == "not found" and f["sources"]["ibstat"] == "not found"
    assert "nvidia_smi_topo" not in f["sources"]  # no point asking a missing binary twice
    assert f["cpu"]["logical_cpus"] == 8  # /proc/cpuinfo fallback
    assert f["rdma"]["source"] is None


def test_driver_not_loaded(roots):
    answers = healthy_answers()
    failed = (9, fixture("query_gpu_driver_not_loaded.txt"), "")
    answers[("nvidia-smi", "--query-gpu")] = failed
    answers[("nvidia-smi", "topo")] = failed
    answers[("nvidia-smi", "-q")] = failed
    f = run_module(roots, FakeHost(answers))["ansible_facts"]["gpufleet_hw"]
    assert f["gpu_count"] == 0
    assert f["sources"]["nvidia_smi"].startswith("rc=9: NVIDIA-SMI has failed")


def test_explicit_paths_are_used(roots, tmp_path):
    smi = tmp_path / "bin" / "my-nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\n")
    smi.chmod(0o755)
    answers = {(("my-nvidia-smi", k[1]) if k[0] == "nvidia-smi" else k): v for k, v in healthy_answers().items()}
    host = FakeHost(answers)
    f = run_module(dict(roots, nvidia_smi=str(smi)), host)["ansible_facts"]["gpufleet_hw"]
    assert f["gpu_count"] == 8 and host.calls[0][0] == str(smi)
    f = run_module(dict(roots, nvidia_smi=str(tmp_path / "absent")), FakeHost(answers))["ansible_facts"]["gpufleet_hw"]
    assert f["sources"]["nvidia_smi"] == "not found"


def test_inactive_fabric_manager_and_rpm_host(roots):
    answers = healthy_answers()
    answers[("systemctl", None)] = (3, "inactive\n", "")
    answers[("rpm", None)] = (1, fixture("rpm_query.txt"), "")
    f = run_module(roots, FakeHost(answers, missing=("dpkg-query",)))["ansible_facts"]["gpufleet_hw"]
    assert f["fabric_manager"]["service"] == "inactive"
    assert f["versions"]["nccl"] == "2.23.4" and f["sources"]["rpm"] == "ok"


def test_bad_option_fails():
    with (
        patch_module_args({"bogus": 1}),
        patch.object(basic.AnsibleModule, "fail_json", _fail_json),
        pytest.raises(FailJson),
    ):
        gpu_facts.main()


def test_a_hanging_tool_is_killed_and_recorded_not_waited_for(roots):
    host = FakeHost({("nvidia-smi", None): "hang", ("systemctl", None): (3, "inactive\n", "")})
    result = run_module(dict(roots, command_timeout=30), host)
    facts = result["ansible_facts"]["gpufleet_hw"]
    assert facts["sources"]["nvidia_smi"] == "timed out after 30s"
    assert facts["gpu_count"] == 0
    assert host.wrapped[0][:4] == ["/usr/bin/timeout", "--kill-after=5", "30", "/usr/bin/nvidia-smi"]


def test_command_timeout_zero_runs_tools_unwrapped(roots):
    host = FakeHost({("systemctl", None): (3, "inactive\n", "")}, missing=("nvidia-smi",))
    run_module(dict(roots, command_timeout=0), host)
    assert host.wrapped and all(call[0] != "/usr/bin/timeout" for call in host.wrapped)


def test_the_kernel_logs_xids_are_gathered_and_classified(roots):
    answers = healthy_answers()
    answers[("journalctl", "-k")] = (0, fixture("kernel_log_h100_xids.txt"), "")
    host = FakeHost(answers)
    f = run_module(roots, host)["ansible_facts"]["gpufleet_hw"]
    assert ["journalctl", "-k", "-b", "-o", "short-iso-precise", "--no-pager"] in [
        [c[0].rsplit("/", 1)[-1], *c[1:]] for c in host.calls
    ]
    assert f["sources"]["kernel_log"] == "ok" and f["gpu_errors"]["kernel_log_read"] is True
    off_bus = next(e for e in f["gpu_errors"]["xids"] if e["code"] == 79)
    assert (off_bus["pci"], off_bus["action"]) == ("0000:1b:00.0", "reboot")


def test_an_unreadable_kernel_log_is_recorded_and_an_empty_command_skips_it(roots):
    answers = healthy_answers()
    answers[("journalctl", "-k")] = (1, "", "No journal files were found.\n")
    f = run_module(roots, FakeHost(answers))["ansible_facts"]["gpufleet_hw"]
    assert f["sources"]["kernel_log"] == "rc=1: No journal files were found."
    assert f["gpu_errors"] == {"kernel_log_read": False, "xids": [], "memory": []}
    host = FakeHost(answers)
    f = run_module(dict(roots, kernel_log_command=[]), host)["ansible_facts"]["gpufleet_hw"]
    assert "kernel_log" not in f["sources"] and not any("journalctl" in c[0] for c in host.calls)


def test_firmware_vbios_per_gpu_and_bios_from_dmi_sysfs(roots):
    write_tree(
        roots["sysfs_root"],
        {
            "class/dmi/id/bios_version": "2.19.1\n",
            "class/dmi/id/bios_vendor": "Dell Inc.\n",
            "class/dmi/id/bios_date": "03/18/2024\n",
        },
    )
    host = FakeHost(healthy_answers())
    f = run_module(roots, host)["ansible_facts"]["gpufleet_hw"]
    assert [g["vbios_version"] for g in f["gpus"]] == ["96.00.99.00.01"] * 8  # nvidia-smi -q, by bus id
    assert f["firmware"]["bios"] == {"version": "2.19.1", "vendor": "Dell Inc.", "date": "03/18/2024"}
    assert f["sources"]["dmi"] == "ok"
    assert not any(c[0].endswith("/dmidecode") for c in host.calls)  # sysfs needs no root tool


def test_bios_from_dmidecode_where_sysfs_has_no_dmi(roots):
    answers = healthy_answers()
    answers[("dmidecode", "-s")] = (0, "2.19.1\n", "")
    host = FakeHost(answers)
    f = run_module(roots, host)["ansible_facts"]["gpufleet_hw"]
    assert f["firmware"]["bios"]["version"] == "2.19.1" and f["sources"]["dmi"] == "not found"
    assert ["/usr/bin/dmidecode", "-s", "bios-version"] in host.calls
    # Without root, dmidecode cannot read the table: recorded, and the BIOS is unknown.
    answers[("dmidecode", "-s")] = (1, "", "/sys/firmware/dmi/tables/smbios_entry_point: Permission denied\n")
    f = run_module(roots, FakeHost(answers))["ansible_facts"]["gpufleet_hw"]
    assert f["firmware"]["bios"]["version"] is None
    assert f["sources"]["dmidecode"].startswith("rc=1: /sys/firmware/dmi/tables/smbios_entry_point")
