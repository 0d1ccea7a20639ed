"""The outlier rule's least absolute distance per figure (acceptance.outliers.min_abs)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import outliers as ao
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import schema


def scratch(host: str, write: float) -> dict:
    """A storage record with one measured scratch target (what storage.yml leaves)."""
    return {"host": host, "targets": [{"kind": "scratch", "status": "measured", "write": {"gbps": write}}]}


def judge(writes: dict[str, float], **outliers) -> list[tuple[str, str]]:
    brief = {"acceptance": {"outliers": outliers}} if outliers else {}
    _, found = ao.judge(brief, pools=dict.fromkeys(writes, "p"), storage=[scratch(h, v) for h, v in writes.items()])
    return [(v["code"], v["host"]) for v in found]


# Container disks of about 1 GB/s on loaded machines: one node 0.1 GB/s (10 %) under the others.
CONTAINER = {f"n{i}": v for i, v in enumerate([1.01, 0.99, 1.00, 1.02, 0.98, 1.00, 0.90, 1.01])}
# NVMe scratch of about 25 GB/s: one node 10 % (2.5 GB/s) under the others.
NVME = {f"n{i}": v for i, v in enumerate([25.1, 24.9, 25.0, 25.2, 24.8, 25.0, 22.5, 25.1])}


def test_without_min_abs_a_small_absolute_spread_is_named():
    assert judge(CONTAINER) == [("STORAGE_OUTLIER", "n6")]


def test_min_abs_keeps_the_noise_of_a_small_disk_from_naming_a_node():
    assert judge(CONTAINER, min_abs={"scratch_write": 0.15}) == []


def test_min_abs_leaves_a_real_gap_on_fast_drives_named():
    assert judge(NVME, min_abs={"scratch_write": 0.15}) == [("STORAGE_OUTLIER", "n6")]


def test_min_abs_of_another_figure_changes_nothing_here():
    assert judge(CONTAINER, min_abs={"scratch_read": 0.15}) == [("STORAGE_OUTLIER", "n6")]


@pytest.mark.parametrize(
    "min_abs, message",
    [
        ({"scratch": 0.1}, "min_abs.scratch: expected one of single_node_busbw"),
        ({"scratch_write": -0.1}, "min_abs.scratch_write: expected a number at least 0"),
        ({"scratch_write": True}, "min_abs.scratch_write: expected a number at least 0"),
        ([0.1], "min_abs: expected a mapping"),
    ],
)
def test_settings_name_a_bad_min_abs(min_abs, message):
    with pytest.raises(ao.OutlierError, match=message):
        ao.settings({"acceptance": {"outliers": {"min_abs": min_abs}}})


def test_the_brief_schema_knows_the_same_figures_and_names_a_bad_one():
    assert set(schema.OUTLIER_METRICS) == set(ao.METRICS)
    errors, clean = schema.validate({"acceptance": {"outliers": {"min_abs": {"scratch_write": 0.2, "disk": 1}}}})
    assert [e["field"] for e in errors if e["field"].startswith("acceptance.outliers")] == [
        "acceptance.outliers.min_abs.disk"
    ]
    assert clean["acceptance"]["outliers"]["min_abs"] == {"scratch_write": 0.2}
