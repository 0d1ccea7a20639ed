#!/usr/bin/python3
# TEST DOUBLE - not NVIDIA's dcgm-exporter. It lives only under molecule/ and is packaged by
# build-repo.sh as /usr/bin/dcgm-exporter in the stand-in datacenter-gpu-manager-exporter package.
"""Stand-in for NVIDIA's dcgm-exporter, answering from a gpufleet hardware profile.

Serves /metrics in dcgm-exporter's Prometheus text format: for every field of the collectors CSV
(``-f``, the real file format: ``DCGM_FIELD, gauge|counter|label, help``) one HELP and TYPE line,
then one sample per GPU of the profile with dcgm-exporter's labels (gpu, UUID, pci_bus_id, device,
modelName, Hostname, plus the CSV's label fields). Link fields (DCGM_FI_DEV_NVLINK_GET_STATE) get one
sample per NVLink with an ``nvlink`` label. With ``--hpc-job-mapping-dir`` every scrape reads one file
per GPU index (job ids, one per line) and adds ``hpc_job`` to that GPU's samples, one copy per job,
as dcgm-exporter's HPC job mapping does.

Values: a healthy idle GPU (as the nvidia-smi double reports it: 31 C, 69.87 W, 0 % busy), NVLink
states from the profile's ``nvlink`` (a GPU of a missing pair has its links down, a degraded pair
loses the missing links), and, optionally, the profile's ``telemetry.gpus.<index>`` mapping of DCGM
field name to value (an XID, ECC double-bit errors, a row-remap failure, throttle time ...).
An unknown field in the CSV or a profile with no GPU stops the exporter, as DCGM would.
Python 3 stdlib only. The profile: $GPUFLEET_DOUBLES_PROFILE, else /etc/gpufleet-doubles/hw-profile.json.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import socket
import sys
import time

PROFILE = os.environ.get("GPUFLEET_DOUBLES_PROFILE", "/etc/gpufleet-doubles/hw-profile.json")
VERSION = "@VERSION@"
START = time.time()

# Field -> value for a healthy, idle GPU (p: profile, g: the GPU's entry, t: seconds since start).
_HEALTHY = {
    "DCGM_FI_DEV_SM_CLOCK": lambda p, g, t: 1980,
    "DCGM_FI_DEV_MEM_CLOCK": lambda p, g, t: 2619,
    "DCGM_FI_DEV_MEMORY_TEMP": lambda p, g, t: 35,
    "DCGM_FI_DEV_GPU_TEMP": lambda p, g, t: 31,
    "DCGM_FI_DEV_POWER_USAGE": lambda p, g, t: 69.87,
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": lambda p, g, t: int(69.87 * 1000 * (t + 3600)),
    "DCGM_FI_DEV_PCIE_TX_THROUGHPUT": lambda p, g, t: 0,
    "DCGM_FI_DEV_PCIE_RX_THROUGHPUT": lambda p, g, t: 0,
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": lambda p, g, t: 0,
    "DCGM_FI_DEV_GPU_UTIL": lambda p, g, t: 0,
    "DCGM_FI_DEV_MEM_COPY_UTIL": lambda p, g, t: 0,
    "DCGM_FI_DEV_ENC_UTIL": lambda p, g, t: 0,
    "DCGM_FI_DEV_DEC_UTIL": lambda p, g, t: 0,
    "DCGM_FI_DEV_XID_ERRORS": lambda p, g, t: 0,
    "DCGM_FI_DEV_POWER_VIOLATION": lambda p, g, t: 0,
    "DCGM_FI_DEV_THERMAL_VIOLATION": lambda p, g, t: 0,
    "DCGM_FI_DEV_SYNC_BOOST_VIOLATION": lambda p, g, t: 0,
    "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION": lambda p, g, t: 0,
    "DCGM_FI_DEV_LOW_UTIL_VIOLATION": lambda p, g, t: 0,
    "DCGM_FI_DEV_RELIABILITY_VIOLATION": lambda p, g, t: 0,
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": lambda p, g, t: 1,  # GPU idle
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": lambda p, g, t: 1,
    "DCGM_FI_DEV_FB_FREE": lambda p, g, t: int(g.get("memory_mib", p.get("memory_mib", 0))) - 527,
    "DCGM_FI_DEV_FB_USED": lambda p, g, t: 527,
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": lambda p, g, t: 0,
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": lambda p, g, t: 0,
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": lambda p, g, t: 0,
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": lambda p, g, t: 0,
    "DCGM_FI_DEV_RETIRED_SBE": lambda p, g, t: 0,
    "DCGM_FI_DEV_RETIRED_DBE": lambda p, g, t: 0,
    "DCGM_FI_DEV_RETIRED_PENDING": lambda p, g, t: 0,
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": lambda p, g, t: 0,
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": lambda p, g, t: 0,
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": lambda p, g, t: 0,
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": lambda p, g, t: 0,
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": lambda p, g, t: 0,
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": lambda p, g, t: 0,
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": lambda p, g, t: 0,
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": lambda p, g, t: 0,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": lambda p, g, t: 0,
    "DCGM_FI_DEV_ROW_REMAP_PENDING": lambda p, g, t: 0,
}
_LINK_FIELDS = {"DCGM_FI_DEV_NVLINK_GET_STATE"}
_LABEL_FIELDS = {
    "DCGM_FI_DRIVER_VERSION": lambda p, g: p.get("driver_version", ""),
    "DCGM_FI_DEV_NAME": lambda p, g: g.get("name", p.get("gpu_name", "")),
    "DCGM_FI_DEV_SERIAL": lambda p, g: g.get("serial", ""),
    "DCGM_FI_DEV_VBIOS_VERSION": lambda p, g: p.get("vbios_version", ""),
}
KNOWN = set(_HEALTHY) | _LINK_FIELDS | set(_LABEL_FIELDS)


class ConfigError(Exception):
    pass


def read_collectors(path: str) -> list[tuple[str, str, str]]:
    """The collectors CSV as (field, type, help); comments and blank lines skipped."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for number, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = [x.strip() for x in line.split(",", 2)]
            if len(parts) < 2:
                raise ConfigError(f"{path}:{number}: expected 'DCGM_FIELD, type, help', found {line!r}")
            field, kind = parts[0], parts[1]
            if field not in KNOWN:
                raise ConfigError(f"{path}:{number}: could not find DCGM field {field}")
            if kind not in ("gauge", "counter", "label"):
                raise ConfigError(f"{path}:{number}: could not find Prometheus metric type '{kind}'")
            out.append((field, kind, parts[2] if len(parts) > 2 else ""))
    return out


