"""``gpufleet inventory generate``: rack sheet + brief → hosts.yml, deterministic, never renumbering, preflight."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.generator import (
    Row,
    host_key,
    natural_key,
    parse_bases,
    parse_sheet,
)
from gpufleet_cli.main import main

ROOT = Path(__file__).resolve().parents[2]
RACKS = ROOT / "tests/fixtures/racks"
SHEET = RACKS / "4rack.csv"
BRIEF = RACKS / "brief.yml"
HEADER = "hostname,group,rack,leaf_switch,index,mgmt_ip,mgmt_mac,bmc_ip,bmc_mac,storage_ip,serial"


def generate(capsys, out: Path, sheet: Path = SHEET, brief: Path = BRIEF, *extra: str) -> tuple[int, str, str]:
    rc = main(["inventory", "generate", "--brief", str(brief), "--racks", str(sheet), "-o", str(out), *extra])
    o, e = capsys.readouterr()
    return rc, o, e


def hostvars(path: Path) -> dict[str, dict]:
    data = yaml.safe_load(path.read_text())
    return {h: v for g in data["all"]["children"].values() for h, v in g["hosts"].items()}


def write_sheet(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def sheet_lines() -> list[str]:
    return SHEET.read_text().splitlines()


# --- the 4-rack sheet ----------------------------------------------------------------------------


def test_four_racks_pass_preflight(capsys, tmp_path):
    rc, out, err = generate(capsys, tmp_path / "inv")
    assert rc == 0, out + err
    assert out.splitlines()[-1] == "preflight passed: 33 hosts, 0 errors, 0 warnings"
    assert (tmp_path / "inv/brief.yml").read_bytes() == BRIEF.read_bytes()
    hv = hostvars(tmp_path / "inv/hosts.yml")
    assert len(hv) == 33 and list(hv)[:3] == ["ctl01", "gpu001", "gpu002"]
    assert hv["ctl01"] == {
        "ansible_host": "10.20.0.10",
        "bmc_ip": "10.20.4.10",
        "storage_ip": "10.20.8.10",
        "rack": "a01",
        "leaf_switch": "leaf-a01",
        "mgmt_mac": "3c:fd:fe:a0:00:01",
        "serial": "CZ2400A001",
    }
    g17 = hv["gpu017"]
    assert (g17["ansible_host"], g17["bmc_ip"], g17["storage_ip"], g17["rack"]) == (
        "10.20.0.117",
        "10.20.4.117",
        "10.20.8.117",
        "a03",
    )
    assert g17["fabric_ips"] == [f"10.30.{r}.117" for r in range(8)]  # rail i in rails[i], same host-part


def test_output_is_yamllint_clean_and_shaped_like_the_example(capsys, tmp_path):
    assert generate(capsys, tmp_path / "inv")[0] == 0
    text = (tmp_path / "inv/hosts.yml").read_text()
    assert "          fabric_ips: [10.30.0.101, 10.30.1.101," in text  # a flow list, as in examples/hosts.yml
    yamllint = Path(sys.executable).parent / "yamllint"
    proc = subprocess.run(
        [str(yamllint), "-s", "-c", str(ROOT / ".yamllint"), str(tmp_path / "inv/hosts.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_deterministic_and_independent_of_row_order(capsys, tmp_path):
    assert generate(capsys, tmp_path / "a")[0] == 0
    assert generate(capsys, tmp_path / "b")[0] == 0
    lines = sheet_lines()
    body = lines[3:]
    random.Random(7).shuffle(body)
    shuffled = write_sheet(tmp_path / "4rack.csv", lines[:3] + body)
    assert generate(capsys, tmp_path / "c", shuffled)[0] == 0
    first = (tmp_path / "a/hosts.yml").read_bytes()
    assert first == (tmp_path / "b/hosts.yml").read_bytes() == (tmp_path / "c/hosts.yml").read_bytes()
    # Generating again into the same directory (existing hosts kept) changes nothing either.
    assert generate(capsys, tmp_path / "a")[0] == 0
    assert (tmp_path / "a/hosts.yml").read_bytes() == first


def test_adding_rows_never_renumbers(capsys, tmp_path):
    out = tmp_path / "inv"
    assert generate(capsys, out)[0] == 0
    before = hostvars(out / "hosts.yml")
    # Two new nodes: one numbered, one without a number (takes the highest free address).
    sheet = write_sheet(
        tmp_path / "more.csv",
        [*sheet_lines(), "gpu033,gpu_h100,a04,leaf-a04,,,,,,,", "spare-a,gpu_h100,a04,leaf-a04,,,,,,,"],
    )
    rc, stdout, err = generate(capsys, out, sheet)
    assert rc == 0, stdout + err
    after = hostvars(out / "hosts.yml")
    assert {h: after[h] for h in before} == before
    assert after["gpu033"]["ansible_host"] == "10.20.0.133"
    assert after["spare-a"]["ansible_host"] == "10.20.3.254"  # top of 10.20.0.0/22
    assert after["spare-a"]["fabric_ips"][7] == "10.30.7.254"
    assert "(2 new)" in stdout


def test_existing_addresses_are_kept_even_off_slot(capsys, tmp_path):
    """A host found in DIR/hosts.yml keeps what it has there, and its address is not given to another."""
    out = tmp_path / "inv"
    assert generate(capsys, out)[0] == 0
    text = (out / "hosts.yml").read_text()
    # An operator moved gpu005 by hand; then a new row wants the slot gpu005 left free... and .205.
    text = text.replace("ansible_host: 10.20.0.105", "ansible_host: 10.20.0.205")
    (out / "hosts.yml").write_text(text)
    sheet = write_sheet(tmp_path / "more.csv", [*sheet_lines(), "gpu105,gpu_h100,a04,,,,,,,,"])
    rc, stdout, err = generate(capsys, out, sheet, BRIEF, "--base", "gpu_h100=100")
    assert rc == 0, stdout + err
    after = hostvars(out / "hosts.yml")
    assert after["gpu005"]["ansible_host"] == "10.20.0.205"
    assert after["gpu105"]["ansible_host"] == "10.20.3.254"  # its slot .205 is taken: highest free
    assert "gpu105: slot 205 of networks.management is taken by gpu005" in err


def test_base_override_and_index_column(capsys, tmp_path):
    sheet = write_sheet(
        tmp_path / "s.csv",
        [
            HEADER,
            "ctl01,slurm_controllers,a01,,,,,,,,",
            "node-a,gpu_h100,a01,,40,,,,,,",
            "node-b,gpu_h100,a01,,41,,,,,,",
        ],
    )
    rc, out, err = generate(capsys, tmp_path / "inv", sheet, BRIEF, "--base", "gpu_h100=150", "--dry-run")
    assert rc == 0, out + err
    assert not (tmp_path / "inv").exists()  # --dry-run writes nothing
    hv = yaml.safe_load(out)["all"]["children"]["gpu_h100"]["hosts"]
    assert hv["node-a"]["ansible_host"] == "10.20.0.190" and hv["node-b"]["fabric_ips"][0] == "10.30.0.191"


# --- problems: all at once, with line numbers, nothing written --------------------------------------


@pytest.mark.parametrize(
    ("extra_lines", "expected"),
    [
        (["gpu001,gpu_h100,a04,,,,,,,,"], ["4rack.csv:37: hostname: duplicate host name 'gpu001' (first on line 5)"]),
        (
            ["gpu090,gpu_a100,a04,,,,,,,,"],
            ["4rack.csv:37: group: group 'gpu_a100' is not in the brief: expected one of slurm_controllers, gpu_h100"],
        ),
        (
            ["gpu090,gpu_h100,a04,,x1,,,,,,"],
            ["4rack.csv:37: index: expected an integer >= 0 of at most 9 digits, found 'x1'"],
        ),
        (["gpu_90,gpu_h100,a04,,,,,,,,"], ["4rack.csv:37: hostname: expected an RFC 1123 label"]),
        (["gpu090,gpu_h100,a04,,,,zz:00,,,,"], ["4rack.csv:37: mgmt_mac: expected a MAC address"]),
        (
            ["gpu090,gpu_h100,a04,,,,3c:fd:fe:a1:00:10,,,,"],
            ["4rack.csv:37: mgmt_mac: duplicate MAC 3c:fd:fe:a1:00:10 (first on line 5)"],
        ),
        (
            ["gpu090,gpu_h100,a04,,,10.99.0.5,,,,,"],
            ["4rack.csv:37: mgmt_ip: expected an address in networks.management 10.20.0.0/22, found '10.99.0.5'"],
        ),
        (["gpu090,gpu_h100,a04,,,10.20.0.1,,,,,"], ["4rack.csv:37: mgmt_ip: 10.20.0.1 is a reserved address"]),
        (
            ["gpu090,gpu_h100,a04,,,,,10.20.4.101,,,"],
            ["4rack.csv:37: bmc_ip: 10.20.4.101 is also given to gpu001 on line 5"],
        ),
        (
            ["gpu001,gpu_h100,a04,,,,,,,,", "gpu090,nope,a04,,,,,,,,", ",gpu_h100,a04,,,,,,,,"],
            [
                "4rack.csv:37: hostname: duplicate host name",
                "4rack.csv:38: group: group 'nope' is not in the brief",
                "4rack.csv:39: hostname: expected a host name, found an empty cell",
            ],
        ),
    ],
)
def test_sheet_problems(capsys, tmp_path, extra_lines, expected):
    sheet = write_sheet(tmp_path / "4rack.csv", sheet_lines() + extra_lines)
    rc, _out, err = generate(capsys, tmp_path / "inv", sheet)
    assert rc == 2
    for text in expected:
        assert f"gpufleet: error: {text}" in err, err
    assert "nothing written" in err and "Traceback" not in err
    assert not (tmp_path / "inv").exists()


def test_full_network_reports_every_row_that_does_not_fit(capsys, tmp_path):
    brief = yaml.safe_load(BRIEF.read_text())
    brief["networks"]["management"] = {"cidr": "10.20.0.0/27", "gateway": "10.20.0.1"}
    small = tmp_path / "brief.yml"
    small.write_text(yaml.safe_dump(brief))
    sheet = write_sheet(tmp_path / "4rack.csv", [*sheet_lines(), "gpu001,gpu_h100,a04,,,,,,,,"])
    rc, _out, err = generate(capsys, tmp_path / "inv", sheet, small)
    assert rc == 2
    full = [line for line in err.splitlines() if "is full" in line]
    # 29 usable addresses (.2-.30): ctl01 takes its slot .10, 28 left for 32 GPU nodes.
    assert len(full) == 4 and full[0].startswith("gpufleet: error: 4rack.csv:33: mgmt_ip: networks.management")
    # ... reported with the other problems, in line order (the duplicate row is left out of the allocation)
    assert (
        err.splitlines()[4] == "gpufleet: error: 4rack.csv:37: hostname: duplicate host name 'gpu001' (first on line 5)"
    )
    assert not (tmp_path / "inv").exists()


def test_preflight_errors_exit_1(capsys, tmp_path):
    """The sheet is fine but the brief has too few rails: the inventory is written, preflight fails."""
    brief = yaml.safe_load(BRIEF.read_text())
    brief["networks"]["fabric"]["rails"] = brief["networks"]["fabric"]["rails"][:4]
    short = tmp_path / "brief.yml"
    short.write_text(yaml.safe_dump(brief))
    rc, out, _err = generate(capsys, tmp_path / "inv", SHEET, short)
    assert rc == 1
    assert "FABRIC_RAILS_TOO_FEW" in out and "HOST_FABRIC_COUNT" in out
    assert out.splitlines()[-1].startswith("preflight FAILED: 33 hosts")
    assert (tmp_path / "inv/hosts.yml").exists()


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing-sheet", "no such file, expected a rack sheet (CSV)"),
        ("missing-brief", "no such file, expected a topology brief (YAML)"),
        ("bad-yaml", "YAML syntax error"),
        ("brief-not-mapping", "expected a topology brief (a YAML mapping), found list"),
        ("binary-sheet", "not UTF-8 text"),
        ("unknown-column", "racks.csv:1: vlan: unknown column"),
        ("missing-column", "racks.csv:1: group: expected a 'group' column"),
        ("empty-sheet", "expected a CSV header row"),
        ("bad-base", "--base: expected GROUP=N"),
        ("unknown-base-group", "brief: --base: group 'gpu_x' is not in the brief"),
        ("broken-existing", "the existing inventory is read to keep its addresses"),
    ],
)
def test_unreadable_input_exit_2(capsys, tmp_path, setup, message):
    sheet, brief, out, extra = tmp_path / "racks.csv", BRIEF, tmp_path / "inv", []
    shutil.copy(SHEET, sheet)
    if setup == "missing-sheet":
        sheet.unlink()
    elif setup == "missing-brief":
        brief = tmp_path / "nope.yml"
    elif setup == "bad-yaml":
        brief = tmp_path / "b.yml"
        brief.write_text("cluster: [\n")
    elif setup == "brief-not-mapping":
        brief = tmp_path / "b.yml"
        brief.write_text("- 1\n")
    elif setup == "binary-sheet":
        sheet.write_bytes(b"hostname,group\n\xff\xfe\n")
    elif setup == "unknown-column":
        write_sheet(sheet, ["hostname,group,vlan", "gpu001,gpu_h100,7"])
    elif setup == "missing-column":
        write_sheet(sheet, ["hostname,rack", "gpu001,a01"])
    elif setup == "empty-sheet":
        write_sheet(sheet, ["# nothing here"])
    elif setup == "bad-base":
        extra = ["--base", "gpu_h100"]
    elif setup == "unknown-base-group":
        extra = ["--base", "gpu_x=10"]
    elif setup == "broken-existing":
        out.mkdir()
        (out / "hosts.yml").write_text("all: [\n")
    rc, _o, err = generate(capsys, out, sheet, brief, *extra)
    assert rc == 2
    assert message in err, err
    assert "Traceback" not in err


def test_script_entry_point_help():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts/gpufleet"), "inventory", "generate", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0
    assert "rack sheet columns" in proc.stdout and "leaf_switch" in proc.stdout


# --- the pure helpers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hostname", "index", "key"),
    [("gpu017", "", 17), ("gpu-a03-17", "", 17), ("ctl", "", None), ("ctl", "4", 4), ("gpu017", "5", 5)],
)
def test_host_key(hostname, index, key):
    assert host_key(Row(2, {"hostname": hostname, "index": index})) == key


def test_natural_order():
    assert sorted(["gpu10", "gpu2", "gpu1", "ctl"], key=natural_key) == ["ctl", "gpu1", "gpu2", "gpu10"]


@pytest.mark.parametrize(
    ("items", "expected"),
    [([], {}), (["gpu=500"], {"gpu": 500}), (["a=1", "a=2"], {"a": 2}), (["a"], None), (["a=-1"], None)],
)
def test_parse_bases(items, expected):
    if expected is None:
        with pytest.raises(ValueError):
            parse_bases(items)
    else:
        assert parse_bases(items) == expected


def test_parse_sheet_skips_comments_blank_lines_and_bom():
    rows, problems = parse_sheet("\ufeff# c\n\nHostname , GROUP\n gpu1 , g \n\n# x\ngpu2,g\n")
    assert problems == []
    assert [(r.line, r.hostname, r.group) for r in rows] == [(4, "gpu1", "g"), (7, "gpu2", "g")]
