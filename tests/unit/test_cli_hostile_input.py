"""The CLI on hostile and broken input: exit 2 and one line naming the input, fast, never a traceback.

Each test is one shape that once hung the CLI, exhausted its memory or ended in a traceback.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gpufleet_cli import cmd_preflight
from gpufleet_cli import main as cli_main
from gpufleet_cli.main import main

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventories" / "lab"
RACKS = ROOT / "tests" / "fixtures" / "racks"
BOMB = "&a [x, x, x, x, x, x, x, x, x, x]"


def run(capsys, *argv, budget: float = 5.0):
    t0 = time.monotonic()
    rc = main(list(argv))
    elapsed = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert elapsed < budget, f"took {elapsed:.1f} s"
    assert "Traceback" not in out + err
    return rc, out, err


def unreadable(capsys, *argv, budget: float = 5.0) -> str:
    """The one error line of a run that must exit 2."""
    rc, out, err = run(capsys, *argv, budget=budget)
    assert rc == 2, (out, err)
    lines = [line for line in err.splitlines() if line.startswith("gpufleet: error: ")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def site(tmp_path) -> Path:
    """A copy of the lab's inventory directory, to break."""
    dest = tmp_path / "site"
    shutil.copytree(LAB, dest)
    return dest


def bomb_yaml(key: str, indent: str = "") -> str:
    """An alias bomb (10**9 nodes when expanded) as the value of ``key``."""
    lines = [f"{indent}_b0: {BOMB}"]
    for i in range(1, 10):
        lines.append(f"{indent}_b{i}: &b{i} [{', '.join(['*a' if i == 1 else f'*b{i - 1}'] * 10)}]")
    return "\n".join(lines) + f"\n{indent}{key}: *b9\n"


# --- files that are not regular files ---------------------------------------------------------------


def test_fifo_as_hosts_yml(capsys, site):
    (site / "hosts.yml").unlink()
    os.mkfifo(site / "hosts.yml")
    line = unreadable(capsys, "preflight", "-i", str(site))
    assert line == f"gpufleet: error: {site}/hosts.yml: is a FIFO (named pipe), expected a regular file"


def test_fifo_as_brief(capsys, site):
    (site / "brief.yml").unlink()
    os.mkfifo(site / "brief.yml")
    line = unreadable(capsys, "preflight", "-i", str(site))
    assert f"{site}/brief.yml: is a FIFO (named pipe)" in line


def test_fifo_as_group_vars_all(capsys, site):
    shutil.rmtree(site / "group_vars")
    (site / "group_vars").mkdir()
    os.mkfifo(site / "group_vars" / "all.yml")
    line = unreadable(capsys, "preflight", "-i", str(site))
    assert f"{site}/group_vars/all.yml: is a FIFO (named pipe)" in line


def test_group_vars_all_linked_to_dev_zero(capsys, site):
    shutil.rmtree(site / "group_vars")
    (site / "group_vars").mkdir()
    (site / "group_vars" / "all.yml").symlink_to("/dev/zero")
    line = unreadable(capsys, "preflight", "-i", str(site))
    assert f"{site}/group_vars/all.yml: is a character device" in line


def test_fifo_beside_an_ini_inventory_read_by_ansible(capsys, tmp_path):
    (tmp_path / "hosts.ini").write_text("[gpu]\ngpu01\n")
    (tmp_path / "group_vars").mkdir()
    os.mkfifo(tmp_path / "group_vars" / "gpu.yml")
    line = unreadable(capsys, "preflight", "-i", str(tmp_path), "--brief", str(LAB / "brief.yml"))
    assert f"{tmp_path}/group_vars/gpu.yml: is a FIFO (named pipe)" in line


def test_fifo_as_nccl_parse_input(capsys, tmp_path):
    os.mkfifo(tmp_path / "run.json")
    line = unreadable(capsys, "nccl", "parse", str(tmp_path / "run.json"))
    assert f"{tmp_path}/run.json: is a FIFO (named pipe)" in line


