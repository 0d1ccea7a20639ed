from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import compat


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("570.133.20", (570, 133, 20)),
        ("2.26.2-1+cuda12.8", (2, 26, 2)),
        ("12.8", (12, 8)),
        (12.8, (12, 8)),
        ("v1.2", (1, 2)),
        ("", None),
        ("abc", None),
        (None, None),
        (True, None),
        ("9" * 100, None),
    ],
)
def test_parse_version(text, parsed):
    assert compat.parse_version(text) == parsed


@pytest.mark.parametrize(
    ("a", "b", "res"),
    [
        ("570.26", "570.26.0", 0),
        ("570.133.20", "570.26", 1),
        ("12.8", "12.10", -1),
        ("x", "1", None),
    ],
)
def test_compare(a, b, res):
    assert compat.compare_versions(a, b) == res


@pytest.mark.parametrize(
    ("cuda", "driver", "ok"),
    [
        ("12.8", "570.26", True),
        ("12.8", "570.133.20", True),
        ("12.8", "565.57.01", False),
        ("13.0", "580.65.06", True),
        ("13.0", "575.57.08", False),
        ("12.2", "535.54.03", True),
    ],
)
def test_cuda_driver(cuda, driver, ok):
    assert compat.cuda_driver_ok(cuda, driver) is ok


def test_cuda_min_driver_unknown_minor_falls_back():
    assert compat.cuda_min_driver("12.8") == ("570.26", True)
    assert compat.cuda_min_driver("13.9") == ("580.65.06", False)
    assert compat.cuda_min_driver("99.0") == (None, False)


@pytest.mark.parametrize(
    ("nccl", "majors"),
    [
        ("2.26.2", (12,)),
        ("2.21.5", (11, 12)),
        ("2.27.7", (12, 13)),
        ("2.28.3", (12, 13)),
        ("1.3.4", None),
    ],
)
def test_nccl_majors(nccl, majors):
    assert compat.nccl_cuda_majors(nccl) == majors


def test_driver_branch():
    assert compat.driver_branch("570.133.20") == 570
    assert compat.driver_branch("junk") is None