def load_profile(path: str = PROFILE) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return {}


def nvlink_states(profile: dict, index: int) -> list[int]:
    """One state per NVLink of GPU ``index``: 1 up, 0 down (NVML's nvlink state)."""
    nvl = profile.get("nvlink") or {}
    links = int(nvl.get("links", 0))
    if links <= 0:
        return []
    down = 0
    for pair in nvl.get("missing_pairs") or []:
        if index in pair:
            down = links
    for d in nvl.get("degraded_pairs") or []:
        if index in d.get("pair", []):
            down = max(down, links - int(d.get("links", links)))
    return [1] * (links - down) + [0] * down


def jobs_of(mapping_dir: str | None, index: int) -> list[str]:
    if not mapping_dir:
        return []
    try:
        with open(os.path.join(mapping_dir, str(index)), encoding="utf-8") as fh:
            return [line.strip() for line in fh if line.strip()]
    except OSError:
        return []


def _fmt(value) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _labels(pairs: list[tuple[str, str]]) -> str:
    def esc(v: str) -> str:
        return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in pairs) + "}"


def render(collectors, profile: dict, hostname: str, mapping_dir: str | None = None, now: float | None = None) -> str:
    """The /metrics page."""
    t = (now if now is not None else time.time()) - START
    gpus = sorted(profile.get("gpus") or [], key=lambda g: g["index"])
    overrides = (profile.get("telemetry") or {}).get("gpus") or {}
    label_fields = [f for f, kind, _ in collectors if kind == "label"]
    lines = []
    for field, kind, help_text in collectors:
        if kind == "label":
            continue
        lines.append(f"# HELP {field} {help_text}")
        lines.append(f"# TYPE {field} {kind}")
        for g in gpus:
            idx = g["index"]
            base = [
                ("gpu", str(idx)),
                ("UUID", g["uuid"]),
                ("pci_bus_id", g["bus_id"]),
                ("device", f"nvidia{idx}"),
                ("modelName", g.get("name", profile.get("gpu_name", ""))),
                ("Hostname", hostname),
            ]
            base += [(f, _LABEL_FIELDS[f](profile, g)) for f in label_fields]
            jobs = jobs_of(mapping_dir, idx) or [None]
            if field in _LINK_FIELDS:
                samples = [([("nvlink", str(k))], s) for k, s in enumerate(nvlink_states(profile, idx))]
            else:
                value = (overrides.get(str(idx)) or {}).get(field)
                samples = [([], value if value is not None else _HEALTHY[field](profile, g, t))]
            for extra, value in samples:
                for job in jobs:
                    labels = base + extra + ([("hpc_job", job)] if job else [])
                    lines.append(f"{field}{_labels(labels)} {_fmt(value)}")
    return "\n".join(lines) + "\n"


