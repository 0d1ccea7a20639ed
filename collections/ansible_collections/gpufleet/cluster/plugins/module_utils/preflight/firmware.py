# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Phase: the firmware minimums of the hardware gate (``acceptance.firmware.min``, a pool's
``acceptance.firmware.min``), each in a format the gate can order (``hw/firmware.py``)."""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.hw import firmware
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make


def check_firmware(brief: dict) -> list[dict]:
    """``ACCEPT_FIRMWARE_MIN`` for each minimum that is not in its kind's format, naming its field."""
    out: list[dict] = []
    places = [("acceptance.firmware.min", ((brief.get("acceptance") or {}).get("firmware") or {}).get("min"))]
    for i, pool in enumerate(brief.get("pools") or []):
        if isinstance(pool, dict):
            mins = ((pool.get("acceptance") or {}).get("firmware") or {}).get("min")
            places.append((f"pools[{i}].acceptance.firmware.min", mins))
    for where, mins in places:
        for kind in firmware.KINDS:
            value = (mins or {}).get(kind)
            if value is not None and firmware.parse(kind, value) is None:
                out.append(make("ACCEPT_FIRMWARE_MIN", f"{where}.{kind}", expected=firmware.FORMATS[kind], found=value))
    return out


__all__ = ["check_firmware"]
