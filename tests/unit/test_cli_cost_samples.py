"""The briefs a newcomer starts from carry a sample ``cost:`` section, so ``gpufleet report cost -i``
works on the lab and on the example sites as the README's quick start runs it (here from a recorded
``sacct`` of the lab instead of the lab's controller)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from gpufleet_cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SACCT = ROOT / "collections/ansible_collections/gpufleet/cluster/tests/unit/fixtures/cost/sacct_lab_22.05_real.txt"
WINDOW = ["--since", "2026-11-30T06:00:00", "--until", "2026-11-30T07:00:00"]
SITES = ["lab", "example-h100-ib-slurm", "example-h200-roce-k8s"]


def _gpus(site: str) -> int:
    """Pools' gpus_per_node x the hosts of their groups, counted from hosts.yml independently of the CLI."""
    brief = yaml.safe_load((ROOT / "inventories" / site / "brief.yml").read_text())
    hosts = yaml.safe_load((ROOT / "inventories" / site / "hosts.yml").read_text())

    def members(node: dict, group: str) -> set[str]:
        found: set[str] = set()
        for name, child in ((node or {}).get("children") or {}).items():
            if name == group:
                found |= set((child or {}).get("hosts") or {})
                for sub in ((child or {}).get("children") or {}).values():
                    found |= set((sub or {}).get("hosts") or {})
            found |= members(child, group)
        return found

    return sum(p["gpus_per_node"] * len(members(hosts["all"], p["group"])) for p in brief["pools"])


@pytest.mark.parametrize("site", SITES)
def test_report_cost_runs_on_each_sample_brief(capsys, tmp_path, site):
    inventory = str(ROOT / "inventories" / site)
    rc = main(
        ["report", "cost", "-i", inventory, "--sacct", str(SACCT), *WINDOW, "--format", "json", "--dir", str(tmp_path)]
    )
    out, err = capsys.readouterr()
    assert rc == 0, err
    report = json.loads(out)
    brief = yaml.safe_load((ROOT / "inventories" / site / "brief.yml").read_text())
    assert report["usage"]["gpus"] == _gpus(site) > 0
    assert json.dumps(brief["cost"]["baseline"]["name"]) in out


def test_the_lab_brief_prices_its_sixteen_gpus():
    brief = yaml.safe_load((ROOT / "inventories" / "lab" / "brief.yml").read_text())
    assert _gpus("lab") == 16
    assert brief["cost"]["monthly"]["compute"] > 0 and brief["cost"]["unit"]["measure"] == "gpu_hours"