def test_fifo_as_rack_sheet(capsys, tmp_path):
    os.mkfifo(tmp_path / "racks.csv")
    line = unreadable(
        capsys, "inventory", "generate", "--brief", str(RACKS / "brief.yml"), "--racks", str(tmp_path / "racks.csv"),
        "-o", str(tmp_path / "out"),
    )  # fmt: skip
    assert "racks.csv: is a FIFO (named pipe), expected a rack sheet (CSV)" in line


def test_fifo_as_report(capsys, tmp_path):
    run_dir = tmp_path / "lab" / "20260101T000000Z"
    run_dir.mkdir(parents=True)
    os.mkfifo(run_dir / "acceptance.json")
    # A FIFO is not a report file: the directory holds no report, and nothing blocks.
    rc, _out, err = run(capsys, "report", "--dir", str(tmp_path))
    assert rc == 2 and "Traceback" not in err


# --- YAML shapes ------------------------------------------------------------------------------------


def test_alias_bomb_in_a_brief_field(capsys, site):
    brief = (site / "brief.yml").read_text()
    (site / "brief.yml").write_text(bomb_yaml("tenants") + brief.replace("\ntenants:", "\n_old_tenants:"))
    line = unreadable(capsys, "preflight", "-i", str(site), budget=3.0)
    assert f"{site}/brief.yml: its aliases expand to" in line and len(line) < 300


def test_alias_bomb_in_a_host_variable(capsys, site):
    (site / "group_vars" / "all" / "bomb.yml").write_text(bomb_yaml("gpufleet_bomb"))
    line = unreadable(capsys, "preflight", "-i", str(site), budget=3.0)
    assert "bomb.yml: its aliases expand to" in line


def test_duplicate_key_in_the_brief_names_both_lines(capsys, site):
    lines = (site / "brief.yml").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if "single_node_busbw_gbps:" in line)
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    lines.insert(at + 1, f"{indent}single_node_busbw_gbps: 1")
    (site / "brief.yml").write_text("\n".join(lines) + "\n")
    line = unreadable(capsys, "preflight", "-i", str(site))
    assert f"{site}/brief.yml:{at + 2}:" in line
    assert "duplicate key 'single_node_busbw_gbps'" in line and f"(first on line {at + 1})" in line


def test_duplicate_key_in_the_inventory(capsys, tmp_path):
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    gpu01: {a: 1}\n    gpu01: {a: 2}\n")
    line = unreadable(capsys, "preflight", "-i", str(tmp_path), "--brief", str(LAB / "brief.yml"))
    assert "hosts.yml:4:" in line and "duplicate key 'gpu01' (first on line 3)" in line


def test_5000_digit_integer_in_the_brief(capsys, site):
    brief = (site / "brief.yml").read_text()
    (site / "brief.yml").write_text(brief + "\n_size: " + "9" * 5000 + "\n")
    line = unreadable(capsys, "preflight", "-i", str(site))
    assert "brief.yml:" in line and "at most 4300 digits" in line


def test_nested_host_ranges(capsys, tmp_path):
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    n[0:999999]x[0:999999]:\n")
    line = unreadable(capsys, "preflight", "-i", str(tmp_path), "--brief", str(LAB / "brief.yml"), budget=3.0)
    assert "stands for more than 1000000 hosts" in line


def test_group_priority_inf(capsys, tmp_path):
    (tmp_path / "hosts.yml").write_text("all:\n  children:\n    g:\n      vars: {ansible_group_priority: .inf}\n")
    line = unreadable(capsys, "preflight", "-i", str(tmp_path), "--brief", str(LAB / "brief.yml"))
    assert "ansible_group_priority of group 'g' must be an integer, found inf" in line


