"""Brief values that would change what the roles write: a name with a final newline, a shared mount's
export carrying unit directives, Jinja in free text, an infinite number. Each shape is a named test
run through the whole preflight gate (``check``), plus one test per rule over every string field of
the schema.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import schema
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.reader import load_yaml_text
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.gate import check
from ansible_collections.gpufleet.cluster.plugins.module_utils.storage.plane import StoragePlanError, shared_mounts
from ansible_collections.gpufleet.cluster.tests.unit.preflight_helpers import set_path, site


def _check(mutations, name="slurm"):
    brief, groups, hostvars = site(name)
    for path, value in mutations:
        set_path(brief, path, value)
    return check(brief, groups, hostvars)


def _at(violations, field):
    return [v for v in violations if v["field"] == field]


def _errors(violations):
    return [v for v in violations if v["severity"] == "error"]


def test_trailing_newline_in_a_pool_name_is_an_error():
    # "h100-train\n" would end slurm.conf's PartitionName= line early and start another.
    violations = _check([("pools.0.name", "h100-train\n")])
    (hit,) = _at(violations, "pools[0].name")
    assert hit["code"] == "SCHEMA_CONTROL_CHAR" and hit["severity"] == "error"
    assert "'\\n'" in hit["message"] and "position 10" in hit["message"]
    assert "'h100-train\\n'" in hit["message"]


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("cluster.name", "lab\n", "cluster.name"),
        ("controllers.group", "slurm_controllers\n", "controllers.group"),
        ("tenants", [{"name": "team-a\n", "gpus": 1}], "tenants[0].name"),
        ("storage", {"scratch": {"path": "/scratch/local\n"}}, "storage.scratch.path"),
        ("storage", {"scratch": {"devices": ["/dev/nvme0n1\n"]}}, "storage.scratch.devices[0]"),
        ("pools.0.scratch_devices", ["/dev/nvme1n1\n"], "pools[0].scratch_devices[0]"),
        (
            "storage",
            {"scratch": {"mount_options": "noatime\nx-systemd.wanted-by=evil"}},
            "storage.scratch.mount_options",
        ),
    ],
    ids=["cluster name", "controllers group", "tenant", "scratch path", "scratch device", "pool device", "options"],
)
def test_trailing_newline_in_names_paths_and_devices_is_an_error(path, value, field):
    hits = _errors(_at(_check([(path, value)]), field))
    assert [v["code"] for v in hits] == ["SCHEMA_CONTROL_CHAR"], hits


def test_newline_injected_export_is_an_error_and_never_reaches_a_unit():
    export = "/export/data\n[Unit]\nOnFailure=evil.service"
    mount = {"server": "10.0.3.10", "export": export, "path": "/shared"}
    violations = _check([("storage", {"shared": [mount]})])
    (hit,) = _at(violations, "storage.shared[0].export")
    assert hit["code"] == "SCHEMA_CONTROL_CHAR" and hit["severity"] == "error"
    assert "'/export/data\\n[Unit]" in hit["message"]
    # The role's own plan refuses it too, should it be handed such a brief without preflight.
    with pytest.raises(StoragePlanError, match="export"):
        shared_mounts([mount], {"nfs": "defaults"})


@pytest.mark.parametrize(
    "export",
    ["export/data", "/export/../etc", "/export/ data", "/export/./data"],
    ids=["relative", "dotdot", "space", "dot"],
)
def test_an_nfs_export_must_be_a_clean_absolute_path(export):
    mount = {"server": "10.0.3.10", "export": export, "path": "/shared"}
    hits = _at(_check([("storage", {"shared": [mount]})]), "storage.shared[0].export")
    assert [v["code"] for v in hits] == ["STORAGE_SHARED_EXPORT"]
    assert "expected an absolute exported path" in hits[0]["message"] and repr(export) in hits[0]["message"]


def test_a_clean_export_passes():
    mount = {"server": "10.0.3.10", "export": "/export/data-1", "path": "/shared"}
    assert _at(_check([("storage", {"shared": [mount]})]), "storage.shared[0].export") == []


def test_jinja_in_a_free_text_field_is_a_warning_naming_the_field():
    text = "{{ lookup('pipe', 'touch /tmp/xyz') }}"
    violations = _check([("cluster.description", text)])
    (hit,) = _at(violations, "cluster.description")
    assert hit["code"] == "SCHEMA_TEMPLATE_SYNTAX" and hit["severity"] == "warning"
    assert "'{{'" in hit["message"] and "never templates" in hit["message"]
    assert _errors(violations) == []


@pytest.mark.parametrize("text", ["{% if true %}x{% endif %}", "note {# hidden #}"], ids=["statement", "comment"])
def test_every_jinja_delimiter_warns(text):
    (hit,) = _at(_check([("cluster.description", text)]), "cluster.description")
    assert hit["code"] == "SCHEMA_TEMPLATE_SYNTAX"


def test_jinja_in_a_brief_read_from_yaml_warns():
    brief, groups, hostvars = site("slurm")
    text = "cluster: {description: \"{{ lookup('pipe', 'id') }}\"}\n"
    brief["cluster"]["description"] = load_yaml_text(text, "brief.yml")["cluster"]["description"]
    (hit,) = _at(check(brief, groups, hostvars), "cluster.description")
    assert hit["code"] == "SCHEMA_TEMPLATE_SYNTAX"


def test_a_multi_line_description_and_command_pass():
    violations = _check(
        [
            ("cluster.description", "Training cluster.\n\tRack A and B.\n"),
            ("acceptance.workload", {"command": "cd /opt/w\npython3 train.py\n", "checkpoint_dir": "/ckpt"}),
        ]
    )
    assert _at(violations, "cluster.description") == []
    assert _at(violations, "acceptance.workload.command") == []


def test_other_control_characters_fail_even_in_multi_line_fields():
    violations = _check([("cluster.description", "ok\x1b[31m red"), ("cluster.name", "lab\u2028x")])
    assert [v["code"] for v in _at(violations, "cluster.description")] == ["SCHEMA_CONTROL_CHAR"]
    assert "'\\x1b'" in _at(violations, "cluster.description")[0]["message"]
    assert [v["code"] for v in _at(violations, "cluster.name")] == ["SCHEMA_CONTROL_CHAR"]


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("cost", "cost.monthly.compute"),
        ("pools.0.nvme", "pools[0].nvme.min_size_gb"),
        ("acceptance.single_node_busbw_gbps", "acceptance.single_node_busbw_gbps"),
        ("pools.0.acceptance", "pools[0].acceptance.multi_node_busbw_gbps"),
    ],
    ids=["cost", "nvme size", "floor", "pool floor"],
)
def test_non_finite_numbers_are_errors_naming_the_field(path, field, value):
    shaped = {
        "cost": {"monthly": {"compute": value}, "unit": {"name": "job"}},
        "pools.0.nvme": {"count": 8, "min_size_gb": value},
        "pools.0.acceptance": {"multi_node_busbw_gbps": value},
    }.get(path, value)
    (hit,) = _at(_check([(path, shaped)]), field)
    assert hit["code"] == "SCHEMA_WRONG_TYPE" and hit["severity"] == "error"
    assert "expected a finite number" in hit["message"] and repr(value) in hit["message"]


def test_yaml_inf_in_a_brief_is_an_error():
    brief, groups, hostvars = site("slurm")
    brief["pools"][0]["nvme"] = load_yaml_text("{count: 8, min_size_gb: .inf}", "brief.yml")
    (hit,) = _at(check(brief, groups, hostvars), "pools[0].nvme.min_size_gb")
    assert hit["code"] == "SCHEMA_WRONG_TYPE"


# --- one rule over every string of the schema ---------------------------------------------------


def _string_nodes(node, path=""):
    """(path, Str node) for every string field the schema defines, lists as [0]."""
    if isinstance(node, schema.Map):
        for name, spec in node.fields.items():
            yield from _string_nodes(spec.node, f"{path}.{name}" if path else name)
    elif isinstance(node, schema.List):
        yield from _string_nodes(node.item, f"{path}[0]")
    elif isinstance(node, schema.Str):
        yield path, node


STRINGS = list(_string_nodes(schema.BRIEF))
MULTILINE = {"cluster.description", "acceptance.workload.command"}


def test_the_walk_finds_the_schema_strings():
    paths = {p for p, _ in STRINGS}
    assert {"pools[0].name", "storage.shared[0].export", "cost.unit.name", "tenants[0].group"} <= paths
    assert len(STRINGS) > 50
    assert {p for p, node in STRINGS if node.multiline} == MULTILINE


@pytest.mark.parametrize(("path", "node"), STRINGS, ids=[p for p, _ in STRINGS])
def test_every_string_field_refuses_control_characters(path, node):
    valid = node.choices[0] if node.choices else None
    for bad in ("\x00", "\r", "\x7f", "\x85", "\u2029") + (() if node.multiline else ("\n", "\t")):
        out: list[dict] = []
        value = (valid or "x") + bad
        assert node.check(value, path, out) is None, (path, value)
        assert [v["code"] for v in out] == ["SCHEMA_CONTROL_CHAR"], (path, value, out)
        assert out[0]["field"] == path and "expected" in out[0]["message"] and "found" in out[0]["message"]
