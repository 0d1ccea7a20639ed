# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Version parsing and NVIDIA's compatibility tables (CUDA ↔ driver, NCCL ↔ CUDA).

Pure functions and data, no third-party imports: the drift gate and modules on
targets use the same helpers.
"""

from __future__ import annotations

import re

_VERSION_RE = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")


def parse_version(value: object) -> tuple[int, ...] | None:
    """``"570.133.20"`` → ``(570, 133, 20)``; ``"2.26.2-1+cuda12.8"`` → ``(2, 26, 2)``.

    Leading digits and dots only; returns None when there are none (or for bools).
    YAML floats such as ``12.8`` are accepted as their text.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return (value,)
    if isinstance(value, float):
        value = repr(value)
    if not isinstance(value, str) or len(value) > 64:
        return None
    m = _VERSION_RE.match(value)
    if not m:
        return None
    return tuple(int(p) for p in m.group(1).split("."))


def compare_versions(a: object, b: object) -> int | None:
    """-1, 0 or 1 like ``cmp``, padding the shorter with zeros; None when either does not parse."""
    pa, pb = parse_version(a), parse_version(b)
    if pa is None or pb is None:
        return None
    n = max(len(pa), len(pb))
    pa, pb = pa + (0,) * (n - len(pa)), pb + (0,) * (n - len(pb))
    return (pa > pb) - (pa < pb)


def version_at_least(value: object, minimum: object) -> bool | None:
    c = compare_versions(value, minimum)
    return None if c is None else c >= 0


def major_minor(value: object) -> tuple[int, int] | None:
    p = parse_version(value)
    if p is None:
        return None
    return (p[0], p[1] if len(p) > 1 else 0)


def driver_branch(driver: object) -> int | None:
    """``"570.133.20"`` → 570 (the branch, ``R570``)."""
    p = parse_version(driver)
    return p[0] if p else None


# CUDA toolkit → minimum Linux x86_64 driver, from NVIDIA's CUDA Toolkit release notes,
# "Table 3: CUDA Toolkit and Corresponding Driver Versions" (column "Toolkit Driver Version",
# Linux x86_64), GA release of each minor. Updates within a minor may need a slightly newer
# driver (e.g. 12.8 Update 1 → 570.124.06); the GA figure is what "12.8" means here.
CUDA_MIN_DRIVER: dict[tuple[int, int], str] = {
    (11, 0): "450.36.06",
    (11, 1): "455.23",
    (11, 2): "460.27.03",
    (11, 3): "465.19.01",
    (11, 4): "470.42.01",
    (11, 5): "495.29.05",
    (11, 6): "510.39.01",
    (11, 7): "515.43.04",
    (11, 8): "520.61.05",
    (12, 0): "525.60.13",
    (12, 1): "530.30.02",
    (12, 2): "535.54.03",
    (12, 3): "545.23.06",
    (12, 4): "550.54.14",
    (12, 5): "555.42.02",
    (12, 6): "560.28.03",
    (12, 8): "570.26",
    (12, 9): "575.51.03",
    (13, 0): "580.65.06",
    (13, 1): "590.44.01",
}

# Minimum driver for CUDA *minor version compatibility* within a major (same release notes,
# "Table 2: CUDA Toolkit and Minimum Required Driver Version for CUDA Minor Version Compatibility").
# Used for a minor this table does not list yet: the true minimum is at least this.
CUDA_MAJOR_MIN_DRIVER: dict[int, str] = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


def cuda_min_driver(cuda: object) -> tuple[str | None, bool]:
    """(minimum driver, exact) for a CUDA version. ``exact`` is False when the minor is not in
    Table 3 and the major's minor-compatibility floor is returned instead; (None, False) when
    the major is unknown too."""
    mm = major_minor(cuda)
    if mm is None:
        return None, False
    if mm in CUDA_MIN_DRIVER:
        return CUDA_MIN_DRIVER[mm], True
    return CUDA_MAJOR_MIN_DRIVER.get(mm[0]), False


# NCCL release → CUDA majors NVIDIA builds it for (libnccl2 packages "x.y.z-1+cudaA.B" in NVIDIA's
# CUDA apt/rpm repositories, and each NCCL release note's "Compatibility" section).
# 2.18 to 2.23: CUDA 11 and 12 builds; 2.24 to 2.27.6: CUDA 12 only; 2.27.7 added CUDA 13 builds.
# Ranges are [first, next-first); the last one is open.
NCCL_CUDA_MAJORS: tuple[tuple[tuple[int, ...], tuple[int, ...] | None, tuple[int, ...]], ...] = (
    ((2, 8), (2, 18), (10, 11)),
    ((2, 18), (2, 24), (11, 12)),
    ((2, 24), (2, 27, 7), (12,)),
    ((2, 27, 7), None, (12, 13)),
)


def nccl_cuda_majors(nccl: object) -> tuple[int, ...] | None:
    """CUDA majors the given NCCL is built for; None when the version is unknown or too old."""
    p = parse_version(nccl)
    if p is None:
        return None
    for first, nxt, majors in NCCL_CUDA_MAJORS:
        if p >= first and (nxt is None or p < nxt):
            return majors
    return None


def cuda_driver_ok(cuda: object, driver: object) -> bool | None:
    """Whether ``driver`` meets CUDA's minimum; None when either cannot be judged."""
    minimum, _exact = cuda_min_driver(cuda)
    if minimum is None:
        return None
    return version_at_least(driver, minimum)


__all__ = [
    "CUDA_MAJOR_MIN_DRIVER",
    "CUDA_MIN_DRIVER",
    "NCCL_CUDA_MAJORS",
    "compare_versions",
    "cuda_driver_ok",
    "cuda_min_driver",
    "driver_branch",
    "major_minor",
    "nccl_cuda_majors",
    "parse_version",
    "version_at_least",
]
