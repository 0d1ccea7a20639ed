"""Property-based fuzz test of everything the CLI reads: preflight, ``nccl parse``, ``inventory generate``
and the report readers, fed generated structures, mutated real fixtures and hostile shapes.

For every input: the command finishes within its time budget, exits 0, 1 or 2, prints no traceback, and
never reaches the CLI's last-resort handler for errors nobody foresaw (that handler is replaced here by one
that re-raises, so that Hypothesis shows and shrinks the input that got there). And a brief string given a
new meaning where a role writes it (a control character, a line break that starts a new directive) is an
error naming its field; Jinja in one is at least a warning.

The commands run in this process (``gpufleet_cli.main.main``), so each example costs milliseconds.
Hypothesis runs derandomized, without an example database: the same examples on every machine.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from unittest import mock

import pytest
import yaml
from gpufleet_cli import main as cli_main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
NCCL = ROOT / "collections/ansible_collections/gpufleet/cluster/tests/unit/fixtures/nccl"
RACKS = ROOT / "tests" / "fixtures" / "racks"
# The sites whose brief and inventory are mutated: the repository's, and the shared examples when present.
SITES = sorted(p for p in (ROOT / "inventories").iterdir() if (p / "brief.yml").is_file())
EXAMPLES = Path("/work/shared/examples")
if (EXAMPLES / "brief.yml").is_file() and (EXAMPLES / "hosts.yml").is_file():
    SITES.append(EXAMPLES)

# One command's wall-clock budget: an example that hangs fails here instead of holding the suite.
BUDGET_S = 10
# GPUFLEET_FUZZ_EXAMPLES=500 GPUFLEET_FUZZ_RANDOM=1 explores further (new examples each run) by hand.
FUZZ = settings(
    max_examples=int(os.environ.get("GPUFLEET_FUZZ_EXAMPLES", "12")),
    deadline=None,  # the per-command alarm below is the time budget
    derandomize=not os.environ.get("GPUFLEET_FUZZ_RANDOM"),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Unforeseen(AssertionError):
    """The CLI reached its handler for errors no check foresaw."""


def _reraise(args, exc):
    raise Unforeseen(f"{args.command}: {type(exc).__name__}: {exc}") from exc


def _alarm(_signum, _frame):
    raise TimeoutError(f"a command ran past its {BUDGET_S} s budget")


def cli(*argv: str) -> tuple[int, str, str]:
    """Run the CLI in this process: (exit code, stdout, stderr), checked against the properties."""
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(BUDGET_S)
    t0 = time.monotonic()
    try:
        with (
            mock.patch.object(cli_main, "_unexpected", _reraise),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                rc = cli_main.main(list(argv))
            except SystemExit as exc:  # argparse
                rc = exc.code if isinstance(exc.code, int) else 2
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    elapsed = time.monotonic() - t0
    text_out, text_err = out.getvalue(), err.getvalue()
    assert rc in (0, 1, 2), (rc, text_err[-2000:])
    assert "Traceback" not in text_out + text_err, text_err[-2000:]
    assert elapsed < BUDGET_S
    if rc == 2:
        assert "gpufleet: " in text_err, "exit 2 without saying why"
    return rc, text_out, text_err


# --- values ------------------------------------------------------------------------------------------

HOSTILE_SCALARS = [
    math.nan,
    math.inf,
    -math.inf,
    1e308,
    -1,
    0,
    2**64,
    10**300,
    10**4000,
    -(10**4000),
    True,
    None,
    "",
    "²",
    "٣",
    "9" * 5000,
    "h100-train\n",
    "/export/data\n[Unit]\nOnFailure=x.service",
    "{{ lookup('pipe', 'id') }}",
    "a\x00b",
    "10.0.0.1\x00",
    "x" * 5000,
    "n[0:999999]x[0:999999]",
    "../../etc/passwd",
    "10.0.0.0/33",
    "0x" + "f" * 40,
]

scalars = st.one_of(
    st.sampled_from(HOSTILE_SCALARS),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.booleans(),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(min_size=1, max_size=12), inner, max_size=4),
    ),
    max_leaves=12,
)

# Text put into a YAML file as it is, where a structure cannot carry it (a dump would escape it).
YAML_SNIPPETS = [
    "_bomb0: &a [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"_bomb{i}: &b{i} [{', '.join(['*a' if i == 1 else f'*b{i - 1}'] * 10)}]\n" for i in range(1, 10))
    + "_boom: *b9\n",
    "_big: " + "9" * 5000 + "\n",
    "_hex: 0x" + "f" * 5000 + "\n",
    "_inf: .inf\n_nan: .nan\n",
    "_deep: " + "[" * 400 + "]" * 400 + "\n",
    "_rec: &r [1, *r]\n",
    "\x00\n",
    "\t- tab\n",
    "? [a, b]\n: c\n",
    "_dup: 1\n_dup: 2\n",
    "!!python/object:os.system {}\n",
]


# --- mutations of a structure -------------------------------------------------------------------------


def _paths(data, prefix=()):
    """Every (container path, key) in a parsed document, containers first."""
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, (*prefix, i))
    return out


def _get(data, path):
    for key in path:
        data = data[key]
    return data


@st.composite
def mutated(draw, document):
    """``document`` (parsed) with one to three of its values replaced, deleted or grown."""
    doc = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if not path:
            if action == "replace":
                doc = draw(values)
            continue
        parent = _get(doc, path[:-1])
        key = path[-1]
        if action == "replace":
            parent[key] = draw(values)
        elif action == "delete":
            del parent[key]
        else:
            target = parent[key]
            if isinstance(target, dict):
                target[draw(st.text(min_size=1, max_size=12))] = draw(values)
            elif isinstance(target, list):
                target.append(draw(values))
            else:
                parent[key] = [target, draw(values)]
    return doc


def _dump(data) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)


def _insert(text: str, snippet: str, at: int) -> str:
    lines = text.splitlines(keepends=True)
    at %= len(lines) + 1
    return "".join([*lines[:at], snippet, *lines[at:]])


@contextlib.contextmanager
def scratch():
    with tempfile.TemporaryDirectory(prefix="gpufleet-fuzz-") as d:
        yield Path(d)


# --- preflight ----------------------------------------------------------------------------------------


def _copy_site(site: Path, dest: Path) -> Path:
    dest.mkdir()
    for name in ("brief.yml", "hosts.yml", "group_vars", "host_vars"):
        src = site / name
        if src.is_dir():
            shutil.copytree(src, dest / name)
        elif src.is_file():
            shutil.copy(src, dest / name)
    return dest


@FUZZ
@given(data=st.data(), site=st.sampled_from(SITES), which=st.sampled_from(["brief.yml", "hosts.yml"]))
def test_preflight_on_mutated_sites(data, site, which):
    original = yaml.safe_load((site / which).read_text())
    doc = data.draw(mutated(original))
    with scratch() as tmp:
        d = _copy_site(site, tmp / "site")
        (d / which).write_text(_dump(doc))
        cli("preflight", "-i", str(d))


def _field(path) -> str:
    """A path into the brief as preflight names fields: ``pools[0].name``."""
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out


# Text that gives a brief string a new meaning where a role writes it: a line break that starts a
# new directive (a systemd unit, slurm.conf), a NUL, a terminal escape, Unicode's line separator. Each
# holds a character no field admits (a carriage return is refused even where newlines are allowed).
NEW_MEANING = ["\r\n[Unit]\nOnFailure=other.service", "\x00", "\x1b[2J", "\u2028", "\r"]
# Jinja: never evaluated (the brief is data), but warned about.
JINJA = ["{{ lookup('pipe', 'id') }}", "{% if true %}x{% endif %}", "{# note #}"]


@pytest.mark.parametrize("jinja", [False, True], ids=["control", "jinja"])
@pytest.mark.parametrize("site", SITES, ids=lambda p: p.name)
def test_every_brief_string_given_a_new_meaning_is_reported(site, jinja):
    """Every string of a real brief at once, each given a control character (or Jinja) in its middle:
    one preflight run must name every one of those fields."""
    brief = yaml.safe_load((site / "brief.yml").read_text())
    paths = [p for p in _paths(brief) if p and isinstance(_get(brief, p), str)]
    snippets = JINJA if jinja else NEW_MEANING
    for i, path in enumerate(paths):
        value = _get(brief, path)
        mid = len(value) // 2
        _get(brief, path[:-1])[path[-1]] = value[:mid] + snippets[i % len(snippets)] + value[mid:]
    with scratch() as tmp:
        d = _copy_site(site, tmp / "site")
        (d / "brief.yml").write_text(_dump(brief))
        rc, out, err = cli("preflight", "-i", str(d), "--format", "json")
    fields = [v["field"] for v in json.loads(out)["violations"]]
    missed = [_field(p) for p in paths if not any(f == _field(p) or f.startswith(_field(p) + ".") for f in fields)]
    assert paths and not missed, f"preflight said nothing of {missed} ({err})"
    if not jinja:
        assert rc == 1


@FUZZ
@given(data=st.data(), site=st.sampled_from(SITES), jinja=st.booleans())
def test_a_brief_string_given_a_new_meaning_is_reported(data, site, jinja):
    """Any string of a real brief, given a control character or Jinja anywhere, is reported by preflight
    naming that field: an error for the control character, a warning at least for Jinja."""
    brief = yaml.safe_load((site / "brief.yml").read_text())
    paths = [p for p in _paths(brief) if p and isinstance(_get(brief, p), str)]
    path = data.draw(st.sampled_from(paths))
    value = _get(brief, path)
    at = data.draw(st.integers(0, len(value)))
    snippet = data.draw(st.sampled_from(JINJA if jinja else NEW_MEANING))
    _get(brief, path[:-1])[path[-1]] = value[:at] + snippet + value[at:]
    with scratch() as tmp:
        d = _copy_site(site, tmp / "site")
        (d / "brief.yml").write_text(_dump(brief))
        rc, out, err = cli("preflight", "-i", str(d), "--format", "json")
    field = _field(path)
    found = [v for v in json.loads(out)["violations"] if v["field"] == field or v["field"].startswith(field + ".")]
    assert found, f"{field} = {value[:at] + snippet + value[at:]!r}: preflight said nothing of it ({err})"
    if not jinja:
        assert rc == 1 and any(v["severity"] == "error" for v in found), found


@FUZZ
@given(
    site=st.sampled_from(SITES),
    which=st.sampled_from(["brief.yml", "hosts.yml", "group_vars/all/fuzz.yml"]),
    snippet=st.sampled_from(YAML_SNIPPETS),
    at=st.integers(0, 200),
)
def test_preflight_on_hostile_yaml_text(site, which, snippet, at):
    with scratch() as tmp:
        d = _copy_site(site, tmp / "site")
        path = d / which
        path.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text() if path.exists() else ""
        path.write_text(_insert(text, snippet, at))
        rc, _out, err = cli("preflight", "-i", str(d))
        if snippet.startswith(("_bomb0", "_big", "_hex", "_dup", "_rec")) and at % (text.count("\n") + 1) == 0:
            # At the top of the file the snippet is a top-level key: the file is refused, naming it.
            assert rc == 2 and which.split("/")[-1] in err


@FUZZ
@given(
    site=st.sampled_from(SITES),
    which=st.sampled_from(["brief.yml", "hosts.yml", "group_vars/all.yml", "host_vars/fuzz.yml"]),
    kind=st.sampled_from(["fifo", "dev-zero", "directory", "dangling-link"]),
)
def test_preflight_on_special_files(site, which, kind):
    with scratch() as tmp:
        d = _copy_site(site, tmp / "site")
        path = d / which
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        if which == "group_vars/all.yml" and (d / "group_vars" / "all").is_dir():
            shutil.rmtree(d / "group_vars" / "all")
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "dev-zero":
            path.symlink_to("/dev/zero")
        elif kind == "directory":
            path.mkdir()
        else:
            path.symlink_to(tmp / "nothing-here")
        rc, _out, err = cli("preflight", "-i", str(d))
        if kind != "directory":
            assert rc == 2 and which.split("/")[0] in err


# --- nccl parse ---------------------------------------------------------------------------------------

numbers = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 10**300, -1, 0, 1.5, "²", "9" * 5000, None, [], {}]),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True),
)
result_records = st.fixed_dictionaries(
    {"size": numbers},
    optional={
        "type": values,
        "count": numbers,
        "out_of_place": st.dictionaries(st.sampled_from(["bus_bw", "nwrong", "time", "alg_bw"]), numbers),
        "in_place": st.dictionaries(st.sampled_from(["bus_bw", "nwrong", "time", "cpu_time"]), numbers),
    },
)
json_docs = st.fixed_dictionaries(
    {"results": st.one_of(st.lists(result_records, max_size=5), values)},
    optional={
        "errors": values,
        "devices": values,
        "config": values,
        "args": values,
        "out_of_bounds": st.one_of(values, st.fixed_dictionaries({"count": numbers})),
        "average_bus_bandwidth": st.one_of(values, st.fixed_dictionaries({"bandwidth": numbers})),
        "nccl_version": numbers,
    },
)
NCCL_TEXTS = sorted(p for p in NCCL.iterdir() if p.suffix == ".txt")
TOKENS = ["²", "9" * 5000, "1e999", "-1e999", "nan", "inf", "N/A", "-", "", "٣", "0x10", "1" * 40]


@FUZZ
@given(doc=json_docs)
def test_nccl_parse_on_generated_json(doc):
    with scratch() as tmp:
        (tmp / "run.json").write_text(json.dumps(doc, allow_nan=True))
        for fmt in ("json", "text"):
            rc, _out, _err = cli("nccl", "parse", str(tmp / "run.json"), "--format", fmt)
            assert rc in (0, 1)  # 1: a run that failed or was cut short


@FUZZ
@given(data=st.data())
def test_nccl_parse_on_mutated_json_fixture(data):
    doc = data.draw(mutated(json.loads((NCCL / "allreduce_2node_h100_ib.json").read_text())))
    with scratch() as tmp:
        (tmp / "run.json").write_text(json.dumps(doc, allow_nan=True))
        rc, _out, _err = cli("nccl", "parse", str(tmp / "run.json"), "--format", "text")
        assert rc in (0, 1)


@FUZZ
@given(fixture=st.sampled_from(NCCL_TEXTS), data=st.data())
def test_nccl_parse_on_mutated_text_logs(fixture, data):
    lines = fixture.read_text().splitlines()
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(lines) - 1))
        tokens = lines[i].split() or [""]
        j = data.draw(st.integers(0, len(tokens) - 1))
        tokens[j] = data.draw(st.sampled_from(TOKENS))
        lines[i] = "  " + " ".join(tokens)
    with scratch() as tmp:
        (tmp / "run.log").write_text("\n".join(lines) + "\n")
        rc, _out, _err = cli("nccl", "parse", str(tmp / "run.log"), "--format", "text")
        assert rc in (0, 1)


# --- inventory generate -------------------------------------------------------------------------------

CELLS = ["²", "9" * 5000, "gpu" + "9" * 70, "", ",", '"', "\n", "x\x00", "-1", "10.20.0.1", "zz:zz", "٣", "0"]


@FUZZ
@given(data=st.data(), dry_run=st.booleans())
def test_inventory_generate_on_mutated_sheets(data, dry_run):
    rows = (RACKS / "4rack.csv").read_text().splitlines()
    header_at = next(i for i, r in enumerate(rows) if r.startswith("hostname,"))
    width = len(rows[header_at].split(","))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(header_at, len(rows)))
        if i == len(rows):
            rows.append(",".join(data.draw(st.sampled_from(CELLS)) for _ in range(width)))
            continue
        cells = rows[i].split(",")
        j = data.draw(st.integers(0, len(cells) - 1))
        cells[j] = data.draw(st.one_of(st.sampled_from(CELLS), st.text(max_size=12)))
        rows[i] = ",".join(cells)
    with scratch() as tmp:
        (tmp / "racks.csv").write_text("\n".join(rows) + "\n")
        argv = ["inventory", "generate", "--brief", str(RACKS / "brief.yml"), "--racks", str(tmp / "racks.csv")]
        cli(*argv, "-o", str(tmp / "out"), *(["--dry-run"] if dry_run else []))


@FUZZ
@given(brief=mutated(yaml.safe_load((RACKS / "brief.yml").read_text())))
def test_inventory_generate_with_mutated_briefs(brief):
    with scratch() as tmp:
        (tmp / "brief.yml").write_text(_dump(brief))
        argv = ["inventory", "generate", "--brief", str(tmp / "brief.yml"), "--racks", str(RACKS / "4rack.csv")]
        cli(*argv, "-o", str(tmp / "out"), "--dry-run")


# --- the report readers -------------------------------------------------------------------------------


def _acceptance_report() -> dict:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_tests
    from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import report as rep

    runs, _ = nccl_tests.parse((NCCL / "allreduce_multi_runs_single_node.txt").read_text(), "single.txt")
    run = {"label": "single-node gpu01", "scope": "single-node", "host": "gpu01", "run": runs[0], "floor_gbps": 1}
    return rep.build_report("lab", runs=[run], timestamp="20260302T101500Z")


ACCEPTANCE = _acceptance_report()
GATE_RECORD = {
    "host": "gpu02",
    "pool": "h100-train",
    "status": "fail",
    "summary": {"gpus": "7x NVIDIA H100 80GB HBM3", "driver": "570.133.20"},
    "violations": [{"severity": "error", "code": "HW_GPU_COUNT", "host": "gpu02", "field": "gpus", "message": "x"}],
    "facts": {"gpus": []},
}


@FUZZ
@given(
    data=st.data(),
    kind=st.sampled_from(["acceptance.json", "gate/gpu02.json", "drift.json", "history.jsonl", "special"]),
)
def test_report_readers_on_mutated_reports(data, kind):
    with scratch() as tmp:
        run_dir = tmp / "lab" / "20260302T101500Z"
        run_dir.mkdir(parents=True)
        if kind == "acceptance.json":
            (run_dir / kind).write_text(json.dumps(data.draw(mutated(ACCEPTANCE)), allow_nan=True))
        elif kind == "gate/gpu02.json":
            (run_dir / "gate").mkdir()
            (run_dir / kind).write_text(json.dumps(data.draw(mutated(GATE_RECORD)), allow_nan=True))
        elif kind == "drift.json":
            (run_dir / kind).write_text(json.dumps(data.draw(st.one_of(values, json_docs)), allow_nan=True))
        elif kind == "history.jsonl":
            lines = [json.dumps(data.draw(values), allow_nan=True) for _ in range(3)]
            lines.append('{"host": "gpu01", "time": "2026-01-01T00:00:00Z", "n": ' + "9" * 5000 + "}")
            (tmp / "lab" / "history.jsonl").write_text("\n".join(lines) + "\n")
            cli("report", "history", "gpu01", "--dir", str(tmp), "--cluster", "lab")
            return
        else:
            os.mkfifo(run_dir / "acceptance.json")
        cli("report", "--dir", str(tmp))
        cli("report", "--dir", str(tmp), "--list")
