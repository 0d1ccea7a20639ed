# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Small helpers shared by the hardware-fact parsers (stdlib only: runs on targets).

Every parser in ``hwfacts_*`` is a pure function ``text -> (data, problems)``:
it never raises on odd input, returns what it understood, and lists what it
could not read as short strings in ``problems``.
"""

from __future__ import annotations

import re

NOT_AVAILABLE = (
    "",
    "n/a",
    "[n/a]",
    "[not supported]",
    "not supported",
    "[unknown error]",
    "none",
    "[insufficient permissions]",
)

_NUM_RE = re.compile(r"[-+]?\d+(?:\.\d+)?")


def clean(value: object) -> str | None:
    """Strip a scalar to a string; nvidia-smi's ``[N/A]`` / ``[Not Supported]`` become None."""
    if value is None:
        return None
    text = str(value).strip()
    if text.lower() in NOT_AVAILABLE:
        return None
    return text


def to_int(value: object) -> int | None:
    """The first integer in ``value`` ("81559 MiB" -> 81559), or None."""
    text = clean(value)
    if text is None:
        return None
    m = _NUM_RE.search(text.replace(",", ""))
    if not m:
        return None
    try:
        return int(float(m.group(0)))
    except ValueError:
        return None


def to_number(value: object) -> int | float | None:
    """The first number in ``value``, as int when integral ("2.5 Gb/sec" -> 2.5, "400" -> 400)."""
    text = clean(value)
    if text is None:
        return None
    m = _NUM_RE.search(text)
    if not m:
        return None
    num = float(m.group(0))
    return int(num) if num.is_integer() else num


def lines_of(text: object) -> list[str]:
    if not isinstance(text, str):
        return []
    return text.replace("\r\n", "\n").split("\n")


def upstream_version(version: str | None) -> str | None:
    """A package version without epoch and distribution revision.

    ``1:2.26.2-1+cuda12.8`` -> ``2.26.2``; ``50.0-2ubuntu0.2`` -> ``50.0``; ``2.10.0-0.5.3`` -> ``2.10.0``.
    (OFED's own ``25.01-0.6.0`` form is read by ``hwfacts_host.parse_ofed_info``, not here.)
    """
    text = clean(version)
    if text is None:
        return None
    if ":" in text.split("-", 1)[0]:
        text = text.split(":", 1)[1]
    return text.partition("-")[0]


def version_matches(found: str | None, pin: object) -> bool:
    """True when ``found`` equals the pin or refines it: pin ``12.8`` accepts ``12.8`` and ``12.8.1``."""
    if found is None or pin is None:
        return False
    found_s, pin_s = str(found).strip(), str(pin).strip()
    return found_s == pin_s or found_s.startswith(pin_s + ".")


def parse_cpu_list(text: str | None) -> list[int]:
    """``0-47,96-143`` -> the CPU numbers; unreadable parts are skipped."""
    cpus: list[int] = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                cpus.extend(range(int(lo), int(hi) + 1))
            else:
                cpus.append(int(lo))
        except ValueError:
            continue
    return cpus