def test_a_chain_of_1500_groups(capsys, tmp_path):
    lines = ["all:", "  children:"]
    for i in range(1500):
        lines += [f"    g{i}:", "      children:", f"        g{i + 1}:"]
    (tmp_path / "hosts.yml").write_text("\n".join(lines) + "\n")
    rc, _out, _err = run(capsys, "preflight", "-i", str(tmp_path), "--brief", str(LAB / "brief.yml"), budget=20.0)
    assert rc in (0, 1)


def test_unreadable_group_vars_directory_is_not_skipped(capsys, site, monkeypatch):
    denied = str(site / "group_vars")
    real = os.listdir

    def listdir(path="."):
        if os.path.abspath(os.fspath(path)) == denied:
            raise PermissionError(13, "Permission denied", denied)
        return real(path)

    monkeypatch.setattr(os, "listdir", listdir)
    line = unreadable(capsys, "preflight", "-i", str(site))
    assert denied in line and "Permission denied" in line


# --- inventory scripts under a timeout --------------------------------------------------------------


def _sleeping_script(path: Path) -> None:
    path.write_text("#!/bin/sh\nsleep 60\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_an_inventory_script_that_sleeps_stops_at_the_timeout_option(capsys, tmp_path):
    _sleeping_script(tmp_path / "inv.sh")
    t0 = time.monotonic()
    line = unreadable(
        capsys, "preflight", "-i", str(tmp_path / "inv.sh"), "--brief", str(LAB / "brief.yml"),
        "--inventory-timeout", "3", budget=30.0,
    )  # fmt: skip
    assert time.monotonic() - t0 < 30
    assert "did not finish in 3 s" in line and "--inventory-timeout SECONDS" in line


def test_the_timeout_from_the_environment(monkeypatch):
    monkeypatch.setenv(cmd_preflight.TIMEOUT_ENV, "7.5")
    assert cmd_preflight.inventory_timeout() == 7.5
    assert cmd_preflight.inventory_timeout(2.0) == 2.0
    monkeypatch.setenv(cmd_preflight.TIMEOUT_ENV, "inf")
    with pytest.raises(cmd_preflight.CliError, match=r"\$GPUFLEET_INVENTORY_TIMEOUT: expected a number of seconds"):
        cmd_preflight.inventory_timeout()
    monkeypatch.delenv(cmd_preflight.TIMEOUT_ENV)
    assert cmd_preflight.inventory_timeout() == cmd_preflight.ANSIBLE_TIMEOUT_S


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "x"])
def test_a_bad_timeout_option_is_a_usage_error(capsys, value):
    with pytest.raises(SystemExit) as exc:
        main(["preflight", "-i", str(LAB), "--inventory-timeout", value])
    assert exc.value.code == 2 and "expected a number of seconds" in capsys.readouterr().err


# --- nccl parse -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        '{"results": [{"size": NaN}, {"size": Infinity}, {"size": -Infinity}]}',
        '{"results": [{"size": 8, "out_of_place": {"bus_bw": NaN, "nwrong": Infinity}}], "errors": "boom"}',
        '{"results": [{"size": "²"}], "errors": {"rank": 1}}',
        '{"results": [{"size": ' + "9" * 5000 + "}]}",
        '{"a":' + "[" * 100000 + "]" * 100000 + "}",
    ],
    ids=["nan-infinity-sizes", "nan-busbw-string-errors", "superscript-size-object-errors", "5000-digits", "deep"],
)
def test_nccl_parse_hostile_json(capsys, tmp_path, doc):
    (tmp_path / "run.json").write_text(doc)
    rc, out, _err = run(capsys, "nccl", "parse", str(tmp_path / "run.json"))
    assert rc in (0, 1) and json.loads(out)["warnings"]


def test_nccl_parse_text_with_superscript_and_5000_digit_sizes(capsys, tmp_path):
    head = "# nThread 1 nGpus 8 minBytes 8 maxBytes 8\n#  size count type redop root time algbw busbw #wrong\n"
    rows = "".join(f"  {s}  2 float sum -1 1 1 1 0 1 1 1 0\n" for s in ("²", "9" * 5000))
    (tmp_path / "run.log").write_text(head + rows)
    rc, out, _err = run(capsys, "nccl", "parse", str(tmp_path / "run.log"))
    assert rc in (0, 1) and json.loads(out)["runs"] == []


