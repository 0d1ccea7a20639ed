"""The preflight codes table (module_utils/preflight/codes.py) against what the gate emits and the docs.

Each code in the table is either emitted by one of the preflight tests' own inputs (the failing
cases of test_preflight, test_storage_checks, test_workload, test_brief_schema and test_k8s, whose inputs
this module replays, and three inputs of their narrative tests) with the table's severity, or named below
as produced elsewhere, with the file that emits it.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory import reader
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import codes
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.gate import check
from ansible_collections.gpufleet.cluster.tests.unit import (
    test_brief_schema,
    test_k8s,
    test_preflight,
    test_storage_checks,
    test_workload,
)
from ansible_collections.gpufleet.cluster.tests.unit.preflight_helpers import set_path, site

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, *[os.pardir] * 6))
MODULE_UTILS = os.path.join(HERE, os.pardir, os.pardir, "plugins", "module_utils")
SCRIPT = os.path.join(ROOT, "scripts", "gen_preflight_doc")
DOC = os.path.join(ROOT, "docs", "preflight-checks.md")
# The files whose violations are built from the table (codes.make).
MAKERS = sorted(
    [os.path.join(MODULE_UTILS, "preflight", f) for f in os.listdir(os.path.join(MODULE_UTILS, "preflight"))]
    + [os.path.join(MODULE_UTILS, "storage", "preflight.py")]
)
# Codes no input of the gate's own tests produces: the CLI's inventory reader reports skipped vault
# values (test_cli_preflight covers it through the CLI). Every other code is emitted below.
ELSEWHERE = {"INPUT_VAULT_SKIPPED": os.path.join(MODULE_UTILS, "inventory", "reader.py")}


def _param_values(test_fn):
    """The argument values of a test's @pytest.mark.parametrize (its cases, as that test runs them)."""
    (mark,) = [m for m in test_fn.pytestmark if m.name == "parametrize"]
    return mark.args[1]


def _emitted() -> list[dict]:
    """Every violation the preflight tests' failing inputs produce."""
    out = []
    for case in test_preflight.FAILING:
        out += test_preflight._run(case[1], case[2])
    out += test_preflight._run("broken", test_preflight.brief_set())
    for _id, path, value, _code, _sev in test_storage_checks.CASES:
        brief, groups, hostvars = test_storage_checks.good()
        set_path(brief, path, value)
        out += check(brief, groups, hostvars)
    for _id, path, value, _code, _sev in test_workload.CASES:
        brief, groups, hostvars = test_workload.good()
        set_path(brief, path, value)
        out += check(brief, groups, hostvars)
    # test_storage_checks' per-host scratch devices and consent to wipe, as strings.
    brief, groups, hostvars = test_storage_checks.good()
    hostvars[groups["gpu_h100"][0]].update(storage_scratch_devices="/dev/nvme0n1", storage_scratch_wipe="yes")
    out += check(brief, groups, hostvars)
    # test_workload's Kubernetes workload whose pool no tenant may use.
    brief, groups, hostvars = test_workload.good()
    brief["cluster"]["control_plane"] = "kubernetes"
    brief["tenants"] = [{"name": "a", "gpus": 1, "pools": ["elsewhere"]}]
    out += check(brief, groups, hostvars)
    for path, value, _code, _field in test_brief_schema.FAILING:
        brief, groups, hostvars = site("slurm")
        set_path(brief, path, value)
        out += check(brief, groups, hostvars)
    for mutate, _expected in _param_values(test_k8s.test_preflight_kubernetes_checks):
        brief, groups, hostvars = site("k8s")
        mutate(brief, groups, hostvars)
        out += check(brief, groups, hostvars)
    for args in _param_values(test_preflight.test_garbage_never_crashes):
        out += check(*args)
    return out


@pytest.fixture(scope="module")
def emitted():
    return _emitted()


def test_every_emitted_code_is_in_the_table_with_its_severity(emitted):
    assert len(emitted) > 300
    wrong = {(v["code"], v["severity"]) for v in emitted if v["code"] not in codes.CODES}
    wrong |= {(v["code"], v["severity"]) for v in emitted if v["code"] in codes.CODES} - {
        (c.code, c.severity) for c in codes.CODES.values()
    }
    assert wrong == set()


