"""What the `gpufleet report cost` tests share: a recorded sacct, a site, a cost section and a window."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "collections/ansible_collections/gpufleet/cluster/tests/unit/fixtures"
SACCT = UNIT / "cost" / "sacct_22.05_steps.txt"
SITE = UNIT / "preflight" / "slurm"
COST = {
    "currency": "EUR",
    "monthly": {"compute": 73000, "network": 7300, "storage": 3650, "support": 1460, "operations": 5840},
    "unit": {"name": "training job"},
    "target_units_per_month": 500,
    "baseline": {"name": "GPU rental", "price_per_unit": 1200},
}
WINDOW = ["--since", "2026-03-01", "--until", "2026-03-02"]