def check_hostengine(info: str) -> None:
    """--remote-hostengine-info HOST:PORT: connect once, as dcgm-exporter does at start."""
    host, _, port = info.rpartition(":")
    try:
        with socket.create_connection((host or "localhost", int(port or 5555)), timeout=5):
            pass
    except (OSError, ValueError) as exc:
        raise ConfigError(f"could not connect to the DCGM host engine at {info}: {exc}") from exc


def parse_args(argv):
    env = os.environ.get
    ap = argparse.ArgumentParser(prog="dcgm-exporter")
    ap.add_argument(
        "-f", "--collectors", default=env("DCGM_EXPORTER_COLLECTORS", "/etc/dcgm-exporter/default-counters.csv")
    )
    ap.add_argument("-a", "--address", default=env("DCGM_EXPORTER_LISTEN", ":9400"))
    ap.add_argument("-c", "--collect-interval", type=int, default=int(env("DCGM_EXPORTER_INTERVAL", "30000")))
    ap.add_argument("-r", "--remote-hostengine-info", default=env("DCGM_REMOTE_HOSTENGINE_INFO", ""))
    ap.add_argument("--hpc-job-mapping-dir", default=env("DCGM_HPC_JOB_MAPPING_DIR", ""))
    ap.add_argument("-k", "--kubernetes", action="store_true")
    ap.add_argument("-v", "--version", action="store_true")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.version:
        print(f"dcgm-exporter version {VERSION} (gpufleet test double)")
        return 0
    try:
        collectors = read_collectors(args.collectors)
        if args.remote_hostengine_info:
            check_hostengine(args.remote_hostengine_info)
        if not load_profile().get("gpus"):
            raise ConfigError("DCGM found no GPU (no hardware profile at " + PROFILE + ")")
    except (OSError, ConfigError) as exc:
        sys.stderr.write(f"dcgm-exporter: {exc}\n")
        return 1
    host, _, port = args.address.rpartition(":")
    hostname = socket.gethostname()
    mapping_dir = args.hpc_job_mapping_dir or None

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] == "/metrics":
                body = render(collectors, load_profile(), hostname, mapping_dir).encode()
                ctype = "text/plain; version=0.0.4; charset=utf-8"
            elif self.path == "/health":
                body, ctype = b"KO\n" if not load_profile().get("gpus") else b"OK\n", "text/plain"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    http.server.ThreadingHTTPServer.allow_reuse_address = True
    server = http.server.ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)
    sys.stdout.write(f"Starting webserver on {args.address} (gpufleet test double {VERSION})\n")
    sys.stdout.flush()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
