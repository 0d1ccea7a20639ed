"""execution-environment.yml: ansible-builder accepts it, and it installs the project's lock.

``ansible-builder create`` only writes the build context (no registry, no container engine).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EE = ROOT / "execution-environment.yml"
BUILDER = Path(sys.executable).parent / "ansible-builder"


def pins(lines: list[str]) -> dict[str, str]:
    """``name==version`` lines → {normalized name: version}."""
    out = {}
    for line in lines:
        m = re.match(r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^\s;#]+)", line)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(3)
    return out


@pytest.fixture(scope="module")
def ee() -> dict:
    return yaml.safe_load(EE.read_text())


@pytest.fixture(scope="module")
def context(tmp_path_factory) -> Path:
    builder = BUILDER if BUILDER.exists() else shutil.which("ansible-builder")
    if not builder:
        pytest.skip("ansible-builder is not installed (make venv)")
    ctx = tmp_path_factory.mktemp("ee") / "context"
    proc = subprocess.run(
        # The file name would otherwise follow whichever container engine is installed.
        [str(builder), "create", "-f", str(EE), "-c", str(ctx), "--output-filename", "Containerfile"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return ctx


def test_context_is_generated(context, ee):
    containerfile = (context / "Containerfile").read_text()
    assert f'EE_BASE_IMAGE="{ee["images"]["base_image"]["name"]}"' in containerfile
    assert 'PYCMD="/usr/bin/python3.11"' in containerfile
    for name in ("requirements.txt", "requirements.yml", "bindep.txt"):
        assert (context / "_build" / name).is_file(), name


def hashes(text: str) -> dict[str, set[str]]:
    """A pip-compile lock's text → {normalized name: the set of its ``--hash`` values}."""
    out: dict[str, set[str]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        m = re.match(r"([A-Za-z0-9_.\-]+)==", block)
        if m:
            out[m.group(1).lower().replace("_", "-")] = set(re.findall(r"--hash=(sha256:[0-9a-f]{64})", block))
    return out


def test_python_requirements_are_the_lock(context, ee):
    """The image installs requirements/ee-py3.11.txt: the versions and hashes of the 3.11 lock."""
    assert ee["dependencies"]["python"] == "requirements/ee-py3.11.txt"
    ee_lock = (ROOT / "requirements/ee-py3.11.txt").read_text()
    assert (context / "_build/requirements.txt").read_text() == ee_lock
    toolchain = (ROOT / "requirements/py3.11.txt").read_text()
    locked, locked_hashes = pins(toolchain.splitlines()), hashes(toolchain)
    ee_pins, ee_hashes = pins(ee_lock.splitlines()), hashes(ee_lock)
    for name, version in ee_pins.items():
        assert locked.get(name) == version, f"{name}: EE lock {version}, requirements/py3.11.txt {locked.get(name)}"
        assert ee_hashes[name] and ee_hashes[name] == locked_hashes[name], name
    for key, name in (("ansible_core", "ansible-core"), ("ansible_runner", "ansible-runner")):
        assert ee["dependencies"][key]["package_pip"] == f"{name}=={locked[name]}"
    # What the plugins import on the controller must be in the EE.
    assert {"netaddr", "pyyaml", "jinja2", "matplotlib", "ansible-core"} <= set(ee_pins)


def test_the_builders_introspection_keeps_the_hashes(context, tmp_path):
    """ansible-builder rewrites the requirements in the image (introspect.py): pip must still get the
    hashes, each under its requirement, or the image would install whatever the index serves."""
    out = tmp_path / "requirements.txt"
    proc = subprocess.run(
        [
            sys.executable,
            str(context / "_build/scripts/introspect.py"),
            "introspect",
            f"--user-pip={context / '_build/requirements.txt'}",
            f"--write-pip={out}",
            str(tmp_path / "no-collections"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    written = out.read_text()
    expected = hashes((ROOT / "requirements/ee-py3.11.txt").read_text())
    assert hashes(written) == expected


def test_collections_are_the_repository_requirements(context):
    assert (context / "_build/requirements.yml").read_bytes() == (ROOT / "collections/requirements.yml").read_bytes()


def test_system_packages_are_bindep(context, ee):
    lines = (context / "_build/bindep.txt").read_text().splitlines()
    assert lines == ee["dependencies"]["system"]
    assert all(re.match(r"^[A-Za-z0-9_.+\-]+ \[platform:rpm( compile)?\]$", line) for line in lines), lines
    assert "openssh-clients [platform:rpm]" in lines
