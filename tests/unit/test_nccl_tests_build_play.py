"""The nccl role's nccl-tests steps (roles/nccl/tasks/tests.yml) on a local host: downloaded, unpacked,
built, installed and recorded on a first run; on a re-run one look at the host skips every step; what the
record names (the source, NCCL, the make arguments) and a missing binary rebuild, and nothing else does.

The source is a local tarball whose Makefile stands in for nccl-tests' (no CUDA here): it writes each
binary under build/ with the make arguments it was given, and logs every build.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from lab_playbook import VENV_BIN, ansible_env, local_hosts, task_results

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

BINARIES = ["all_reduce_perf", "all_gather_perf"]
MAKEFILE = """all:
\tmkdir -p build
\tfor b in {binaries}; do echo "CUDA_HOME=$(CUDA_HOME) NVCC_GENCODE=$(NVCC_GENCODE)" > build/$$b; done
\techo built >> {log}
"""

PLAY = """
- name: nccl-tests
  hosts: h1
  gather_facts: false
  tasks:
    - name: Build nccl-tests
      ansible.builtin.include_role:
        name: nccl
        tasks_from: tests
"""


@pytest.fixture
def site(tmp_path):
    """The play, its inventory and variables, and a source tarball with a checksum file beside it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        text = MAKEFILE.format(binaries=" ".join(BINARIES), log=tmp_path / "builds.log").encode()
        info = tarfile.TarInfo("nccl-tests-9.9.9/Makefile")
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    tarball = tmp_path / "nccl-tests-9.9.9.tar.gz"
    tarball.write_bytes(buf.getvalue())
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "hosts").write_text(local_hosts("h1"))
    variables = {
        "nccl_version": "2.26.2",
        "nccl_cuda_version": "12.8",
        "nccl_tests_version": "9.9.9",
        "nccl_tests_url": f"file://{tarball}",
        "nccl_tests_checksum": "sha256:" + hashlib.sha256(buf.getvalue()).hexdigest(),
        "nccl_tests_src_dir": str(tmp_path / "opt" / "src"),
        "nccl_tests_bin_dir": str(tmp_path / "opt" / "bin"),
        "nccl_tests_binaries": BINARIES,
        "nccl_tests_mpi_home": "/usr/lib/openmpi",
        "nccl_tests_make_variables": {},
        "nccl_tests_nvcc_gencode": "",
        "ansible_facts": {"os_family": "Debian", "architecture": "x86_64", "processor_nproc": 2},
    }
    (tmp_path / "vars.json").write_text(json.dumps(variables))
    return tmp_path


def run(site: Path, *args: str, **overrides) -> dict[str, str]:
    """Run the play; each task's status on h1 by name (changed, ok, skipped)."""
    variables = json.loads((site / "vars.json").read_text()) | overrides
    (site / "run.json").write_text(json.dumps(variables))
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts", "play.yml", "-e", "@run.json", *args]
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    proc = subprocess.run(argv, cwd=site, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    status = {}
    for name, _host, result in task_results(json.loads(proc.stdout)):
        status[name] = "skipped" if result.get("skipped") else "changed" if result.get("changed") else "ok"
    return status


def builds(site: Path) -> int:
    log = site / "builds.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def steps(status: dict[str, str]) -> dict[str, str]:
    """The status of the download, unpack, build, install and record steps."""
    words = ("Download", "Unpack", "Build nccl-tests with", "Install the nccl-tests", "Record")
    return {w: next(s for n, s in status.items() if n.split(" : ")[-1].startswith(w)) for w in words}


def test_a_first_run_builds_and_records_a_re_run_skips_every_step(site):
    first = steps(run(site))
    assert first == dict.fromkeys(first, "changed")
    assert builds(site) == 1
    bin_dir = site / "opt" / "bin"
    assert sorted(p.name for p in bin_dir.iterdir()) == sorted([*BINARIES, "BUILD-INFO"])
    record = (bin_dir / "BUILD-INFO").read_text()
    assert "nccl-tests 9.9.9 from file://" in record and "NCCL 2.26.2 for CUDA 12.8" in record
    assert "make CUDA_HOME=/usr/local/cuda-12.8 MPI=1 MPI_HOME=/usr/lib/openmpi" in record
    again = run(site)
    assert steps(again) == dict.fromkeys(first, "skipped")
    assert not any(s == "changed" for s in again.values()) and builds(site) == 1


def test_new_make_arguments_rebuild_once(site):
    run(site)
    changed = steps(run(site, nccl_tests_nvcc_gencode="-gencode=arch=compute_90,code=sm_90"))
    assert (changed["Build nccl-tests with"], changed["Install the nccl-tests"], changed["Record"]) == ("changed",) * 3
    assert "NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90" in (site / "opt" / "bin" / "all_gather_perf").read_text()
    assert builds(site) == 2
    assert "changed" not in run(site, nccl_tests_nvcc_gencode="-gencode=arch=compute_90,code=sm_90").values()
    assert builds(site) == 2


def test_a_missing_binary_or_a_record_edited_by_hand_rebuilds(site):
    run(site)
    (site / "opt" / "bin" / "all_gather_perf").unlink()
    assert steps(run(site))["Build nccl-tests with"] == "changed"
    assert (site / "opt" / "bin" / "all_gather_perf").exists()
    (site / "opt" / "bin" / "BUILD-INFO").write_text("nccl-tests 9.9.9\n")
    assert steps(run(site))["Build nccl-tests with"] == "changed"
    assert builds(site) == 3


def test_a_replaced_tarball_is_downloaded_again(site):
    run(site)
    tarball = site / "opt" / "src" / "nccl-tests-9.9.9.tar.gz"
    tarball.write_bytes(b"not the pinned source")
    status = steps(run(site))
    assert status["Download"] == "changed" and status["Build nccl-tests with"] == "skipped"
    assert (
        hashlib.sha256(tarball.read_bytes()).hexdigest()
        == json.loads((site / "vars.json").read_text())["nccl_tests_checksum"].split(":")[1]
    )


def test_a_preview_of_a_fresh_host_fails_nothing_and_creates_nothing(site):
    status = run(site, "--check")
    assert status[next(n for n in status if "Create the nccl-tests" in n)] == "changed"
    assert not (site / "opt").exists() and builds(site) == 0