def test_every_code_in_the_table_is_emitted_or_produced_elsewhere(emitted):
    assert set(codes.CODES) - {v["code"] for v in emitted} == set(ELSEWHERE)
    for code, path in ELSEWHERE.items():
        with open(path, encoding="utf-8") as fh:
            assert f'"{code}"' in fh.read(), (code, path)
    assert reader.vault_skipped("gpu01")["severity"] == codes.severity("INPUT_VAULT_SKIPPED")


def _make_calls(path: str) -> list[tuple[str, str | None]]:
    """(code, variant) of every ``make(...)`` call with a literal code in a source file."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "make":
            first = node.args[0]
            assert isinstance(first, ast.Constant), f"{path}:{node.lineno}: make() with a computed code"
            variant = next((k.value.value for k in node.keywords if k.arg == "variant"), None)
            calls.append((first.value, variant))
    return calls


def test_every_make_call_names_a_code_and_wording_of_the_table():
    calls = [call for path in MAKERS if path.endswith(".py") for call in _make_calls(path)]
    assert len(calls) > 100
    for code, variant in calls:
        template = codes.CODES[code].template
        assert template is not None, code
        if isinstance(template, str):
            assert variant is None, code
        else:
            assert variant in template, (code, variant)
    # Each wording of the table is used by some call.
    used = set(calls)
    for c in codes.CODES.values():
        if isinstance(c.template, str):
            assert (c.code, None) in used, c.code
        elif c.template is not None:
            assert {(c.code, v) for v in c.template} <= used, c.code


def test_no_violation_is_built_by_hand_in_the_preflight():
    for path in MAKERS:
        if path.endswith(".py"):
            with open(path, encoding="utf-8") as fh:
                assert "violation(" not in fh.read(), path


def test_the_table_is_well_formed():
    for c in codes.CODES.values():
        assert re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+", c.code), c.code
        assert c.severity in ("error", "warning") and c.section in codes.SECTIONS and c.what, c
        # Only the codes another module words have no template here.
        assert (c.template is None) == (
            c.producer in {"module_utils/brief/schema.py", "module_utils/inventory/reader.py"}
        )
        templates = [] if c.template is None else [c.template] if isinstance(c.template, str) else c.template.values()
        for t in templates:
            assert "expected" in t, c.code
        assert c.anchor.startswith("docs/preflight-checks.md#")


def test_a_code_not_in_the_table_cannot_be_made():
    with pytest.raises(KeyError):
        codes.make("NET_TYPO", "networks")
    with pytest.raises(KeyError):
        codes.make("NET_TOO_SMALL", "networks.bmc.cidr", variant="nope", need=1, net="x", usable=0)
    with pytest.raises(TypeError):
        codes.make("SCHEMA_BAD_ENUM", "cluster.control_plane")
    v = codes.make("NET_MTU_RANGE", "networks.management.mtu", lo=1280, hi=9216, kind="ethernet", mtu=99)
    assert v == {
        "severity": "error",
        "code": "NET_MTU_RANGE",
        "host": None,
        "field": "networks.management.mtu",
        "message": "expected an MTU of 1280-9216 for ethernet, found 99",
    }


def test_each_section_anchor_is_a_heading_of_the_doc():
    sys.path.insert(0, os.path.join(ROOT, "tests", "unit"))
    try:
        from test_doc_links import anchors
    finally:
        sys.path.pop(0)
    headings = anchors(DOC)
    for section in codes.SECTIONS.values():
        assert section.anchor in headings, section.heading


def test_the_doc_is_current():
    proc = subprocess.run([sys.executable, SCRIPT, "--check"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_the_check_fails_on_a_stale_doc(tmp_path):
    """A copy of the script and doc with one severity edited by hand: --check says so, a run restores it."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "docs").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts")
    (tmp_path / "collections").symlink_to(os.path.join(ROOT, "collections"))
    with open(DOC, encoding="utf-8") as fh:
        doc = fh.read()
    row = "| `NET_K8S_UNUSED` | W |"
    assert row in doc
    (tmp_path / "docs" / "preflight-checks.md").write_text(doc.replace(row, "| `NET_K8S_UNUSED` | E |"))
    copy = str(tmp_path / "scripts" / "gen_preflight_doc")
    proc = subprocess.run([sys.executable, copy, "--check"], capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "out of date" in proc.stderr
    assert subprocess.run([sys.executable, copy], check=False).returncode == 0
    assert (tmp_path / "docs" / "preflight-checks.md").read_text() == doc