# --- inventory generate -----------------------------------------------------------------------------


@pytest.mark.parametrize("index", ["²", "9" * 5000])
def test_inventory_generate_with_an_index_that_is_no_integer(capsys, tmp_path, index):
    sheet = (RACKS / "4rack.csv").read_text() + f"gpu090,gpu_h100,a04,,{index},,,,,,\n"
    (tmp_path / "racks.csv").write_text(sheet)
    rc, _out, err = run(
        capsys, "inventory", "generate", "--brief", str(RACKS / "brief.yml"), "--racks", str(tmp_path / "racks.csv"),
        "-o", str(tmp_path / "out"),
    )  # fmt: skip
    assert rc == 2 and "index: expected an integer >= 0 of at most 9 digits" in err
    assert not (tmp_path / "out" / "hosts.yml").exists()


def test_inventory_generate_with_a_host_name_of_5000_digits(capsys, tmp_path):
    sheet = (RACKS / "4rack.csv").read_text() + f"gpu{'9' * 5000},gpu_h100,a04,,,,,,,,\n"
    (tmp_path / "racks.csv").write_text(sheet)
    rc, _out, err = run(
        capsys, "inventory", "generate", "--brief", str(RACKS / "brief.yml"), "--racks", str(tmp_path / "racks.csv"),
        "-o", str(tmp_path / "out"),
    )  # fmt: skip
    assert rc == 2 and "hostname: expected an RFC 1123 label" in err


# --- an error nobody foresaw ------------------------------------------------------------------------


def test_an_unexpected_error_is_one_line_naming_the_inputs_and_a_log(capsys, monkeypatch, tmp_path):
    def boom(*_a, **_kw):
        raise ZeroDivisionError("the check divided by zero")

    monkeypatch.setattr(cmd_preflight, "check", boom)
    monkeypatch.setattr(cli_main, "ROOT", str(tmp_path))
    line = unreadable(capsys, "preflight", "-i", str(LAB))
    assert line.startswith(f"gpufleet: error: preflight stopped on input it could not handle (inventory {LAB})")
    assert "ZeroDivisionError: the check divided by zero" in line
    (log,) = (tmp_path / ".cache" / "errors").iterdir()
    assert str(log) in line
    assert "Traceback" in log.read_text() and "boom" in log.read_text()


@pytest.mark.parametrize("exc", [RecursionError("maximum recursion depth exceeded"), MemoryError()])
def test_recursion_and_memory_errors_are_caught_too(capsys, monkeypatch, tmp_path, exc):
    def boom(*_a, **_kw):
        raise exc

    monkeypatch.setattr(cmd_preflight, "check", boom)
    monkeypatch.setattr(cli_main, "ROOT", str(tmp_path))
    line = unreadable(capsys, "preflight", "-i", str(LAB))
    assert type(exc).__name__ in line and "traceback in" in line


# --- the launcher without the venv's packages --------------------------------------------------------


