"""playbooks/preflight.yml sees every host variable the checks read, from the inventory and from -e.

The preflight filter passes the checks only a list of host variables, untemplated; a check reading a
variable left off that list passed silently in site.yml while `gpufleet preflight` (which reads the
inventory itself) caught it. Runs ansible-playbook on the lab inventory: preflight connects to no
host, so the lab need not be up.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lab_playbook import HAVE_VENV, ROOT, run_lab_playbook

GPU_HOSTS = ["lab-gpu01", "lab-gpu02"]


def _preflight(tmp_path: Path, *extra: str) -> tuple[int, list[dict], str]:
    report = tmp_path / "preflight.json"
    args = ["-e", f"preflight_report={report}"]
    for e in extra:
        args += ["-e", e]
    proc = run_lab_playbook(ROOT / "playbooks/preflight.yml", *args, cwd=tmp_path)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc.returncode, json.loads(report.read_text())["violations"], proc.stdout


def _errors(violations: list[dict]) -> set[tuple[str, str | None, str]]:
    return {(v["code"], v["host"], v["field"]) for v in violations if v["severity"] == "error"}


needs_venv = pytest.mark.skipif(not HAVE_VENV, reason="needs the project venv")


@needs_venv
def test_the_lab_passes_and_mpirun_is_a_launcher_slurm_runs(tmp_path):
    rc, violations, out = _preflight(tmp_path, "acceptance_launcher=mpirun")
    assert rc == 0, out[-3000:]
    assert _errors(violations) == set()


@needs_venv
def test_mpijob_on_the_slurm_lab_without_an_image_fails_naming_the_controller(tmp_path):
    rc, violations, out = _preflight(tmp_path, "acceptance_launcher=mpijob")
    assert rc != 0
    assert _errors(violations) == {
        ("ACCEPT_LAUNCHER_PLANE", "lab-ctl01", "acceptance_launcher"),
        ("ACCEPT_IMAGE_MISSING", "lab-ctl01", "acceptance_container_image"),
    }
    assert "ACCEPT_LAUNCHER_PLANE" in out


@needs_venv
def test_scratch_devices_and_the_wipe_consent_from_extra_vars_are_checked_on_every_host(tmp_path):
    rc, violations, _ = _preflight(tmp_path, '{"storage_scratch_devices": "/dev/nvme0n1"}', "storage_scratch_wipe=true")
    assert rc != 0
    hosts = ["lab-ctl01", *GPU_HOSTS]
    assert _errors(violations) == {
        *{("STORAGE_SCRATCH_DEVICES_INVALID", h, "storage_scratch_devices") for h in hosts},
        *{("STORAGE_SCRATCH_WIPE_INVALID", h, "storage_scratch_wipe") for h in hosts},
    }
    wipe = next(v for v in violations if v["code"] == "STORAGE_SCRATCH_WIPE_INVALID")
    assert "found 'true'" in wipe["message"] and '"storage_scratch_wipe": true' in wipe["message"]


@needs_venv
def test_jinja_in_the_brief_is_warned_about_and_never_run(tmp_path):
    """The play reads the brief as data: the warning names the field, and the lookup in it never runs,
    neither when the brief is read nor when the warning is shown."""
    import yaml

    marker = tmp_path / "ran"
    brief = yaml.safe_load((ROOT / "inventories/lab/brief.yml").read_text())
    brief["cluster"]["description"] = "{{ lookup('pipe', 'touch " + str(marker) + "') }}"
    brief_file = tmp_path / "brief.yml"
    brief_file.write_text(yaml.safe_dump(brief))
    rc, violations, out = _preflight(tmp_path, f"brief_file={brief_file}", "acceptance_launcher=mpirun")
    assert rc == 0, out[-3000:]
    (hit,) = [v for v in violations if v["code"] == "SCHEMA_TEMPLATE_SYNTAX"]
    assert hit["field"] == "cluster.description" and hit["severity"] == "warning"
    assert "SCHEMA_TEMPLATE_SYNTAX" in out
    assert not marker.exists()