def test_a_python_without_netaddr_says_so(tmp_path):
    # The launcher run by this Python with netaddr hidden (a None entry in sys.modules makes it unfindable).
    code = (
        "import sys; sys.modules['netaddr'] = None; "
        f"sys.argv = [{str(ROOT / 'scripts' / 'gpufleet')!r}, 'preflight', '-i', {str(LAB)!r}]; "
        "exec(compile(open(sys.argv[0]).read(), sys.argv[0], 'exec'), "
        "{'__name__': '__main__', '__file__': sys.argv[0]})"
    )
    env = {**os.environ, "GPUFLEET_NO_REEXEC": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2, proc.stderr
    said = [line for line in proc.stderr.splitlines() if line.startswith("gpufleet: error: this Python (")]
    assert said and "lacks netaddr" in said[0]
    assert "make venv" in proc.stderr and "Traceback" not in proc.stderr


def test_report_of_a_gate_record_whose_violation_fields_are_not_text(capsys, tmp_path):
    gate = tmp_path / "lab" / "20260302T120000Z" / "gate"
    gate.mkdir(parents=True)
    record = {"host": "gpu02", "status": "fail", "summary": {"gpus": [8, {"x": 1}]}}
    record["violations"] = [{"severity": ["error", 1], "code": 7, "host": 3, "field": None, "message": {"a": 1}}, "x"]
    (gate / "gpu02.json").write_text(json.dumps(record))
    rc, out, _err = run(capsys, "report", "--dir", str(tmp_path))
    assert rc == 0 and "| ['error', 1] | 7 |" in out


# --- what Ansible's inventory reads (INI, scripts, plugins) is bounded first ---------------------------


def _ini_site(tmp_path: Path, group_vars: str) -> Path:
    (tmp_path / "hosts.ini").write_text("[gpu]\ngpu01\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "gpu.yml").write_text(group_vars)
    return tmp_path


def test_duplicate_key_in_group_vars_of_an_ini_inventory_names_the_file_and_lines(capsys, tmp_path):
    site = _ini_site(tmp_path, "a: 1\nb: 2\na: 3\n")
    line = unreadable(capsys, "preflight", "-i", str(site), "--brief", str(LAB / "brief.yml"))
    assert f"{site}/group_vars/gpu.yml:3:1:" in line and "duplicate key 'a' (first on line 1)" in line


def test_alias_bomb_in_group_vars_of_an_ini_inventory_never_reaches_ansible(capsys, tmp_path):
    site = _ini_site(tmp_path, bomb_yaml("gpufleet_bomb"))
    line = unreadable(capsys, "preflight", "-i", str(site), "--brief", str(LAB / "brief.yml"), budget=3.0)
    assert f"{site}/group_vars/gpu.yml: its aliases expand to" in line


# --- values the checks once could not print or parse ------------------------------------------------


def _set_in_brief(site: Path, path: tuple, value) -> None:
    import yaml

    brief = yaml.safe_load((site / "brief.yml").read_text())
    node = brief
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    (site / "brief.yml").write_text(yaml.safe_dump(brief, sort_keys=False))


def test_a_nul_byte_in_an_address(capsys, site):
    _set_in_brief(site, ("networks", "management", "gateway"), "10.250.10.1\x00")
    rc, out, _err = run(capsys, "preflight", "-i", str(site))
    assert rc == 1 and "networks.management.gateway" in out


def test_a_4000_digit_busbw_floor_is_a_violation(capsys, site):
    _set_in_brief(site, ("acceptance", "single_node_busbw_gbps"), 10**4000)
    rc, out, _err = run(capsys, "preflight", "-i", str(site))
    assert rc == 1 and "ACCEPT_SINGLE_NODE_ABOVE_LIMIT" in out and "inf" in out


def test_an_inventory_directory_that_cannot_be_listed(capsys, site, monkeypatch):
    real = os.listdir

    def listdir(path="."):
        if os.path.abspath(os.fspath(path)) == str(site):
            raise PermissionError(13, "Permission denied", str(site))
        return real(path)

    monkeypatch.setattr(os, "listdir", listdir)
    line = unreadable(capsys, "preflight", "-i", str(site))
    assert f"{site}: cannot list an inventory directory: Permission denied" in line


def test_nccl_parse_stdin_is_bounded(capsys, monkeypatch):
    from gpufleet_cli import cmd_nccl

    monkeypatch.setattr(cmd_nccl, "_MAX_BYTES", 10)
    monkeypatch.setattr("sys.stdin", io.StringIO("x" * 11))
    line = unreadable(capsys, "nccl", "parse", "-")
    assert "<stdin>: more than 10 bytes" in line
